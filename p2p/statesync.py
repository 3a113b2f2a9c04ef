"""State sync: serving snapshots in verified chunks, and fetching one from several peers.

Every node serves the snapshots its ``SnapshotProvider`` holds (CometBFT's statesync and
Bitcoin Core's UTXO-set sharing proposal work the same way): asked, it lists them, each with
its size, chunk size and a root, the BLAKE3 of the chunks' BLAKE3 hashes in order; the
manifest (those hashes) and each chunk are fetched by request. A fresh node started with
state sync fetches the snapshot of the block the operator trusts (``trusted``):

- it asks every peer for its list and takes the offers of the trusted block whose root the
  most peers agree on, fetches the manifest from one of them and checks it against the root;
- it keeps up to ``per_peer`` chunk requests in flight at each such peer, checks every chunk
  against its hash as it arrives, and writes it through ``SnapshotDownload``, which keeps
  what is verified across restarts (a kill -9 refetches nothing it had);
- a peer that sends a chunk not matching its hash, or a manifest not matching its root, is
  banned, and its requests go to the others; one that stays silent past ``timeout`` loses
  its requests and, after ``max_strikes`` of them, its session;
- with every chunk held, the download checks the whole file as a snapshot (its state
  against the trusted block's state root) and ``on_done`` is called with it.

Nothing here trusts a peer's word: the root only decides which manifest to check chunks
against, and the last word is the snapshot's own verification.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import structlog
from blake3 import blake3

from chain.types import BlockId
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

log = structlog.get_logger("statesync")

MAX_SERVING = 8  # chunk requests of one peer being answered at once; more are dropped
ASK_EVERY_S = 5.0


def manifest_root(hashes: Sequence[bytes]) -> bytes:
    return blake3(b"".join(hashes)).digest()


class SnapshotProvider(Protocol):
    """The snapshots this node serves (the node's snapshot directory)."""

    def offers(self) -> list[SnapshotOffer]: ...

    def manifest(self, block_id: BlockId) -> tuple[bytes, ...] | None: ...

    async def chunk(self, block_id: BlockId, index: int) -> bytes | None: ...

    async def refresh(self) -> None:
        """Look for new snapshots (and hash their chunks) off the event loop."""
        ...


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

    async def write(self, index: int, data: bytes) -> None:
        """Keep chunk ``index`` (already checked against its hash) durably."""
        ...

    async def finish(self) -> Path:
        """Check the whole file as a snapshot; its path, or SnapshotError."""
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
        self.manifest_from: str | None = None
        self.bad_roots: set[bytes] = set()
        self.done = False
        self.finishing = False
        self.started_at = clock()
        self.fetched_bytes = 0
        self._last_log = 0.0

    @property
    def offer(self) -> SnapshotOffer | None:
        return self.download.offer()

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
            "bytes": min(held * (offer.chunk_size if offer else 0), offer.size if offer else 0),
            "bytes_total": 0 if offer is None else offer.size,
            "bytes_per_s": round(rate),
            "eta_s": round(left / rate, 1) if rate > 0 and offer is not None else None,
            "sources": sorted(p for p, s in self.sources.items() if s.offer.root == self._root()),
        }

    def _root(self) -> bytes | None:
        offer = self.offer
        return None if offer is None else offer.root


class StateSync(Reactor):
    """Serves our snapshots; with a ``Fetcher``, fetches the trusted one."""

    accepts = (
        SnapshotListRequest,
        SnapshotList,
        SnapshotManifestRequest,
        SnapshotManifest,
        SnapshotChunkRequest,
        SnapshotChunk,
    )

    def __init__(self, provider: SnapshotProvider, fetcher: Fetcher | None = None) -> None:
        self.provider = provider
        self.fetcher = fetcher
        self._serving: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # --- Reactor ----------------------------------------------------------------------------

    def add_peer(self, peer: Peer) -> None:
        if self.fetcher is not None and not self.fetcher.done:
            peer.offer(SnapshotListRequest())

    def remove_peer(self, peer: Peer) -> None:
        self._serving.pop(peer.id, None)
        f = self.fetcher
        if f is not None:
            _release(f, peer.id)
            if f.manifest_from == peer.id:
                f.manifest_from = None
            self._schedule()

    async def receive(self, peer: Peer, message: Message) -> None:
        if isinstance(message, SnapshotListRequest):
            peer.offer(SnapshotList(tuple(self.provider.offers()[:8])))
        elif isinstance(message, SnapshotManifestRequest):
            hashes = self.provider.manifest(message.block_id)
            if hashes is not None:
                peer.offer(SnapshotManifest(message.block_id, hashes))
        elif isinstance(message, SnapshotChunkRequest):
            self._serve_chunk(peer, message)
        elif self.fetcher is not None and not self.fetcher.done:
            if isinstance(message, SnapshotList):
                self._on_list(peer, message)
            elif isinstance(message, SnapshotManifest):
                await self._on_manifest(peer, message)
            elif isinstance(message, SnapshotChunk):
                await self._on_chunk(peer, message)

    async def run(self) -> None:
        while True:
            await self.provider.refresh()
            f = self.fetcher
            if f is not None and not f.done:
                self._tick(f)
            await asyncio.sleep(1.0)

    # --- serving ----------------------------------------------------------------------------

    def _serve_chunk(self, peer: Peer, request: SnapshotChunkRequest) -> None:
        busy = self._serving.get(peer.id, 0)
        if busy >= MAX_SERVING:
            return  # it asks faster than it reads: it will time out and ask again
        self._serving[peer.id] = busy + 1

        async def serve() -> None:
            try:
                data = await self.provider.chunk(request.block_id, request.index)
                if data is not None:
                    await peer.outbox.put(SnapshotChunk(request.block_id, request.index, data))
            finally:
                if peer.id in self._serving:
                    self._serving[peer.id] -= 1

        task = asyncio.get_running_loop().create_task(serve())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- fetching ---------------------------------------------------------------------------

    def _on_list(self, peer: Peer, message: SnapshotList) -> None:
        f = self.fetcher
        assert f is not None
        offer = next((o for o in message.offers if o.block_id == f.trusted), None)
        if offer is None or offer.root in f.bad_roots:
            return
        known = f.sources.get(peer.id)
        if known is None or known.offer != offer:
            f.sources[peer.id] = _Source(offer)
        if f.offer is None and f.manifest_from is None:
            self._ask_manifest(f)
        self._schedule()

    def _ask_manifest(self, f: Fetcher) -> None:
        """Ask for the manifest of the root most sources agree on."""
        roots = Counter(s.offer.root for s in f.sources.values())
        if not roots:
            return
        root = roots.most_common(1)[0][0]
        peer_id = next(p for p, s in f.sources.items() if s.offer.root == root)
        peer = self.switch.get(peer_id)
        if peer is not None:
            f.manifest_from = peer_id
            peer.offer(SnapshotManifestRequest(f.trusted))

    async def _on_manifest(self, peer: Peer, message: SnapshotManifest) -> None:
        f = self.fetcher
        assert f is not None
        source = f.sources.get(peer.id)
        if f.offer is not None or f.manifest_from != peer.id or source is None:
            return
        f.manifest_from = None
        offer = source.offer
        if len(message.hashes) != offer.chunks or manifest_root(message.hashes) != offer.root:
            f.bad_roots.add(offer.root)
            self._drop_root(offer.root, "snapshot manifest does not match its root")
            self._ask_manifest(f)
            return
        await f.download.start(offer, message.hashes)
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
        expected = f.download.hashes()[message.index]
        if blake3(message.data).digest() != expected:
            log.warning("state_sync_bad_chunk", peer=peer.id, index=message.index)
            _release(f, peer.id)
            self.switch.punish(peer.id, GoAwayReason.VALIDATION, "corrupt snapshot chunk")
            self._schedule()
            return
        if source is not None:
            source.strikes = 0
        await f.download.write(message.index, message.data)
        f.fetched_bytes += len(message.data)
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
            task = asyncio.get_running_loop().create_task(self._finish(f))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        missing = (i for i in range(offer.chunks) if i not in held and i not in f.asked)
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
                index = next(missing, None)
                if index is None:
                    return
                if not peer.offer(SnapshotChunkRequest(f.trusted, index)):
                    break
                source.in_flight.add(index)
                f.asked[index] = _Asked(peer_id, now)

    def _tick(self, f: Fetcher) -> None:
        now = f.clock()
        for index, asked in list(f.asked.items()):
            if now - asked.sent_at < f.timeout:
                continue
            del f.asked[index]
            source = f.sources.get(asked.peer)
            if source is None:
                continue
            source.in_flight.discard(index)
            source.strikes += 1
            if source.strikes >= f.max_strikes:
                log.info("state_sync_peer_silent", peer=asked.peer)
                _release(f, asked.peer)
                self.switch.send_away(asked.peer, GoAwayReason.BENIGN_OTHER, "snapshot chunks late")
        if now - f._last_log >= ASK_EVERY_S:
            for peer in self.switch.peers():
                if peer.id not in f.sources:
                    peer.offer(SnapshotListRequest())
        if f.offer is None and f.manifest_from is None:
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

    def _drop_root(self, root: bytes, why: str) -> None:
        f = self.fetcher
        assert f is not None
        for peer_id, source in list(f.sources.items()):
            if source.offer.root == root:
                _release(f, peer_id)
                self.switch.punish(peer_id, GoAwayReason.VALIDATION, why)

    async def _finish(self, f: Fetcher) -> None:
        try:
            path = await f.download.finish()
        except Exception as err:  # SnapshotError: the agreed root led to a bad snapshot
            offer = f.offer
            log.error("state_sync_snapshot_refused", why=str(err))
            await f.download.reset()
            if offer is not None:
                f.bad_roots.add(offer.root)
                self._drop_root(offer.root, f"snapshot refused: {err}")
            f.finishing = False
            return
        f.done = True
        log.info("state_sync_done", file=str(path))
        f.on_done(path)


def _release(f: Fetcher, peer_id: str) -> None:
    """Stop counting on ``peer_id``: its requests in flight go back to be asked of others."""
    source = f.sources.pop(peer_id, None)
    if source is not None:
        for index in source.in_flight:
            asked = f.asked.get(index)
            if asked is not None and asked.peer == peer_id:
                del f.asked[index]
