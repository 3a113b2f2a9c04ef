"""Serving state sync: answering peers' snapshot requests from our ``SnapshotProvider``.

Every node serves the snapshots its provider holds (CometBFT's statesync and Bitcoin Core's
UTXO-set sharing proposal work the same way): asked, it lists them, each with its size, chunk
size and a root, the BLAKE3 of the chunks' BLAKE3 hashes in order; the manifest (those
hashes) and each chunk are answered by request. A chunk or manifest no longer served (the
snapshot was pruned) is answered with our list, without it, so the requester goes elsewhere.

Serving is bounded per peer: at most ``MAX_SERVING`` answers being read or waiting, and an
answer enters the peer's outbox only while fewer than ``MAX_QUEUED`` messages wait there
(else it waits, at most ``send_wait``, then is dropped), so a peer that asks and never
reads pins a few chunks, not an outbox of them.

The answers run in the task group of ``SnapshotServer.run`` (a crash in one ends it, and the
reactor running it, with that error); those of a peer that goes are cancelled with it.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import structlog

from chain.core.primitives.types import BlockId
from p2p.transport.peer import Peer
from p2p.wire.messages import (
    Message,
    SnapshotChunk,
    SnapshotChunkRequest,
    SnapshotList,
    SnapshotManifest,
    SnapshotManifestRequest,
    SnapshotOffer,
)

log = structlog.get_logger("statesync")

# Answers (chunks, manifests) to one peer being read or waiting for room at once; more
# requests are dropped (the requester times out and asks elsewhere). A requester keeps 4
# chunk requests in flight, so one that follows the protocol is never dropped.
MAX_SERVING = 8
# An answer enters a peer's outbox only while fewer than this many messages wait there, so
# at most this many of our chunks sit in it: with MAX_SERVING more read or waiting, a peer
# that asks and never reads pins 16 chunks (16 MiB at the default chunk size) instead of an
# outbox of 2,000 (p2p.transport.peer.OUTBOX_SIZE), ~2 GB.
MAX_QUEUED = 8
# How long an answer waits for room: the requester gives a request up after 10 s (its
# state-sync-request-timeout-ms, by default), so an answer later than that is of no use.
SEND_WAIT_S = 10.0
# asyncio.Queue tells when it is not full, not when it is below MAX_QUEUED: a waiting
# answer looks again after this, doubling up to ROOM_POLL_MAX_S.
ROOM_POLL_S, ROOM_POLL_MAX_S = 0.001, 0.05
# How often the provider looks for new (or pruned) snapshots.
REFRESH_S = 1.0
# Snapshots listed at most: a list of 8 offers stays a small message.
MAX_LISTED = 8

Request = SnapshotManifestRequest | SnapshotChunkRequest


class SnapshotProvider(Protocol):
    """The snapshots this node serves (the node's snapshot directory)."""

    def offers(self) -> list[SnapshotOffer]: ...

    def manifest(self, block_id: BlockId) -> tuple[bytes, ...] | None: ...

    async def chunk(self, block_id: BlockId, index: int) -> bytes | None: ...

    async def refresh(self) -> None:
        """Look for new snapshots (and hash their chunks) off the event loop."""
        ...


class SnapshotServer:
    """Answers peers' list, manifest and chunk requests, a bounded number per peer."""

    def __init__(self, provider: SnapshotProvider, *, send_wait: float = SEND_WAIT_S) -> None:
        self.provider = provider
        self.send_wait = send_wait
        self._answers: dict[str, set[asyncio.Task[None]]] = {}
        self._tg: asyncio.TaskGroup | None = None

    def listing(self) -> SnapshotList:
        return SnapshotList(tuple(self.provider.offers()[:MAX_LISTED]))

    def serve(self, peer: Peer, request: Request) -> None:
        """Answer ``request`` in a task of ours (dropped while ``run`` is not running)."""
        if self._tg is None:
            return
        answers = self._answers.setdefault(peer.id, set())
        if len(answers) >= MAX_SERVING:
            return  # it asks faster than it reads: it will time out and ask elsewhere
        task = self._tg.create_task(self._answer(peer, request))
        answers.add(task)
        task.add_done_callback(answers.discard)

    def peer_gone(self, peer_id: str) -> None:
        """Cancel the answers still being read or waiting for the peer."""
        for task in self._answers.pop(peer_id, set()):
            task.cancel()

    async def run(self) -> None:
        """Own the answers, and have the provider look for new snapshots every second."""
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                while True:
                    await self.provider.refresh()
                    await asyncio.sleep(REFRESH_S)
        finally:
            self._tg = None
            self._answers.clear()

    async def _answer(self, peer: Peer, request: Request) -> None:
        answer: Message
        if isinstance(request, SnapshotManifestRequest):
            hashes = self.provider.manifest(request.block_id)
            answer = (
                self.listing() if hashes is None else SnapshotManifest(request.block_id, hashes)
            )
        else:
            data = await self.provider.chunk(request.block_id, request.index)
            # Not (or no longer: pruned) served: our list, without it, tells the requester
            # to ask the others.
            answer = (
                self.listing()
                if data is None
                else SnapshotChunk(request.block_id, request.index, data)
            )
        try:
            async with asyncio.timeout(self.send_wait):
                await _room(peer)
        except TimeoutError:
            log.info("snapshot_answer_dropped", peer=peer.id, why="the peer does not read")
            return
        peer.offer(answer)  # no await since _room: fewer than MAX_QUEUED wait before it


async def _room(peer: Peer) -> None:
    """Return once fewer than MAX_QUEUED messages wait in ``peer``'s outbox."""
    pause = ROOM_POLL_S
    while peer.outbox.qsize() >= MAX_QUEUED:
        await asyncio.sleep(pause)
        pause = min(pause * 2, ROOM_POLL_MAX_S)
