"""One connected peer: its channel, what it knows, and its outbound queue."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from p2p.channel import Channel
from p2p.messages import Handshake, Outbound

# Messages waiting for one peer at most. A peer too slow to drain them loses gossip (it will
# catch up through sync ranges) rather than slowing everyone else down.
OUTBOX_SIZE = 2000
KNOWN_IDS = 20_000


class RecentSet:
    """A set that forgets its oldest members beyond ``size``."""

    def __init__(self, size: int) -> None:
        self._order: deque[bytes] = deque()
        self._members: set[bytes] = set()
        self._size = size

    def __contains__(self, item: object) -> bool:
        return item in self._members

    def add(self, item: bytes) -> bool:
        """Add ``item``; False if it was already there."""
        if item in self._members:
            return False
        self._members.add(item)
        self._order.append(item)
        if len(self._order) > self._size:
            self._members.discard(self._order.popleft())
        return True


@dataclass(eq=False)
class Peer:
    channel: Channel
    node_id: bytes
    handshake: Handshake
    dialed: bool
    dial_address: tuple[str, int] | None = None  # the address we dialled, to stop redialling
    tcp: Channel | None = None  # the TCP connection an RDMA channel was set up over
    silent: bool = False  # dropped for not answering keepalives
    broken: Exception | None = None  # how the channel ended, if it did not end cleanly
    outbox: asyncio.Queue[Outbound] = field(default_factory=lambda: asyncio.Queue(OUTBOX_SIZE))
    known_blocks: RecentSet = field(default_factory=lambda: RecentSet(KNOWN_IDS))
    known_txs: RecentSet = field(default_factory=lambda: RecentSet(KNOWN_IDS))
    last_recv: float = field(default_factory=time.monotonic)
    rtt: float | None = None
    bad_requests: int = 0
    serving: asyncio.Task[None] | None = None
    connected_at: float = field(default_factory=time.time)

    @property
    def id(self) -> str:
        return self.node_id.hex()[:16]

    def offer(self, message: Outbound) -> bool:
        """Queue ``message`` unless the outbox is full."""
        try:
            self.outbox.put_nowait(message)
        except asyncio.QueueFull:
            return False
        return True

    def info(self) -> dict[str, object]:
        hs = self.handshake
        return {
            "peer": self.id,
            "address": hs.p2p_address,
            "remote": self.channel.remote,
            "transport": self.channel.transport,
            "direction": "outbound" if self.dialed else "inbound",
            "head": hs.head_num,
            "lib": hs.lib_num,
            "rtt_ms": None if self.rtt is None else round(self.rtt * 1000, 2),
            "bytes_sent": self.channel.bytes_sent,
            "bytes_received": self.channel.bytes_received,
            "tcp_bytes_sent": (self.tcp or self.channel).bytes_sent,
            "tcp_bytes_received": (self.tcp or self.channel).bytes_received,
            "rdma_writes": getattr(self.channel, "writes", 0),
            "rdma_completions": getattr(self.channel, "completions", 0),
            "rdma_landed_bytes": getattr(self.channel, "landed_bytes", 0),
            "connected_at": self.connected_at,
        }
