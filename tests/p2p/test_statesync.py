"""The state sync reactor with fake peers: a manifest must hash to the root most peers offer,
each chunk to its hash (else its sender is banned and the chunk asked of another), a silent
peer's requests move on after the timeout, and the download ends verified, once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import cast

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
from p2p.statesync import Fetcher, StateSync, manifest_root

TRUSTED = BlockId((7).to_bytes(4, "big") + b"t" * 28)
CHUNK = 4096
DATA = bytes(range(256)) * 40  # 10,240 bytes: three chunks
CHUNKS = [DATA[i : i + CHUNK] for i in range(0, len(DATA), CHUNK)]
HASHES = tuple(blake3(c).digest() for c in CHUNKS)
OFFER = SnapshotOffer(TRUSTED, len(DATA), CHUNK, manifest_root(HASHES))


class FakePeer:
    def __init__(self, peer_id: str) -> None:
        self.id = peer_id
        self.offered: list[Message] = []

    def offer(self, message: Message) -> bool:
        self.offered.append(message)
        return True

    def asked(self) -> list[int]:
        return [m.index for m in self.offered if isinstance(m, SnapshotChunkRequest)]


class FakeSwitch:
    def __init__(self, peers: list[FakePeer]) -> None:
        self._peers = {p.id: p for p in peers}
        self.punished: list[tuple[str, GoAwayReason, str]] = []
        self.sent_away: list[str] = []

    def peers(self) -> Iterable[Peer]:
        return cast(Iterable[Peer], list(self._peers.values()))

    def get(self, peer_id: str) -> Peer | None:
        return cast(Peer | None, self._peers.get(peer_id))

    def punish(self, peer_id: str, reason: GoAwayReason, detail: str) -> None:
        self.punished.append((peer_id, reason, detail))

    def send_away(self, peer_id: str, reason: GoAwayReason, detail: str) -> None:
        self.sent_away.append(peer_id)


class MemoryDownload:
    def __init__(self) -> None:
        self._offer: SnapshotOffer | None = None
        self._hashes: tuple[bytes, ...] = ()
        self.chunks: dict[int, bytes] = {}
        self.finished = 0

    def offer(self) -> SnapshotOffer | None:
        return self._offer

    def hashes(self) -> tuple[bytes, ...]:
        return self._hashes

    async def start(self, offer: SnapshotOffer, hashes: tuple[bytes, ...]) -> None:
        self._offer, self._hashes = offer, hashes

    def held(self) -> set[int]:
        return set(self.chunks)

    async def write(self, index: int, data: bytes) -> None:
        self.chunks[index] = data

    async def finish(self) -> Path:
        self.finished += 1
        assert b"".join(self.chunks[i] for i in sorted(self.chunks)) == DATA
        return Path("snapshot.part")

    async def reset(self) -> None:
        self._offer, self.chunks = None, {}


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
) -> tuple[StateSync, Fetcher, FakeSwitch, dict[str, FakePeer], MemoryDownload, list[Path]]:
    peers = {n: FakePeer(n) for n in names}
    switch = FakeSwitch(list(peers.values()))
    download, done = MemoryDownload(), list[Path]()
    fetcher = Fetcher(TRUSTED, download, done.append, per_peer=2, timeout=10, clock=Clock())
    reactor = StateSync(NoSnapshots(), fetcher)
    reactor.bind(switch)
    for peer in peers.values():
        reactor.add_peer(cast(Peer, peer))
    return reactor, fetcher, switch, peers, download, done


async def _recv(reactor: StateSync, peer: FakePeer, message: Message) -> None:
    await reactor.receive(cast(Peer, peer), message)
    await asyncio.sleep(0)  # let a finishing task run


def test_a_good_download_from_two_peers_ends_verified_once() -> None:
    """Both peers offer the trusted block: the manifest comes from one, the chunks from both
    (two at a time each), and the download finishes exactly once."""

    async def scenario() -> None:
        reactor, fetcher, switch, peers, download, done = rig()
        assert all(isinstance(p.offered[0], SnapshotListRequest) for p in peers.values())
        for peer in peers.values():
            await _recv(reactor, peer, SnapshotList((OFFER,)))
        asking = [p for p in peers.values() if isinstance(p.offered[-1], SnapshotManifestRequest)]
        assert len(asking) == 1
        await _recv(reactor, asking[0], SnapshotManifest(TRUSTED, HASHES))
        assert sorted(peers["a"].asked() + peers["b"].asked()) == [0, 1, 2]
        for peer in peers.values():
            for index in peer.asked():
                await _recv(reactor, peer, SnapshotChunk(TRUSTED, index, CHUNKS[index]))
        await asyncio.sleep(0)
        assert done == [Path("snapshot.part")] and download.finished == 1
        assert switch.punished == [] and fetcher.status()["chunks"] == 3

    asyncio.run(scenario())


def test_a_manifest_not_matching_its_root_bans_every_peer_offering_that_root() -> None:
    """A manifest whose hashes do not hash to the offered root: the peers offering that root
    are banned and nothing is asked of them."""

    async def scenario() -> None:
        reactor, fetcher, switch, peers, _, _ = rig(("a",))
        await _recv(reactor, peers["a"], SnapshotList((OFFER,)))
        forged = (HASHES[0], HASHES[1], blake3(b"x").digest())
        await _recv(reactor, peers["a"], SnapshotManifest(TRUSTED, forged))
        assert [(p, r) for p, r, _ in switch.punished] == [("a", GoAwayReason.VALIDATION)]
        assert fetcher.offer is None and peers["a"].asked() == []

    asyncio.run(scenario())


def test_a_corrupt_chunk_bans_its_sender_and_goes_to_another_peer() -> None:
    """A chunk that does not match its hash is not written; its sender is banned and the
    chunk, with the sender's other requests, is asked of the other peer."""

    async def scenario() -> None:
        reactor, _, switch, peers, download, _ = rig()
        for peer in peers.values():
            await _recv(reactor, peer, SnapshotList((OFFER,)))
        manifest_peer = next(
            p for p in peers.values() if isinstance(p.offered[-1], SnapshotManifestRequest)
        )
        await _recv(reactor, manifest_peer, SnapshotManifest(TRUSTED, HASHES))
        bad, good = peers["a"], peers["b"]
        index = bad.asked()[0]
        await _recv(reactor, bad, SnapshotChunk(TRUSTED, index, b"\x00" * len(CHUNKS[index])))
        assert switch.punished == [("a", GoAwayReason.VALIDATION, "corrupt snapshot chunk")]
        assert index not in download.chunks
        reactor.remove_peer(cast(Peer, bad))
        for _ in range(3):
            for i in list(good.asked()):
                if i not in download.chunks:
                    await _recv(reactor, good, SnapshotChunk(TRUSTED, i, CHUNKS[i]))
        assert sorted(download.chunks) == [0, 1, 2]

    asyncio.run(scenario())


def test_a_silent_peer_loses_its_requests_after_the_timeout() -> None:
    """Requests unanswered for the timeout go to the other peer, which kept up, and each
    counts a strike against the silent one."""

    async def scenario() -> None:
        reactor, fetcher, _, peers, _, _ = rig()
        for peer in peers.values():
            await _recv(reactor, peer, SnapshotList((OFFER,)))
        manifest_peer = next(
            p for p in peers.values() if isinstance(p.offered[-1], SnapshotManifestRequest)
        )
        await _recv(reactor, manifest_peer, SnapshotManifest(TRUSTED, HASHES))
        silent, other = peers["a"], peers["b"]
        for i in other.asked():
            await _recv(reactor, other, SnapshotChunk(TRUSTED, i, CHUNKS[i]))
        pending = [i for i in silent.asked() if i not in other.asked()]
        assert pending
        cast(Clock, fetcher.clock).now += 11
        reactor._tick(fetcher)
        assert set(pending) <= set(other.asked()), "the silent peer's chunks were re-asked"
        assert fetcher.sources["a"].strikes == len(pending)

    asyncio.run(scenario())
