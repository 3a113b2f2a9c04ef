"""State sync: fetching the trusted block's snapshot from several peers in verified chunks.

Peers serve their snapshots (``p2p.statesync.serving``): a list of offers, each with its size,
chunk size and a root, the BLAKE3 of the chunks' BLAKE3 hashes in order; the manifest (those
hashes) and each chunk are fetched by request. A fresh node started with state sync fetches
the snapshot of the block the operator trusts (``trusted``) or, given none, of the newest
block offered that the header chain followed from genesis shows irreversible (``_choose``;
``p2p.blocksync.headers`` follows it):

- it asks every peer for its list and takes the offers of the trusted block whose root the
  most peers agree on (ignoring offers too large to be a state, ``MAX_SNAPSHOT_BYTES``),
  fetches the manifest from one of them and checks it against the root;
- it keeps up to ``per_peer`` chunk requests in flight at each such peer, checks every chunk
  against its hash and length as it arrives, and writes it through ``SnapshotDownload``,
  which keeps what is verified across restarts (a kill -9 refetches nothing it had);
- a peer that sends a chunk not matching its hash, or a manifest not matching its root, is
  banned (that peer only: the root came from the offers; counted in ``peers_banned``), and
  its requests go to the others; each request (manifest or chunk) a peer lets lapse past
  ``timeout`` is a strike against it, and goes to another peer (the manifest to the
  offerer of the root with the fewest strikes): at ``max_strikes`` lapses in a row the peer
  is dropped (sent away with a ban, counted as "silent") and its offers count only while
  nobody else serves the block, so that offerers that never answer cannot hold the
  download, however many they are and whatever root they agree on; one that no longer
  lists the snapshot (it pruned it) loses its requests to the others, unpunished;
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
This module is the fetching protocol (what to ask of whom, when a peer is banned or a root
refused); the ``Fetcher``, one download's state and bookkeeping, and the checks an offer,
manifest or chunk must pass are ``p2p.statesync.fetch``'s.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque

import structlog

from chain.core.primitives.crypto import sha256
from chain.core.primitives.errors import SnapshotError
from chain.storage.snapshot import read_head
from p2p.statesync.fetch import Asked, Fetcher, Source, chunk_problem, manifest_root, offer_problem
from p2p.statesync.serving import SEND_WAIT_S, SnapshotProvider, SnapshotServer
from p2p.transport.peer import Peer
from p2p.transport.reactor import Reactor
from p2p.wire.messages import (
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

log = structlog.get_logger("statesync")

ASK_EVERY_S = 5.0
RECHOOSE_S = 30.0  # a block the headers chose that no peer serves for this long is given up
TICK_S = 1.0  # how often late requests are looked for


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
            f.listed.pop(peer.id, None)
            f.release(peer.id)
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
        if f.trusted is None:
            f.listed[peer.id] = message.offers
            self._choose(f)
        offer = next((o for o in message.offers if o.block_id == f.trusted), None)
        problem = None if offer is None else offer_problem(offer)
        if problem is not None:
            log.info("state_sync_offer_ignored", peer=peer.id, why=problem)
            offer = None
        if offer is None or offer.root in f.bad_roots:
            if peer.id in f.sources:  # it no longer serves the snapshot (pruned it)
                f.release(peer.id)
                self._schedule()
            return
        known = f.sources.get(peer.id)
        if known is None or known.offer != offer:
            f.release(peer.id)
            f.sources[peer.id] = Source(offer)
        self._ask_manifest(f)
        self._schedule()

    def _choose(self, f: Fetcher) -> None:
        """With no block trusted yet: the newest offered (in the peers' last lists) that the
        header chain followed vouches for becomes the one (kept as the download's offer once
        its manifest is in, so that a restart goes on with it). Offers newer than the LIB
        followed so far are looked at again as the headers come in (``_tick``)."""
        if not f.headers_caught_up:
            return  # the first blocks vouched for are the oldest: wait to be level
        good = [
            o
            for offers in f.listed.values()
            for o in offers
            if offer_problem(o) is None and f.trusts(o.block_id) and o.root not in f.bad_roots
        ]
        if not good:
            return
        chosen = max(good, key=lambda o: int.from_bytes(o.block_id[:4], "big")).block_id
        f.trusted = chosen
        log.info(
            "state_sync_trusted_by_headers",
            block=int.from_bytes(chosen[:4], "big"),
            block_id=chosen.hex(),
            headers_lib=None if f.headers is None else f.headers.lib,
        )

    def _ask_manifest(self, f: Fetcher) -> None:
        """Ask for the manifest of the root most sources agree on, unless one is known or
        asked already."""
        trusted = f.trusted
        if trusted is None or f.offer is not None or f.manifest_asked is not None or f.accepting:
            return
        serving = f.serving()
        roots = Counter(s.offer.root for s in serving.values())
        if not roots:
            return
        root = roots.most_common(1)[0][0]
        # Of its offerers, the one with the fewest lapses (the first to offer it on a tie):
        # each silent one is asked in turn until it is dropped.
        offering = [p for p, s in serving.items() if s.offer.root == root]
        peer_id = min(offering, key=lambda p: f.strikes[p])
        peer = self.switch.get(peer_id)
        if peer is not None and peer.offer(SnapshotManifestRequest(trusted)):
            f.manifest_asked = Asked(peer_id, f.clock())

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
        f.answered(peer.id)
        offer = source.offer
        if len(message.hashes) != offer.chunks or manifest_root(message.hashes) != offer.root:
            # The root came from the offers, the hashes from this peer alone: it lied, not
            # (necessarily) the others offering that root.
            log.warning("state_sync_bad_manifest", peer=peer.id)
            f.release(peer.id)
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
        why = chunk_problem(offer, f.download.hashes(), message)
        if why is not None:
            log.warning("state_sync_bad_chunk", peer=peer.id, index=message.index, why=why)
            f.release(peer.id)
            f.give_back(message.index)
            f.banned["chunk"] += 1
            self.switch.punish(peer.id, GoAwayReason.VALIDATION, "corrupt snapshot chunk")
            self._schedule()
            return
        f.answered(peer.id)
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
        offer, trusted = f.offer, f.trusted
        if offer is None or trusted is None:
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
        ranked = sorted(
            f.serving().items(), key=lambda kv: (f.strikes[kv[0]], len(kv[1].in_flight))
        )
        for peer_id, source in ranked:
            if source.offer != offer:
                continue
            peer = self.switch.get(peer_id)
            if peer is None:
                continue
            while len(source.in_flight) < f.per_peer:
                index = f.next_missing(held)
                if index is None:
                    return
                if not peer.offer(SnapshotChunkRequest(trusted, index)):
                    todo.appendleft(index)
                    break
                source.in_flight.add(index)
                f.asked[index] = Asked(peer_id, now)

    def _tick(self, f: Fetcher) -> None:
        now = f.clock()
        if f.trusted is not None and not f.operator_trusted and f.offer is None:
            # Chosen by the headers, no manifest yet: chosen again if nobody serves it.
            if f.sources:
                f.sourceless_since = None
            elif f.sourceless_since is None:
                f.sourceless_since = now
            elif now - f.sourceless_since >= RECHOOSE_S:
                log.info("state_sync_rechoosing", block_id=f.trusted.hex(), why="not served")
                f.unchoose()
        if f.trusted is None:
            self._choose(f)
            if f.trusted is not None:
                for peer in self.switch.peers():  # their lists again, now that one is trusted
                    peer.offer(SnapshotListRequest())
            elif now - f.last_log >= ASK_EVERY_S:  # the peers' newer snapshots
                f.last_log = now
                for peer in self.switch.peers():
                    peer.offer(SnapshotListRequest())
            return
        for index, asked in list(f.asked.items()):
            if now - asked.sent_at < f.timeout or f.asked.get(index) is not asked:
                continue  # not late, or given back already with its silent peer's others
            del f.asked[index]
            f.give_back(index)
            source = f.sources.get(asked.peer)
            if source is None:
                continue
            source.in_flight.discard(index)
            if f.lapsed(asked.peer):
                self._drop(f, asked.peer, "chunk")
        manifest = f.manifest_asked
        if manifest is not None and now - manifest.sent_at >= f.timeout:
            # Asked again (below) of the root's offerer with the fewest lapses.
            log.info("state_sync_manifest_late", peer=manifest.peer)
            f.manifest_asked = None
            if f.lapsed(manifest.peer):
                self._drop(f, manifest.peer, "manifest")
        if now - f.last_log >= ASK_EVERY_S:
            for peer in self.switch.peers():
                if peer.id not in f.sources:
                    peer.offer(SnapshotListRequest())
        self._ask_manifest(f)
        self._log_progress(f)
        self._schedule()

    def _drop(self, f: Fetcher, peer_id: str, what: str) -> None:
        """``peer_id`` let ``max_strikes`` requests lapse in a row: dropped, and sent away
        with a ban (the switch's, 10 s doubling with each), benign so that it may serve
        again later."""
        log.warning("state_sync_peer_dropped", peer=peer_id, strikes=f.strikes[peer_id], last=what)
        f.drop(peer_id)
        self.switch.punish(
            peer_id, GoAwayReason.BENIGN_OTHER, f"snapshot {what} requests left unanswered"
        )

    def _log_progress(self, f: Fetcher) -> None:
        now = f.clock()
        if now - f.last_log < ASK_EVERY_S:
            return
        f.last_log = now
        status = f.status()
        log.info(
            "state_sync_progress",
            chunks=status.chunks,
            of=status.chunks_total,
            bytes_per_s=status.bytes_per_s,
            eta_s=status.eta_s,
            sources=len(status.sources),
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
                f.release(peer_id)
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
        digest = None
        if not f.operator_trusted:
            assert f.headers is not None and f.trusted is not None
            digest = f.headers.header_state_digest(f.trusted)
            if digest is None:  # kept from an earlier run, not yet vouched for: later
                f.finishing = False
                return
        try:
            path = await f.download.finish()
            if digest is not None:
                with path.open("rb") as file:
                    _, head = read_head(file)
                if sha256(head.header_state.encode()) != digest:
                    raise SnapshotError(
                        "its header state (schedules, LIB, finality data) is not the one the "
                        "header chain gives its block"
                    )
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
