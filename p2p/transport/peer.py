"""One connected peer as the switch holds it: its channel, handshake and outbound queue.

The outbound queue (``Outbox``) is bounded in messages and in bytes: a peer that asks for
blocks and never reads them pins at most ``OUTBOX_BYTES`` of them here, however often it asks.

What reactors know about a peer (blocks and transactions it has, its chain position, the
ranges it serves) lives in the reactor that owns that concern, keyed by ``Peer.id``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from p2p.transport.channel import Channel
from p2p.wire.messages import (
    BlockMessage,
    Handshake,
    HeaderRange,
    Notice,
    Outbound,
    RawBlock,
    Request,
    SnapshotChunk,
    SnapshotManifest,
    TransactionMessage,
    TxAnnounce,
    TxRequest,
)

# Messages waiting for one peer at most. A peer too slow to drain them loses gossip (it will
# catch up through sync ranges) rather than slowing everyone else down.
OUTBOX_SIZE = 2000
# Bytes waiting for one peer at most. Counting messages alone let 2,000 served blocks of up to
# 4 MiB each pile up for a peer that asks and never reads (RSS 194 -> 1,225 MiB in 13 s).
# 16 MiB keeps a 1 Gbit/s link busy for over 100 ms past the channel's own 4 MiB send buffer,
# which the writer refills long before; a block bigger than this still goes out, alone.
OUTBOX_BYTES = 16 * 1024 * 1024
# What a message without bulk (a ping, a request, a go_away) is counted as: more than any of
# them encodes to, so the byte bound holds without encoding anything twice.
SMALL_MESSAGE_BYTES = 256


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


def wire_size(message: Outbound) -> int:
    """About the bytes ``message`` takes on the wire, without encoding it: its bulk (block,
    transaction, chunk, headers, ids) exactly, plus ``SMALL_MESSAGE_BYTES`` for the rest."""
    if isinstance(message, BlockMessage | TransactionMessage | RawBlock):
        bulk = len(message.raw)
    elif isinstance(message, SnapshotChunk):
        bulk = len(message.data)
    elif isinstance(message, HeaderRange):
        bulk = sum(len(h) for h in message.headers)
    elif isinstance(message, SnapshotManifest):
        bulk = sum(len(h) for h in message.hashes)
    elif isinstance(message, Notice | Request | TxAnnounce | TxRequest):
        bulk = 32 * len(message.ids)
    else:
        bulk = 0
    return bulk + SMALL_MESSAGE_BYTES


class Outbox:
    """One peer's outbound queue, bounded in messages and in bytes (``wire_size``).

    ``offer`` drops what does not fit (gossip: the peer catches up through sync ranges);
    ``put`` waits for room (a range or an answer being served, whose producer must slow down
    to the peer's pace). A message bigger than the byte bound fits an empty outbox, so no
    message is unsendable. Only the peer's writer takes messages out (``get``)."""

    def __init__(self, max_messages: int = OUTBOX_SIZE, max_bytes: int = OUTBOX_BYTES) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.bytes = 0  # queued, by ``wire_size``
        self._queue: deque[tuple[Outbound, int]] = deque()
        self._filled = asyncio.Event()  # set when something was queued
        self._room = asyncio.Event()  # set when something was taken out

    def qsize(self) -> int:
        return len(self._queue)

    def empty(self) -> bool:
        return not self._queue

    def offer(self, message: Outbound) -> bool:
        """Queue ``message`` if it fits; False (and nothing queued) if not."""
        size = wire_size(message)
        if not self._fits(size):
            return False
        self._push(message, size)
        return True

    async def put(self, message: Outbound) -> None:
        """Queue ``message``, waiting until it fits."""
        size = wire_size(message)
        while not self._fits(size):
            self._room.clear()
            await self._room.wait()
        self._push(message, size)

    async def get(self) -> Outbound:
        """The oldest message, waiting for one."""
        while not self._queue:
            self._filled.clear()
            await self._filled.wait()
        return self.get_nowait()

    def get_nowait(self) -> Outbound:
        """The oldest message; raises ``asyncio.QueueEmpty`` if there is none."""
        if not self._queue:
            raise asyncio.QueueEmpty
        message, size = self._queue.popleft()
        self.bytes -= size
        self._room.set()
        return message

    def take_burst(self, max_bytes: int, max_messages: int) -> list[Outbound]:
        """The oldest messages, in order, while each fits what is left of ``max_bytes`` (by
        ``wire_size``) and they number at most ``max_messages``; none if the oldest does not
        fit. The writer sends them in one write (``Channel.send_many``)."""
        out: list[Outbound] = []
        while self._queue and len(out) < max_messages and self._queue[0][1] <= max_bytes:
            message, size = self._queue.popleft()
            self.bytes -= size
            max_bytes -= size
            out.append(message)
        if out:
            self._room.set()
        return out

    def discard(self, kind: type) -> int:
        """Drop every queued message of type ``kind``; returns the bytes freed. A served range
        replaced by a new request takes its unsent blocks out with it."""
        kept = deque(entry for entry in self._queue if not isinstance(entry[0], kind))
        freed = self.bytes - sum(size for _, size in kept)
        self._queue, self.bytes = kept, self.bytes - freed
        if freed:
            self._room.set()
        return freed

    def clear(self) -> None:
        """Drop everything queued (the session is over: nothing will send it)."""
        self._queue.clear()
        self.bytes = 0
        self._room.set()

    def _fits(self, size: int) -> bool:
        if not self._queue:
            return True
        return len(self._queue) < self.max_messages and self.bytes + size <= self.max_bytes

    def _push(self, message: Outbound, size: int) -> None:
        self._queue.append((message, size))
        self.bytes += size
        self._filled.set()


@dataclass(eq=False)
class Peer:
    channel: Channel
    node_id: bytes
    handshake: Handshake
    dialed: bool
    dial_address: tuple[str, int] | None = None  # the address we dialled, to stop redialling
    silent: bool = False  # dropped for not answering keepalives
    broken: Exception | None = None  # how the channel ended, if it did not end cleanly
    outbox: Outbox = field(default_factory=Outbox)
    last_recv: float = field(default_factory=time.monotonic)
    rtt: float | None = None
    connected_at: float = field(default_factory=time.time)

    @property
    def id(self) -> str:
        return peer_id_of(self.node_id)

    def offer(self, message: Outbound) -> bool:
        """Queue ``message`` unless the outbox is full (in messages or bytes)."""
        return self.outbox.offer(message)

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
