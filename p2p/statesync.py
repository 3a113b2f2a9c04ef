"""State sync: fetching the trusted block's snapshot from several peers in verified chunks.

Peers serve their snapshots (``p2p.snapshot_serving``): a list of offers, each with its size,
chunk size and a root, the BLAKE3 of the chunks' BLAKE3 hashes in order; the manifest (those
hashes) and each chunk are fetched by request. A fresh node started with state sync fetches
the snapshot of the block the operator trusts (``trusted``):

- it asks every peer for its list and takes the offers of the trusted block whose root the
  most peers agree on (ignoring offers too large to be a state, ``MAX_SNAPSHOT_BYTES``),
  fetches the manifest from one of them and checks it against the root;
- it keeps up to ``per_peer`` chunk requests in flight at each such peer, checks every chunk
  against its hash and length as it arrives, and writes it through ``SnapshotDownload``,
  which keeps what is verified across restarts (a kill -9 refetches nothing it had);
- a peer that sends a chunk not matching its hash, or a manifest not matching its root, is
  banned (that peer only: the root came from the offers; counted in ``peers_banned``), and
  its requests go to the others; one that stays silent past ``timeout`` loses its requests
  (or the manifest request) and, after ``max_strikes`` chunk requests, its session; one
  that no longer lists the snapshot (it pruned it) loses its requests to the others,
  unpunished;
- as soon as the chunks held from the first on hold the snapshot's head, the block it names
  must be the trusted one: a root whose content is the snapshot of another block (a forger
  can make a self-consistent one) is refused and every peer offering it banned;
- with every chunk held, the download checks the whole file as a snapshot (its state
  against its block's state root, and that block against the trusted id) and ``on_done``
  is called with it.

Nothing here trusts a peer's word: the root only decides which manifest to check chunks
against; the trusted block id and the snapshot's own verification have the last word.

``StateSync`` is the one reactor owning the snapshot messages: it hands requests to its
``SnapshotServer`` and answers to its ``Fetcher``, and its ``run`` owns both sides' tasks.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import structlog
from blake3 import blake3

from chain.errors import SnapshotError
from chain.types import BlockId
from p2p.codec import MAX_CHUNK, MAX_CHUNKS, MIN_CHUNK
from p2p.messages import (
    GoAwayReason,
    Message,
    SnapshotChunk,
    SnapshotChunkRequest,
    SnapshotList,
    SnapshotListRequest,
    SnapshotManifest,
    SnapshotManifestRequest,
    SnapshotOffer,
)
from p2p.peer import Peer
from p2p.reactor import Reactor
from p2p.snapshot_serving import SEND_WAIT_S, SnapshotProvider, SnapshotServer

log = structlog.get_logger("statesync")

ASK_EVERY_S = 5.0
TICK_S = 1.0  # how often late requests are looked for
# The largest snapshot fetched. The codec lets an offer claim 200,000 chunks of 4 MiB
# (800 GB, and a disk's worth of sparse file); a snapshot holds the state only, about 0.5 KB
# per account (1,000 accounts and the dedup set of 8,000 transactions: 520 KB in
# tests/integration/test_state_sync.py), so 64 GiB is room for some 100 million accounts.
MAX_SNAPSHOT_BYTES = 64 << 30


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
class _Asked:
    peer: str
    sent_at: float


@dataclass(slots=True)
class _Source:
    offer: SnapshotOffer
    strikes: int = 0
    in_flight: set[int] = field(default_factory=set)


class Fetcher:
    """The fetching side's state (one download of the trusted block's snapshot)."""

    def __init__(
        self,
        trusted: BlockId,
        download: SnapshotDownload,
        on_done: Callable[[Path], None],
        *,
        per_peer: int = 4,
        timeout: float = 10.0,
        max_strikes: int = 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.trusted = trusted
        self.download = download
        self.on_done = on_done
        self.per_peer = per_peer
        self.timeout = timeout
        self.max_strikes = max_strikes
        self.clock = clock
        self.sources: dict[str, _Source] = {}
        self.asked: dict[int, _Asked] = {}
        # Chunks neither held nor asked, in the order to ask them (those given back first);
        # built when the offer is known, so that scheduling costs O(1) per chunk.
        self.todo: deque[int] | None = None
        self.manifest_asked: _Asked | None = None
        self.accepting = False  # a manifest is being written down (download.start)
        self.bad_roots: set[bytes] = set()
        self.done = False
        self.finishing = False
        self.started_at = clock()
        self.fetched_bytes = 0
        self.fetched_chunks = 0
        self.resumed_chunks = 0 if self.offer is None else len(download.held())
        # Peers banned, by what they sent: "chunk", "manifest", or "snapshot" (every peer
        # offering a root whose content is not the trusted block's snapshot).
        self.banned: Counter[str] = Counter()
        self._last_log = 0.0

    @property
    def offer(self) -> SnapshotOffer | None:
        """The offer being fetched; one of another block (a download kept from a run that
        trusted another block) is none: the next manifest accepted replaces it."""
        offer = self.download.offer()
        return offer if offer is not None and offer.block_id == self.trusted else None

    def status(self) -> dict[str, Any]:
        offer = self.offer
        total = 0 if offer is None else offer.chunks
        held = len(self.download.held()) if offer is not None else 0
        elapsed = max(self.clock() - self.started_at, 1e-9)
        rate = self.fetched_bytes / elapsed
        left = 0 if offer is None else max(offer.size - held * offer.chunk_size, 0)
        return {
            "stage": "done" if self.done else "state_sync",
            "block_id": self.trusted.hex(),
            "block_num": int.from_bytes(self.trusted[:4], "big"),
            "chunks": held,
            "chunks_total": total,
            "chunks_fetched": self.fetched_chunks,  # by this run (the rest it resumed with)
            "chunks_resumed": self.resumed_chunks,
            "bytes": min(held * (offer.chunk_size if offer else 0), offer.size if offer else 0),
            "bytes_total": 0 if offer is None else offer.size,
            "bytes_per_s": round(rate),
            "eta_s": round(left / rate, 1) if rate > 0 and offer is not None else None,
            "sources": sorted(p for p, s in self.sources.items() if s.offer.root == self._root()),
            "peers_banned": dict(self.banned),
        }

    def _root(self) -> bytes | None:
        offer = self.offer
        return None if offer is None else offer.root


class StateSync(Reactor):
    """Serves our snapshots (through a ``SnapshotServer``); with a ``Fetcher``, fetches the
    trusted one."""

    accepts = (
        SnapshotListRequest,
        SnapshotList,
        SnapshotManifestRequest,
        SnapshotManifest,
        SnapshotChunkRequest,
        SnapshotChunk,
    )

    def __init__(
        self,
        provider: SnapshotProvider,
        fetcher: Fetcher | None = None,
        *,
        send_wait: float = SEND_WAIT_S,
    ) -> None:
        self.provider = provider
        self.server = SnapshotServer(provider, send_wait=send_wait)
        self.fetcher = fetcher
        # Checks of the whole file (``Fetcher.download.finish``: seconds for a large state)
        # run apart from the peers' messages; ``run`` reraises a crash of one and cancels
        # them when it ends. One at a time, but for one refused while another starts.
        self._finishing: set[asyncio.Task[None]] = set()

    # --- Reactor ----------------------------------------------------------------------------

    def add_peer(self, peer: Peer) -> None:
        if self.fetcher is not None and not self.fetcher.done:
            peer.offer(SnapshotListRequest())

    def remove_peer(self, peer: Peer) -> None:
        self.server.peer_gone(peer.id)
        f = self.fetcher
        if f is not None:
            _release(f, peer.id)
            asked = f.manifest_asked
            if asked is not None and asked.peer == peer.id:
                f.manifest_asked = None
                self._ask_manifest(f)
            self._schedule()

    async def receive(self, peer: Peer, message: Message) -> None:
        if isinstance(message, SnapshotListRequest):
            peer.offer(self.server.listing())
        elif isinstance(message, SnapshotManifestRequest | SnapshotChunkRequest):
            self.server.serve(peer, message)
        elif self.fetcher is not None and not self.fetcher.done:
            if isinstance(message, SnapshotList):
                self._on_list(peer, message)
            elif isinstance(message, SnapshotManifest):
                await self._on_manifest(peer, message)
            elif isinstance(message, SnapshotChunk):
                await self._on_chunk(peer, message)

    async def run(self) -> None:
        """Serve (the server's task group owns the answers) and, fetching, look for late
        requests every second; a crash on either side ends both."""
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.server.run(), name="snapshot-serving")
                while True:
                    f = self.fetcher
                    if f is not None and not f.done:
                        self._tick(f)
                    for task in [t for t in self._finishing if t.done()]:
                        self._finishing.discard(task)
                        task.result()  # its crash ends the reactor, as in a task group
                    await asyncio.sleep(TICK_S)
        finally:
            for task in self._finishing:
                task.cancel()

    # --- fetching ---------------------------------------------------------------------------

    def _on_list(self, peer: Peer, message: SnapshotList) -> None:
        f = self.fetcher
        assert f is not None
        offer = next((o for o in message.offers if o.block_id == f.trusted), None)
        problem = None if offer is None else offer_problem(offer)
        if problem is not None:
            log.info("state_sync_offer_ignored", peer=peer.id, why=problem)
            offer = None
        if offer is None or offer.root in f.bad_roots:
            if peer.id in f.sources:  # it no longer serves the snapshot (pruned it)
                _release(f, peer.id)
                self._schedule()
            return
        known = f.sources.get(peer.id)
        if known is None or known.offer != offer:
            _release(f, peer.id)
            f.sources[peer.id] = _Source(offer)
        self._ask_manifest(f)
        self._schedule()

    def _ask_manifest(self, f: Fetcher) -> None:
        """Ask for the manifest of the root most sources agree on, unless one is known or
        asked already."""
        if f.offer is not None or f.manifest_asked is not None or f.accepting:
            return
        roots = Counter(s.offer.root for s in f.sources.values())
        if not roots:
            return
        root = roots.most_common(1)[0][0]
        # The first to offer it: one that let a request time out re-enters last.
        peer_id = next(p for p, s in f.sources.items() if s.offer.root == root)
        peer = self.switch.get(peer_id)
        if peer is not None and peer.offer(SnapshotManifestRequest(f.trusted)):
            f.manifest_asked = _Asked(peer_id, f.clock())

    async def _on_manifest(self, peer: Peer, message: SnapshotManifest) -> None:
        f = self.fetcher
        assert f is not None
        asked = f.manifest_asked
        source = f.sources.get(peer.id)
        if f.offer is not None or asked is None or asked.peer != peer.id or source is None:
            return
        if message.block_id != f.trusted:
            return
        f.manifest_asked = None
        offer = source.offer
        if len(message.hashes) != offer.chunks or manifest_root(message.hashes) != offer.root:
            # The root came from the offers, the hashes from this peer alone: it lied, not
            # (necessarily) the others offering that root.
            log.warning("state_sync_bad_manifest", peer=peer.id)
            _release(f, peer.id)
            f.banned["manifest"] += 1
            self.switch.punish(
                peer.id, GoAwayReason.VALIDATION, "snapshot manifest does not match its root"
            )
            self._ask_manifest(f)
            return
        f.accepting = True  # until it is written down, no other manifest is asked for
        try:
            await f.download.start(offer, message.hashes)
        finally:
            f.accepting = False
        f.todo = None
        log.info(
            "state_sync_manifest",
            block=int.from_bytes(offer.block_id[:4], "big"),
            chunks=offer.chunks,
            bytes=offer.size,
            held=len(f.download.held()),
        )
        self._schedule()

    async def _on_chunk(self, peer: Peer, message: SnapshotChunk) -> None:
        f = self.fetcher
        assert f is not None
        asked = f.asked.get(message.index)
        offer = f.offer
        if asked is None or asked.peer != peer.id or offer is None:
            return  # late (reassigned after a timeout) or never asked: ignored
        if message.block_id != f.trusted:
            return
        del f.asked[message.index]
        source = f.sources.get(peer.id)
        if source is not None:
            source.in_flight.discard(message.index)
        why = _chunk_problem(offer, f.download.hashes(), message)
        if why is not None:
            log.warning("state_sync_bad_chunk", peer=peer.id, index=message.index, why=why)
            _release(f, peer.id)
            _give_back(f, message.index)
            f.banned["chunk"] += 1
            self.switch.punish(peer.id, GoAwayReason.VALIDATION, "corrupt snapshot chunk")
            self._schedule()
            return
        if source is not None:
            source.strikes = 0
        try:
            await f.download.write(message.index, message.data)
        except SnapshotError as err:
            await self._refuse(f, offer, str(err))
            return
        if f.offer != offer:
            return  # refused (and reset) while this chunk was being written
        f.fetched_bytes += len(message.data)
        f.fetched_chunks += 1
        head = f.download.head_id()
        if head is not None and head != f.trusted:
            num = int.from_bytes(head[:4], "big")
            await self._refuse(
                f,
                offer,
                f"it is the snapshot of block {num} ({head.hex()[:16]}…), not the trusted one",
            )
            return
        self._log_progress(f)
        self._schedule()

    def _schedule(self) -> None:
        f = self.fetcher
        if f is None or f.done or f.finishing:
            return
        offer = f.offer
        if offer is None:
            return
        held = f.download.held()
        if len(held) == offer.chunks:
            f.finishing = True
            self._finishing.add(asyncio.get_running_loop().create_task(self._finish(f)))
            return
        if f.todo is None:
            f.todo = deque(i for i in range(offer.chunks) if i not in held and i not in f.asked)
        todo = f.todo
        now = f.clock()
        # Peers that kept up first, then the least busy.
        ranked = sorted(f.sources.items(), key=lambda kv: (kv[1].strikes, len(kv[1].in_flight)))
        for peer_id, source in ranked:
            if source.offer != offer:
                continue
            peer = self.switch.get(peer_id)
            if peer is None:
                continue
            while len(source.in_flight) < f.per_peer:
                index = _next_missing(todo, held, f.asked)
                if index is None:
                    return
                if not peer.offer(SnapshotChunkRequest(f.trusted, index)):
                    todo.appendleft(index)
                    break
                source.in_flight.add(index)
                f.asked[index] = _Asked(peer_id, now)

    def _tick(self, f: Fetcher) -> None:
        now = f.clock()
        for index, asked in list(f.asked.items()):
            if now - asked.sent_at < f.timeout or f.asked.get(index) is not asked:
                continue  # not late, or given back already with its silent peer's others
            del f.asked[index]
            _give_back(f, index)
            source = f.sources.get(asked.peer)
            if source is None:
                continue
            source.in_flight.discard(index)
            source.strikes += 1
            if source.strikes >= f.max_strikes:
                log.info("state_sync_peer_silent", peer=asked.peer)
                _release(f, asked.peer)
                self.switch.send_away(asked.peer, GoAwayReason.BENIGN_OTHER, "snapshot chunks late")
        manifest = f.manifest_asked
        if manifest is not None and now - manifest.sent_at >= f.timeout:
            # Asked again of another; this one re-enters the sources (last) with its next list.
            log.info("state_sync_manifest_late", peer=manifest.peer)
            f.manifest_asked = None
            _release(f, manifest.peer)
        if now - f._last_log >= ASK_EVERY_S:
            for peer in self.switch.peers():
                if peer.id not in f.sources:
                    peer.offer(SnapshotListRequest())
        self._ask_manifest(f)
        self._log_progress(f)
        self._schedule()

    def _log_progress(self, f: Fetcher) -> None:
        now = f.clock()
        if now - f._last_log < ASK_EVERY_S:
            return
        f._last_log = now
        status = f.status()
        log.info(
            "state_sync_progress",
            chunks=status["chunks"],
            of=status["chunks_total"],
            bytes_per_s=status["bytes_per_s"],
            eta_s=status["eta_s"],
            sources=len(status["sources"]),
        )

    async def _refuse(self, f: Fetcher, offer: SnapshotOffer, why: str) -> None:
        """The content under ``offer``'s root is not a snapshot of the trusted block: every
        peer offering that root vouched for it, so all are banned and the download starts
        over from another root."""
        if offer.root in f.bad_roots:
            return  # refused already (by another chunk's handler)
        log.error("state_sync_snapshot_refused", root=offer.root.hex()[:16], why=why)
        f.bad_roots.add(offer.root)
        for peer_id, source in list(f.sources.items()):
            if source.offer.root == offer.root:
                _release(f, peer_id)
                f.banned["snapshot"] += 1
                self.switch.punish(peer_id, GoAwayReason.VALIDATION, f"snapshot refused: {why}")
        f.asked.clear()
        f.todo = None
        await f.download.reset()
        f.finishing = False
        self._ask_manifest(f)

    async def _finish(self, f: Fetcher) -> None:
        offer = f.offer
        if offer is None:  # refused between _schedule and now
            f.finishing = False
            return
        try:
            path = await f.download.finish()
        except Exception as err:  # SnapshotError: the agreed root led to a bad snapshot
            await self._refuse(f, offer, str(err))
            f.finishing = False
            return
        f.done = True
        log.info(
            "state_sync_done",
            file=str(path),
            chunks=offer.chunks,
            fetched=f.fetched_chunks,
            resumed=f.resumed_chunks,
        )
        f.on_done(path)


def _chunk_problem(
    offer: SnapshotOffer, hashes: tuple[bytes, ...], chunk: SnapshotChunk
) -> str | None:
    """What is wrong with a chunk, as its offer and manifest say it must be, or None."""
    expected = chunk_length(offer, chunk.index)
    if len(chunk.data) != expected:
        return f"{len(chunk.data)} bytes, not {expected}"
    if blake3(chunk.data).digest() != hashes[chunk.index]:
        return "hash mismatch"
    return None


def _next_missing(todo: deque[int], held: set[int], asked: dict[int, _Asked]) -> int | None:
    while todo:
        index = todo.popleft()
        if index not in held and index not in asked:
            return index
    return None


def _give_back(f: Fetcher, index: int) -> None:
    """Chunk ``index`` is to be asked again, before the others."""
    if f.todo is not None:
        f.todo.appendleft(index)


def _release(f: Fetcher, peer_id: str) -> None:
    """Stop counting on ``peer_id``: its requests in flight go back to be asked of others."""
    source = f.sources.pop(peer_id, None)
    if source is not None:
        for index in source.in_flight:
            asked = f.asked.get(index)
            if asked is not None and asked.peer == peer_id:
                del f.asked[index]
                _give_back(f, index)
