"""The fetching side of state sync: one download's state and the checks its pieces must pass.

A ``Fetcher`` is the state of one download of the trusted block's snapshot: the peers
serving it (each one's offer and its chunk requests in flight), each peer's strikes for
requests it let lapse and the peers dropped for them, which chunk is asked of whom since
when, the chunks still to ask (those given back first), the manifest request, the roots
refused and the peers banned, and the progress it reports (``status``). Its methods keep
that bookkeeping consistent (``release`` or ``drop`` a peer, ``give_back`` a chunk,
``next_missing``); it does no I/O: the reactor (``p2p.statesync.reactor.StateSync``) sends the
requests, reads the answers and decides, and the chunks go to a ``SnapshotDownload``
(``node.snapshots.service.FileDownload``), which keeps them across restarts.

What a fetched snapshot's pieces must be is here too, shared with the node's files: an
offer worth fetching (``offer_problem``, at most ``MAX_SNAPSHOT_BYTES``), the root of a
manifest (``manifest_root``) and each chunk's length and hash (``chunk_problem``).
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from blake3 import blake3

from chain.core.header_chain import HeaderChain
from chain.core.primitives.types import BlockId
from p2p.blocksync.headers import HeaderCheckpoints
from p2p.wire.codec import MAX_CHUNK, MAX_CHUNKS, MIN_CHUNK
from p2p.wire.messages import SnapshotChunk, SnapshotOffer

# The largest snapshot fetched. The codec lets an offer claim 200,000 chunks of 4 MiB
# (800 GB, and a disk's worth of sparse file); a snapshot holds the state only, about 0.5 KB
# per account (1,000 accounts and the dedup set of 8,000 transactions: 520 KB in
# tests/integration/bootstrap/test_state_sync.py), so 64 GiB is room for some 100 million accounts.
MAX_SNAPSHOT_BYTES = 64 << 30
# Peers whose lapses (strikes, drops) a download remembers at most, the oldest forgotten
# first: an identity costs a stranger nothing, and 25 clients dropped every 10 s would add
# 9,000 an hour. Far more than the peers one node serves from at once.
MAX_REMEMBERED = 1024


def manifest_root(hashes: Sequence[bytes]) -> bytes:
    return blake3(b"".join(hashes)).digest()


def offer_problem(offer: SnapshotOffer) -> str | None:
    """Why ``offer`` is not worth fetching (its size and chunking), or None."""
    if not MIN_CHUNK <= offer.chunk_size <= MAX_CHUNK:
        return f"a chunk size of {offer.chunk_size} bytes"
    if not 0 < offer.size <= MAX_SNAPSHOT_BYTES:
        return f"a size of {offer.size} bytes (at most {MAX_SNAPSHOT_BYTES})"
    if offer.chunks > MAX_CHUNKS:
        return f"{offer.chunks} chunks (at most {MAX_CHUNKS})"
    return None


def chunk_length(offer: SnapshotOffer, index: int) -> int:
    """The length chunk ``index`` of ``offer`` must have: the chunk size, but for the last."""
    return min(offer.chunk_size, offer.size - index * offer.chunk_size)


def chunk_problem(
    offer: SnapshotOffer, hashes: tuple[bytes, ...], chunk: SnapshotChunk
) -> str | None:
    """What is wrong with a chunk, as its offer and manifest say it must be, or None."""
    expected = chunk_length(offer, chunk.index)
    if len(chunk.data) != expected:
        return f"{len(chunk.data)} bytes, not {expected}"
    if blake3(chunk.data).digest() != hashes[chunk.index]:
        return "hash mismatch"
    return None


class SnapshotDownload(Protocol):
    """Where a fetched snapshot goes, kept across restarts."""

    def offer(self) -> SnapshotOffer | None:
        """The offer whose manifest was accepted before, if any."""
        ...

    def hashes(self) -> tuple[bytes, ...]: ...

    async def start(self, offer: SnapshotOffer, hashes: tuple[bytes, ...]) -> None:
        """Begin (or, for the same offer, go on with) the download of ``offer``."""
        ...

    def held(self) -> set[int]:
        """The chunks written and verified so far."""
        ...

    def head_id(self) -> BlockId | None:
        """The block the snapshot's head names, once the chunks held from the first on hold
        it (chunk 0, but for a head larger than a chunk); None before."""
        ...

    async def write(self, index: int, data: bytes) -> None:
        """Keep chunk ``index`` (already checked against its hash) durably; SnapshotError if
        the chunks held now show the file's head is not a snapshot's. A write for a download
        reset meanwhile is dropped."""
        ...

    async def finish(self) -> Path:
        """Check the whole file as a snapshot of the offer's block; its path, or
        SnapshotError."""
        ...

    async def reset(self) -> None:
        """Forget the download (it failed its final check)."""
        ...


@dataclass(slots=True)
class Asked:
    """A request in flight: of which peer, sent when (by the fetcher's clock)."""

    peer: str
    sent_at: float


@dataclass(slots=True)
class Source:
    """A peer serving the snapshot: its offer and its chunk requests in flight."""

    offer: SnapshotOffer
    in_flight: set[int] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class StateSyncStatus:
    """Where a snapshot download stands (``Fetcher.status``): a copy that the node's metrics
    and its RPC (/v1/node/sync's ``state_sync``) both read."""

    done: bool
    block_id: BlockId | None  # the trusted block, once one is chosen
    headers: tuple[int, int] | None  # (tip, LIB) of the header chain followed, if one is
    chunks: int  # held, verified and written (those resumed with included)
    chunks_total: int
    chunks_fetched: int  # by this run (the rest it resumed with)
    chunks_resumed: int
    bytes: int
    bytes_total: int
    bytes_per_s: int  # on average since this run began
    eta_s: float | None
    sources: tuple[str, ...]  # peers serving the snapshot being fetched, sorted
    dropped: tuple[str, ...]  # sorted
    peers_banned: dict[str, int]  # by what they served: "chunk", "manifest", "snapshot"…

    @property
    def block_num(self) -> int | None:
        return None if self.block_id is None else int.from_bytes(self.block_id[:4], "big")


class Fetcher:
    """The fetching side's state (one download of the trusted block's snapshot)."""

    def __init__(
        self,
        trusted: BlockId | None,
        download: SnapshotDownload,
        on_done: Callable[[Path], None],
        *,
        headers: HeaderChain | None = None,
        checkpoints: HeaderCheckpoints | None = None,
        per_peer: int = 4,
        timeout: float = 10.0,
        max_strikes: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # The block whose snapshot is fetched: the operator's, or (None until then) the newest
        # offered that ``headers``, the header chain followed from genesis, vouches for. A
        # download kept from an earlier run was accepted for a block trusted then.
        if trusted is None and headers is None:
            raise ValueError("state sync needs a trusted block or the header chain to find one")
        # The operator's block is taken as it is; one the header chain vouches for must also
        # come with the header state the chain gives it (``header_state_digest``).
        self.operator_trusted = trusted is not None
        kept = download.offer()
        if trusted is None and kept is not None:
            trusted = kept.block_id
        self.trusted = trusted
        self.headers = headers
        self.checkpoints = checkpoints  # where ``headers`` is kept as it is followed
        # The header chain reached a peer's head (set by ``p2p.blocksync.headers``): only then is
        # the newest snapshot it vouches for chosen, not the first.
        self.headers_caught_up = False
        self.sourceless_since: float | None = None  # no peer offers the chosen block since
        self.download = download
        self.on_done = on_done
        self.per_peer = per_peer
        self.timeout = timeout
        self.max_strikes = max_strikes
        self.clock = clock
        self.sources: dict[str, Source] = {}
        # Requests (manifest or chunk) each peer let lapse since it last answered one, kept
        # across its sessions (a peer id is its node id): a silent offerer that reconnects
        # does not start afresh. At ``max_strikes`` it is dropped (``drop``).
        self.strikes: Counter[str] = Counter()
        # Peers dropped for lapses: their offers count (for the root, the manifest and the
        # chunks) only while no other peer serves the trusted block, so that silent
        # offerers cannot outvote or crowd out a peer that answers, yet a lone slow server
        # is still used.
        self.dropped: dict[str, None] = {}  # in the order dropped (``MAX_REMEMBERED``)
        # Until a block is trusted: each peer's last list, looked at again as the header
        # chain followed vouches for more blocks.
        self.listed: dict[str, tuple[SnapshotOffer, ...]] = {}
        self.asked: dict[int, Asked] = {}
        # Chunks neither held nor asked, in the order to ask them (those given back first);
        # built when the offer is known, so that scheduling costs O(1) per chunk.
        self.todo: deque[int] | None = None
        self.manifest_asked: Asked | None = None
        self.accepting = False  # a manifest is being written down (download.start)
        self.bad_roots: set[bytes] = set()
        self.done = False
        self.finishing = False
        self.started_at = clock()
        self.fetched_bytes = 0
        self.fetched_chunks = 0
        self.resumed_chunks = 0 if self.offer is None else len(download.held())
        # Peers banned, by what they sent: "chunk", "manifest", or "snapshot" (every peer
        # offering a root whose content is not the trusted block's snapshot); "silent" for
        # those dropped for lapses.
        self.banned: Counter[str] = Counter()
        # When progress was last logged, and the peers not serving last asked for their list.
        self.last_log = 0.0

    @property
    def offer(self) -> SnapshotOffer | None:
        """The offer being fetched; one of another block (a download kept from a run that
        trusted another block) is none: the next manifest accepted replaces it."""
        offer = self.download.offer()
        return offer if offer is not None and offer.block_id == self.trusted else None

    def trusts(self, block_id: BlockId) -> bool:
        """Whether a snapshot of ``block_id`` may be fetched when none is chosen yet."""
        return self.headers is not None and self.headers.trusts(block_id)

    def following(self) -> bool:
        """Whether the header chain is still to be followed: no block is chosen yet, or the
        one kept from an earlier run is not yet vouched for (its header state unknown)."""
        if self.done or self.operator_trusted or self.headers is None:
            return False
        return self.trusted is None or self.headers.header_state_digest(self.trusted) is None

    def caught_up(self) -> None:
        """The header chain followed reached a peer's head."""
        self.headers_caught_up = True

    def unchoose(self) -> None:
        """Give up the block the header chain vouched for (no peer serves it any more, or
        its snapshot was refused): the newest one vouched for is chosen again."""
        self.trusted = None
        self.listed.clear()
        self.asked.clear()
        self.todo = None
        self.manifest_asked = None
        self.sourceless_since = None

    def status(self) -> StateSyncStatus:
        offer = self.offer
        total = 0 if offer is None else offer.chunks
        held = len(self.download.held()) if offer is not None else 0
        elapsed = max(self.clock() - self.started_at, 1e-9)
        rate = self.fetched_bytes / elapsed
        left = 0 if offer is None else max(offer.size - held * offer.chunk_size, 0)
        headers = self.headers
        return StateSyncStatus(
            done=self.done,
            block_id=self.trusted,
            headers=None if headers is None else (headers.tip.num, headers.lib),
            chunks=held,
            chunks_total=total,
            chunks_fetched=self.fetched_chunks,
            chunks_resumed=self.resumed_chunks,
            bytes=min(held * (offer.chunk_size if offer else 0), offer.size if offer else 0),
            bytes_total=0 if offer is None else offer.size,
            bytes_per_s=round(rate),
            eta_s=round(left / rate, 1) if rate > 0 and offer is not None else None,
            sources=tuple(
                sorted(p for p, s in self.sources.items() if s.offer.root == self._root())
            ),
            dropped=tuple(sorted(self.dropped)),
            peers_banned=dict(self.banned),
        )

    def next_missing(self, held: set[int]) -> int | None:
        """The next chunk to ask (``todo`` is built): neither held nor asked."""
        todo = self.todo
        assert todo is not None
        while todo:
            index = todo.popleft()
            if index not in held and index not in self.asked:
                return index
        return None

    def give_back(self, index: int) -> None:
        """Chunk ``index`` is to be asked again, before the others."""
        if self.todo is not None:
            self.todo.appendleft(index)

    def release(self, peer_id: str) -> None:
        """Stop counting on ``peer_id``: its requests in flight go back to be asked of others."""
        source = self.sources.pop(peer_id, None)
        if source is not None:
            for index in source.in_flight:
                asked = self.asked.get(index)
                if asked is not None and asked.peer == peer_id:
                    del self.asked[index]
                    self.give_back(index)

    def serving(self) -> dict[str, Source]:
        """The sources to count on: those not dropped, or, when every one was, all of them."""
        kept = {p: s for p, s in self.sources.items() if p not in self.dropped}
        return kept or self.sources

    def answered(self, peer_id: str) -> None:
        """``peer_id`` answered a request: its strikes are cleared (not its drop: a dropped
        peer stays behind the others for this download)."""
        self.strikes.pop(peer_id, None)

    def lapsed(self, peer_id: str) -> bool:
        """``peer_id`` let a request lapse: one strike; whether that makes ``max_strikes``."""
        self.strikes[peer_id] += 1
        _forget_oldest(self.strikes)
        return self.strikes[peer_id] >= self.max_strikes

    def drop(self, peer_id: str) -> None:
        """Stop counting on ``peer_id`` for its lapses: its requests go to the others, its
        offers count only while nobody else serves, and, back, it is on its last strike."""
        self.release(peer_id)
        self.dropped.pop(peer_id, None)
        self.dropped[peer_id] = None
        _forget_oldest(self.dropped)
        self.strikes[peer_id] = self.max_strikes - 1
        self.banned["silent"] += 1

    def _root(self) -> bytes | None:
        offer = self.offer
        return None if offer is None else offer.root


def _forget_oldest(remembered: dict[str, Any]) -> None:
    """Forget the peers remembered first, down to ``MAX_REMEMBERED``."""
    while len(remembered) > MAX_REMEMBERED:
        del remembered[next(iter(remembered))]
