"""Serving snapshots with fake peers: a bounded number of answers per peer, each waiting a
bounded time for room in the peer's outbox; a chunk no longer served is answered with our
list; a peer's answers go with it, and a crash in one ends the server's run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import cast

import pytest
from blake3 import blake3

from chain.core.primitives.types import BlockId
from p2p.statesync.fetch import manifest_root
from p2p.statesync.serving import MAX_QUEUED, MAX_SERVING, SnapshotServer
from p2p.transport.peer import Peer
from p2p.wire.messages import (
    Message,
    SnapshotChunkRequest,
    SnapshotList,
    SnapshotListRequest,
    SnapshotManifestRequest,
    SnapshotOffer,
)
from tests.support.wait import until

TRUSTED = BlockId((7).to_bytes(4, "big") + b"t" * 28)
CHUNK = 4096
DATA = bytes(range(256)) * 40  # 10,240 bytes: three chunks
CHUNKS = [DATA[i : i + CHUNK] for i in range(0, len(DATA), CHUNK)]
HASHES = tuple(blake3(c).digest() for c in CHUNKS)
OFFER = SnapshotOffer(TRUSTED, len(DATA), CHUNK, manifest_root(HASHES))


class ReadingPeer:
    """A peer with a real outbox (as ``p2p.transport.peer.Peer``) that nobody drains."""

    def __init__(self, peer_id: str, outbox: int = 2000) -> None:
        self.id = peer_id
        self.outbox: asyncio.Queue[Message] = asyncio.Queue(outbox)

    def offer(self, message: Message) -> bool:
        try:
            self.outbox.put_nowait(message)
        except asyncio.QueueFull:
            return False
        return True


class OneSnapshot:
    def __init__(self) -> None:
        self.gone = False

    def offers(self) -> list[SnapshotOffer]:
        return [] if self.gone else [OFFER]

    def manifest(self, block_id: BlockId) -> tuple[bytes, ...] | None:
        return None if self.gone else HASHES

    async def chunk(self, block_id: BlockId, index: int) -> bytes | None:
        return None if self.gone else CHUNKS[index]

    async def refresh(self) -> None:
        return None


class BrokenSnapshot(OneSnapshot):
    async def chunk(self, block_id: BlockId, index: int) -> bytes | None:
        raise RuntimeError("a bug of ours")


@contextlib.asynccontextmanager
async def running(server: SnapshotServer) -> AsyncIterator[asyncio.Task[None]]:
    """The server's run, as the reactor runs it, for the block's duration."""
    task = asyncio.create_task(server.run())
    await asyncio.sleep(0)  # run opens its task group
    try:
        yield task
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _ask(server: SnapshotServer, peer: ReadingPeer, request: Message) -> None:
    assert isinstance(request, SnapshotChunkRequest | SnapshotManifestRequest)
    server.serve(cast(Peer, peer), request)


def test_a_peer_that_asks_and_never_reads_pins_a_bounded_number_of_answers() -> None:
    """Two hundred chunk and manifest requests from a peer that reads nothing: at most
    MAX_QUEUED answers enter its outbox, at most MAX_SERVING more wait, and those give up
    after the send wait instead of waiting forever."""

    async def scenario() -> None:
        peer = ReadingPeer("r")
        server = SnapshotServer(OneSnapshot(), send_wait=0.2)
        async with running(server):
            for k in range(100):
                _ask(server, peer, SnapshotChunkRequest(TRUSTED, k % 3))
                _ask(server, peer, SnapshotManifestRequest(TRUSTED))
                await asyncio.sleep(0)
            assert peer.outbox.qsize() <= MAX_QUEUED
            assert len(server._answers["r"]) <= MAX_SERVING
            await until(lambda: server._answers["r"] == set(), "the answers given up")
            assert peer.outbox.qsize() <= MAX_QUEUED

    asyncio.run(scenario())


def test_an_answer_to_a_peer_with_a_full_outbox_is_dropped_after_the_send_wait() -> None:
    """A dead peer's outbox is full: the chunk answer does not wait on it forever."""

    async def scenario() -> None:
        peer = ReadingPeer("r", outbox=1)
        peer.offer(SnapshotListRequest())
        server = SnapshotServer(OneSnapshot(), send_wait=0.2)
        async with running(server):
            _ask(server, peer, SnapshotChunkRequest(TRUSTED, 0))
            await until(lambda: server._answers["r"] == set(), "the answer given up")

    asyncio.run(scenario())


def test_a_chunk_no_longer_served_is_answered_with_the_list_without_it() -> None:
    """Asked for a chunk of a snapshot pruned meanwhile, the server answers with its list
    (which no longer offers it), so the requester goes elsewhere at once."""

    async def scenario() -> None:
        peer = ReadingPeer("r")
        provider = OneSnapshot()
        server = SnapshotServer(provider, send_wait=0.2)
        async with running(server):
            provider.gone = True
            _ask(server, peer, SnapshotChunkRequest(TRUSTED, 1))
            await until(lambda: peer.outbox.qsize() == 1, "the answer in the outbox")
            assert peer.outbox.get_nowait() == SnapshotList(())

    asyncio.run(scenario())


def test_the_answers_waiting_for_a_peer_that_goes_are_cancelled() -> None:
    """Answers waiting for room in a gone peer's outbox end with its session, not after the
    send wait."""

    async def scenario() -> None:
        peer = ReadingPeer("r")
        for _ in range(MAX_QUEUED):
            peer.offer(SnapshotListRequest())
        server = SnapshotServer(OneSnapshot(), send_wait=10)
        async with running(server):
            _ask(server, peer, SnapshotChunkRequest(TRUSTED, 0))
            await until(lambda: len(server._answers.get("r", ())) == 1, "the answer waiting")
            (waiting,) = server._answers["r"]
            server.peer_gone("r")
            await asyncio.sleep(0)
            assert waiting.cancelled() and "r" not in server._answers

    asyncio.run(scenario())


def test_a_crash_in_an_answer_ends_the_servers_run_with_it() -> None:
    """An answer that fails (a bug of ours) is not lost: the server's run, and so the
    reactor and the node, end with its error."""

    async def scenario() -> None:
        server = SnapshotServer(BrokenSnapshot())
        async with running(server) as run:
            _ask(server, ReadingPeer("r"), SnapshotChunkRequest(TRUSTED, 0))
            with pytest.raises(ExceptionGroup) as failed:
                await run
        assert failed.group_contains(RuntimeError, match="a bug of ours")

    asyncio.run(scenario())
