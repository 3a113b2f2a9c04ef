"""The state sync reactor's test rig: a snapshot of three chunks, fake peers, a download in
memory, and the reactor bound to a fake switch."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

from blake3 import blake3

from chain.core.primitives.types import BlockId
from p2p.statesync.fetch import Fetcher, manifest_root
from p2p.statesync.reactor import StateSync
from p2p.transport.peer import Peer
from p2p.wire.messages import (
    Message,
    SnapshotChunkRequest,
    SnapshotOffer,
)
from tests.p2p import fakes
from tests.p2p.fakes import FakeSwitch

TRUSTED = BlockId((7).to_bytes(4, "big") + b"t" * 28)
FORGED = BlockId((7).to_bytes(4, "big") + b"f" * 28)
CHUNK = 4096
DATA = bytes(range(256)) * 40  # 10,240 bytes: three chunks
CHUNKS = [DATA[i : i + CHUNK] for i in range(0, len(DATA), CHUNK)]
HASHES = tuple(blake3(c).digest() for c in CHUNKS)
OFFER = SnapshotOffer(TRUSTED, len(DATA), CHUNK, manifest_root(HASHES))


class FakePeer(fakes.FakePeer):
    def asked(self) -> list[int]:
        return [m.index for m in self.offered if isinstance(m, SnapshotChunkRequest)]


class MemoryDownload:
    """A download in memory whose snapshot's head (in chunk 0) names ``head``."""

    def __init__(self, head: BlockId = TRUSTED) -> None:
        self._offer: SnapshotOffer | None = None
        self._hashes: tuple[bytes, ...] = ()
        self.chunks: dict[int, bytes] = {}
        self.finished = 0
        self.resets = 0
        self.head = head
        self.gate: asyncio.Event | None = None  # set: start waits for it

    def offer(self) -> SnapshotOffer | None:
        return self._offer

    def hashes(self) -> tuple[bytes, ...]:
        return self._hashes

    async def start(self, offer: SnapshotOffer, hashes: tuple[bytes, ...]) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self._offer, self._hashes = offer, hashes

    def held(self) -> set[int]:
        return set(self.chunks)

    def head_id(self) -> BlockId | None:
        return self.head if 0 in self.chunks else None

    async def write(self, index: int, data: bytes) -> None:
        self.chunks[index] = data

    async def finish(self) -> Path:
        self.finished += 1
        assert b"".join(self.chunks[i] for i in sorted(self.chunks)) == DATA
        return Path("snapshot.part")

    async def reset(self) -> None:
        self._offer, self.chunks = None, {}
        self.resets += 1


class NoSnapshots:
    def offers(self) -> list[SnapshotOffer]:
        return []

    def manifest(self, block_id: BlockId) -> tuple[bytes, ...] | None:
        return None

    async def chunk(self, block_id: BlockId, index: int) -> bytes | None:
        return None

    async def refresh(self) -> None:
        return None


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def rig(
    names: tuple[str, ...] = ("a", "b"),
    download: MemoryDownload | None = None,
) -> tuple[StateSync, Fetcher, FakeSwitch, dict[str, FakePeer], MemoryDownload, list[Path]]:
    peers = {n: FakePeer(n) for n in names}
    switch = FakeSwitch(list(peers.values()))
    download, done = download or MemoryDownload(), list[Path]()
    fetcher = Fetcher(TRUSTED, download, done.append, per_peer=2, timeout=10, clock=Clock())
    reactor = StateSync(NoSnapshots(), fetcher)
    reactor.bind(switch)
    for peer in peers.values():
        reactor.add_peer(cast(Peer, peer))
    return reactor, fetcher, switch, peers, download, done


async def recv(reactor: StateSync, peer: FakePeer, message: Message) -> None:
    await reactor.receive(cast(Peer, peer), message)
    await asyncio.sleep(0)  # let a finishing task run
