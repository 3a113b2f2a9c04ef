"""The Channel interface: one connection to one peer, carrying typed messages.

Implementations: ``TcpChannel`` (asyncio streams, with or without TLS), ``RdmaChannel``
(``p2p.rdma``) and the in-memory ``MemoryChannel`` of the tests (``tests.support.channels``).
Everything above a channel is the same for every transport. The contract (checked for every
implementation by ``tests/p2p/transport/test_channel_contract.py``):

- ``send`` (and ``send_many``, several at once) delivers messages in order; it waits
  (back-pressure) while the channel's bounded buffer is full, and raises ``ChannelClosed``
  once the channel is closed or broken.
- ``recv`` returns the next message; raises ``ChannelClosed`` at a clean end of stream or
  after ``close``, ``ChannelBroken`` when the transport fails, and ``MalformedMessage`` (or
  ``OversizedFrame``) for bytes that are not a valid message — after which the channel is
  closed, since the stream can no longer be trusted.
- ``close`` is idempotent and makes a pending ``recv`` on the other end see ``ChannelClosed``.
- ``stats`` is a typed snapshot of the channel's counters (``ChannelStats``).

A channel may carry a message in a form of its own, provided ``recv`` at the other end returns
the message that was sent. This is the one documented hook for transport tricks: the RDMA
channel sends a ``SyncRequest`` or ``SnapshotChunkRequest`` naming its landing zone and writes
the range's blocks or the chunk straight into the zone the peer named (``p2p.rdma.channel``);
nothing above a channel sees it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from p2p.wire.messages import Message, Outbound


@dataclass(frozen=True, slots=True)
class ChannelStats:
    """A channel's counters. ``tcp_*`` count the TCP connection underneath (for a TCP channel
    the same bytes; for an RDMA channel the connection its queue pair was set up over);
    ``rdma_*`` are zero unless the channel is RDMA."""

    transport: str
    bytes_sent: int
    bytes_received: int
    tcp_bytes_sent: int
    tcp_bytes_received: int
    rdma_writes: int = 0
    rdma_completions: int = 0
    rdma_landed_bytes: int = 0


class Channel(ABC):
    """The interface, plus the bookkeeping every implementation shares: the peer's address,
    whether the channel is closed, and bytes sent and received (whole frames)."""

    transport: str = "?"

    def __init__(self, remote: str) -> None:
        self._remote = remote
        self._closed = False
        self._sent = 0
        self._received = 0

    @property
    def remote(self) -> str:
        """The peer's address, for logs."""
        return self._remote

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def bytes_sent(self) -> int:
        return self._sent

    @property
    def bytes_received(self) -> int:
        return self._received

    def stats(self) -> ChannelStats:
        return ChannelStats(self.transport, self._sent, self._received, self._sent, self._received)

    @abstractmethod
    async def send(self, message: Outbound) -> None: ...

    async def send_many(self, messages: Sequence[Outbound]) -> None:
        """``send`` each of ``messages``, in order. A channel that can hand a burst to its
        transport in one write overrides it (``TcpChannel``)."""
        for message in messages:
            await self.send(message)

    @abstractmethod
    async def recv(self) -> Message: ...

    @abstractmethod
    async def close(self) -> None: ...
