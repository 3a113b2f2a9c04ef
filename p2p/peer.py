"""One connected peer as the switch holds it: its channel, handshake and outbound queue.

What reactors know about a peer (blocks and transactions it has, its chain position, the
ranges it serves) lives in the reactor that owns that concern, keyed by ``Peer.id``.
"""

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


class KnownIds:
    """Per peer, the recent ids (of blocks or transactions) it has: sent us, or got from us.
    A relay offers an item only to the peers that do not know it yet."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._known: dict[str, RecentSet] = {}

    def add_peer(self, peer_id: str) -> None:
        self._known[peer_id] = RecentSet(self._size)

    def remove_peer(self, peer_id: str) -> None:
        self._known.pop(peer_id, None)

    def learn(self, peer_id: str, item: bytes) -> bool:
        """``peer_id`` has ``item`` now; False if it had it already (or is not connected)."""
        known = self._known.get(peer_id)
        return known is not None and known.add(item)


@dataclass(eq=False)
class Peer:
    channel: Channel
    node_id: bytes
    handshake: Handshake
    dialed: bool
    dial_address: tuple[str, int] | None = None  # the address we dialled, to stop redialling
    silent: bool = False  # dropped for not answering keepalives
    broken: Exception | None = None  # how the channel ended, if it did not end cleanly
    outbox: asyncio.Queue[Outbound] = field(default_factory=lambda: asyncio.Queue(OUTBOX_SIZE))
    last_recv: float = field(default_factory=time.monotonic)
    rtt: float | None = None
    connected_at: float = field(default_factory=time.time)

    @property
    def id(self) -> str:
        return peer_id_of(self.node_id)

    def offer(self, message: Outbound) -> bool:
        """Queue ``message`` unless the outbox is full."""
        try:
            self.outbox.put_nowait(message)
        except asyncio.QueueFull:
            return False
        return True

    def info(self) -> dict[str, object]:
        hs, stats = self.handshake, self.channel.stats()
        return {
            "peer": self.id,
            "address": hs.p2p_address,
            "remote": self.channel.remote,
            "transport": stats.transport,
            "direction": "outbound" if self.dialed else "inbound",
            "head": hs.head_num,
            "lib": hs.lib_num,
            "rtt_ms": None if self.rtt is None else round(self.rtt * 1000, 2),
            "bytes_sent": stats.bytes_sent,
            "bytes_received": stats.bytes_received,
            "tcp_bytes_sent": stats.tcp_bytes_sent,
            "tcp_bytes_received": stats.tcp_bytes_received,
            "rdma_writes": stats.rdma_writes,
            "rdma_completions": stats.rdma_completions,
            "rdma_landed_bytes": stats.rdma_landed_bytes,
            "connected_at": self.connected_at,
        }


def peer_id_of(node_id: bytes) -> str:
    """The short id peers go by in logs, the RPC and the sync manager."""
    return node_id.hex()[:16]
