"""The state sync reactor with fake peers: a manifest must hash to the root most peers offer
(else its sender, and only it, is banned), each chunk to its hash and length (else its
sender is banned and the chunk asked of another), the snapshot's head must name the trusted
block, a silent peer's requests (chunks or manifest) move on after the timeout, and the
download ends verified, once. (Serving: ``test_snapshot_serving``.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import pytest
from blake3 import blake3

from p2p.statesync.fetch import MAX_REMEMBERED, Fetcher, manifest_root
from p2p.statesync.reactor import StateSync
from p2p.transport.peer import Peer
from p2p.wire.messages import (
    GoAwayReason,
    SnapshotChunk,
    SnapshotList,
    SnapshotListRequest,
    SnapshotManifest,
    SnapshotManifestRequest,
    SnapshotOffer,
)
from tests.p2p.fakes import FakeSwitch
from tests.p2p.statesync.rig import (
    CHUNK,
    CHUNKS,
    DATA,
    FORGED,
    HASHES,
    OFFER,
    TRUSTED,
    Clock,
    FakePeer,
    MemoryDownload,
    NoSnapshots,
    recv,
    rig,
)


def test_a_good_download_from_two_peers_ends_verified_once() -> None:
    """Both peers offer the trusted block: the manifest comes from one, the chunks from both
    (two at a time each), and the download finishes exactly once."""

    async def scenario() -> None:
        reactor, fetcher, switch, peers, download, done = rig()
        assert all(isinstance(p.offered[0], SnapshotListRequest) for p in peers.values())
        for peer in peers.values():
            await recv(reactor, peer, SnapshotList((OFFER,)))
        asking = [p for p in peers.values() if isinstance(p.offered[-1], SnapshotManifestRequest)]
        assert len(asking) == 1
        await recv(reactor, asking[0], SnapshotManifest(TRUSTED, HASHES))
        assert sorted(peers["a"].asked() + peers["b"].asked()) == [0, 1, 2]
        for peer in peers.values():
            for index in peer.asked():
                await recv(reactor, peer, SnapshotChunk(TRUSTED, index, CHUNKS[index]))
        await asyncio.sleep(0)
        assert done == [Path("snapshot.part")] and download.finished == 1
        assert switch.punished == [] and fetcher.status().chunks == 3

    asyncio.run(scenario())


def _manifest_asked_of(peers: dict[str, FakePeer]) -> list[FakePeer]:
    return [p for p in peers.values() for m in p.offered if isinstance(m, SnapshotManifestRequest)]


async def _started(
    reactor: StateSync, peers: dict[str, FakePeer], offer: SnapshotOffer = OFFER
) -> None:
    """Every peer offers ``offer``; the one asked sends the manifest of HASHES."""
    for peer in peers.values():
        await recv(reactor, peer, SnapshotList((offer,)))
    (asked,) = _manifest_asked_of(peers)
    await recv(reactor, asked, SnapshotManifest(TRUSTED, HASHES))


def test_a_peer_silent_past_its_strikes_loses_its_session_and_all_its_requests() -> None:
    """With more requests in flight than strikes allowed, a silent peer is dropped and sent
    away with a ban (benign) at its last strike, and every request it held (counted or not)
    goes to the other peer."""

    async def scenario() -> None:
        peers = {n: FakePeer(n) for n in ("a", "b")}
        switch = FakeSwitch(list(peers.values()))
        data = bytes(range(256)) * 16 * 8  # eight chunks
        chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
        hashes = tuple(blake3(c).digest() for c in chunks)
        offer = SnapshotOffer(TRUSTED, len(data), CHUNK, manifest_root(hashes))
        fetcher = Fetcher(TRUSTED, MemoryDownload(), print, per_peer=4, clock=Clock())
        reactor = StateSync(NoSnapshots(), fetcher)
        reactor.bind(switch)
        for peer in peers.values():
            await recv(reactor, peer, SnapshotList((offer,)))
        (asked,) = _manifest_asked_of(peers)
        await recv(reactor, asked, SnapshotManifest(TRUSTED, hashes))
        silent, other = peers["a"], peers["b"]
        for i in other.asked():
            await recv(reactor, other, SnapshotChunk(TRUSTED, i, chunks[i]))
        assert len(silent.asked()) == 4
        cast(Clock, fetcher.clock).now += 11
        reactor._tick(fetcher)
        assert [(p, r) for p, r, _ in switch.punished] == [("a", GoAwayReason.BENIGN_OTHER)]
        assert "a" not in fetcher.sources and fetcher.status().dropped == ("a",)
        assert set(silent.asked()) <= set(other.asked())

    asyncio.run(scenario())


def test_a_manifest_not_matching_its_root_bans_only_its_sender() -> None:
    """A manifest whose hashes do not hash to the offered root is its sender's lie (the root
    came from every offer): the sender alone is banned, and the manifest is asked of the
    other peer offering that root, whose good one starts the download."""

    async def scenario() -> None:
        reactor, fetcher, switch, peers, _, _ = rig()
        for peer in peers.values():
            await recv(reactor, peer, SnapshotList((OFFER,)))
        (liar,) = _manifest_asked_of(peers)
        forged = (HASHES[0], HASHES[1], blake3(b"x").digest())
        await recv(reactor, liar, SnapshotManifest(TRUSTED, forged))
        assert [(p, r) for p, r, _ in switch.punished] == [(liar.id, GoAwayReason.VALIDATION)]
        assert fetcher.offer is None and liar.asked() == []
        assert fetcher.status().peers_banned == {"manifest": 1}
        (honest,) = [p for p in _manifest_asked_of(peers) if p is not liar]
        await recv(reactor, honest, SnapshotManifest(TRUSTED, HASHES))
        assert fetcher.offer == OFFER and len(switch.punished) == 1
        assert sorted(honest.asked()) == [0, 1]

    asyncio.run(scenario())


def test_a_snapshot_whose_head_names_another_block_is_refused_at_chunk_0() -> None:
    """A forger's snapshot, offered (and consistent with its root) under the trusted id but
    whose head is another block: as soon as chunk 0 is written its root is refused, every
    peer offering it banned, and the download reset, without fetching the rest."""

    async def scenario() -> None:
        reactor, fetcher, switch, peers, download, done = rig(download=MemoryDownload(FORGED))
        await _started(reactor, peers)
        holder = next(p for p in peers.values() if 0 in p.asked())
        await recv(reactor, holder, SnapshotChunk(TRUSTED, 0, CHUNKS[0]))
        assert sorted(p for p, _, _ in switch.punished) == ["a", "b"]
        assert all(r == GoAwayReason.VALIDATION for _, r, _ in switch.punished)
        assert download.resets == 1 and fetcher.offer is None and fetcher.sources == {}
        assert fetcher.status().peers_banned == {"snapshot": 2}
        assert OFFER.root in fetcher.bad_roots and done == [] and download.finished == 0
        asked_before = sum(len(p.asked()) for p in peers.values())
        await recv(reactor, peers["a"], SnapshotList((OFFER,)))  # offered again: ignored
        reactor._tick(fetcher)
        assert sum(len(p.asked()) for p in peers.values()) == asked_before
        assert len(_manifest_asked_of(peers)) == 1

    asyncio.run(scenario())


def test_a_silent_manifest_request_goes_to_another_peer_after_the_timeout() -> None:
    """The peer asked for the manifest never answers: after the timeout the next peer
    offering the root is asked, and its answer starts the download."""

    async def scenario() -> None:
        reactor, fetcher, _, peers, _, _ = rig()
        for peer in peers.values():
            await recv(reactor, peer, SnapshotList((OFFER,)))
        (silent,) = _manifest_asked_of(peers)
        cast(Clock, fetcher.clock).now += 5
        reactor._tick(fetcher)
        assert _manifest_asked_of(peers) == [silent], "not before the timeout"
        cast(Clock, fetcher.clock).now += 6
        reactor._tick(fetcher)
        (other,) = [p for p in _manifest_asked_of(peers) if p is not silent]
        await recv(reactor, other, SnapshotManifest(TRUSTED, HASHES))
        assert fetcher.offer == OFFER

    asyncio.run(scenario())


def test_no_second_manifest_is_asked_while_the_first_is_written_down() -> None:
    """While the accepted manifest is being written (download.start awaits), a tick does not
    ask another peer for one."""

    async def scenario() -> None:
        download = MemoryDownload()
        download.gate = asyncio.Event()
        reactor, fetcher, _, peers, _, _ = rig(download=download)
        for peer in peers.values():
            await recv(reactor, peer, SnapshotList((OFFER,)))
        (asked,) = _manifest_asked_of(peers)
        accepting = asyncio.create_task(
            reactor.receive(cast(Peer, asked), SnapshotManifest(TRUSTED, HASHES))
        )
        await asyncio.sleep(0)
        cast(Clock, fetcher.clock).now += 11
        reactor._tick(fetcher)
        assert len(_manifest_asked_of(peers)) == 1
        download.gate.set()
        await accepting
        assert fetcher.offer == OFFER and len(_manifest_asked_of(peers)) == 1

    asyncio.run(scenario())


def test_a_chunk_of_the_wrong_length_is_refused_even_matching_its_hash() -> None:
    """A manifest consistent with its root but made of a short chunk: the short chunk, which
    matches its hash, is not written and its sender is banned."""

    async def scenario() -> None:
        short = CHUNKS[1][:-1]
        hashes = (HASHES[0], blake3(short).digest(), HASHES[2])
        offer = SnapshotOffer(TRUSTED, len(DATA), CHUNK, manifest_root(hashes))
        reactor, _, switch, peers, download, _ = rig()
        for peer in peers.values():
            await recv(reactor, peer, SnapshotList((offer,)))
        (asked,) = _manifest_asked_of(peers)
        await recv(reactor, asked, SnapshotManifest(TRUSTED, hashes))
        sender = next(p for p in peers.values() if 1 in p.asked())
        await recv(reactor, sender, SnapshotChunk(TRUSTED, 1, short))
        assert 1 not in download.chunks
        assert switch.punished == [(sender.id, GoAwayReason.VALIDATION, "corrupt snapshot chunk")]

    asyncio.run(scenario())


def test_an_offer_too_large_to_be_a_state_is_not_fetched() -> None:
    """An offer of 700 GiB (which the codec lets through: 175,000 chunks of 4 MiB) is
    ignored: no manifest is asked for, nothing allocated."""

    async def scenario() -> None:
        huge = SnapshotOffer(TRUSTED, 700 << 30, 4 << 20, OFFER.root)
        reactor, fetcher, _, peers, _, _ = rig(("a",))
        await recv(reactor, peers["a"], SnapshotList((huge,)))
        assert _manifest_asked_of(peers) == [] and fetcher.sources == {}

    asyncio.run(scenario())


def test_a_peer_that_stops_listing_the_snapshot_loses_its_requests_unpunished() -> None:
    """A server that pruned the snapshot answers with its list, without it: the chunks asked
    of it go to the other peer at once, and it is not banned."""

    async def scenario() -> None:
        reactor, _, switch, peers, _, _ = rig()
        await _started(reactor, peers)
        gone, other = peers["a"], peers["b"]
        pending = list(gone.asked())
        for i in other.asked():
            await recv(reactor, other, SnapshotChunk(TRUSTED, i, CHUNKS[i]))
        await recv(reactor, gone, SnapshotList(()))
        assert set(pending) <= set(other.asked()) and switch.punished == []

    asyncio.run(scenario())


class CountingSet(set[int]):
    lookups = 0

    def __contains__(self, item: object) -> bool:
        CountingSet.lookups += 1
        return super().__contains__(item)


class HeldDownload(MemoryDownload):
    """Holds the first ``held`` of ``chunks`` identical chunks (as after a restart)."""

    def __init__(self, chunks: int, held: int) -> None:
        super().__init__()
        self.set = CountingSet(range(held))
        self.chunks = dict.fromkeys(range(held), b"")

    def held(self) -> set[int]:
        return self.set

    async def write(self, index: int, data: bytes) -> None:
        self.set.add(index)


def test_scheduling_costs_no_scan_of_the_chunks_held() -> None:
    """With 20,000 of 30,000 chunks held, each chunk fetched schedules the next without
    looking at the held ones again (the old scan made a download quadratic)."""

    async def scenario() -> None:
        n, zero = 30_000, bytes(CHUNK)
        hashes = (blake3(zero).digest(),) * n
        offer = SnapshotOffer(TRUSTED, n * CHUNK, CHUNK, manifest_root(hashes))
        download = HeldDownload(n, 20_000)
        reactor, _, _, peers, _, _ = rig(download=download)
        for peer in peers.values():
            await recv(reactor, peer, SnapshotList((offer,)))
        (asked,) = _manifest_asked_of(peers)
        await recv(reactor, asked, SnapshotManifest(TRUSTED, hashes))
        CountingSet.lookups = 0
        for _ in range(100):
            for peer in peers.values():
                index = next(i for i in reversed(peer.asked()) if i not in download.set)
                await recv(reactor, peer, SnapshotChunk(TRUSTED, index, zero))
        assert len(download.set) == 20_200
        assert CountingSet.lookups < 2_000, CountingSet.lookups

    asyncio.run(scenario())


def test_a_corrupt_chunk_bans_its_sender_and_goes_to_another_peer() -> None:
    """A chunk that does not match its hash is not written; its sender is banned and the
    chunk, with the sender's other requests, is asked of the other peer."""

    async def scenario() -> None:
        reactor, fetcher, switch, peers, download, _ = rig()
        for peer in peers.values():
            await recv(reactor, peer, SnapshotList((OFFER,)))
        manifest_peer = next(
            p for p in peers.values() if isinstance(p.offered[-1], SnapshotManifestRequest)
        )
        await recv(reactor, manifest_peer, SnapshotManifest(TRUSTED, HASHES))
        bad, good = peers["a"], peers["b"]
        index = bad.asked()[0]
        await recv(reactor, bad, SnapshotChunk(TRUSTED, index, b"\x00" * len(CHUNKS[index])))
        assert switch.punished == [("a", GoAwayReason.VALIDATION, "corrupt snapshot chunk")]
        assert fetcher.status().peers_banned == {"chunk": 1}
        assert index not in download.chunks
        reactor.remove_peer(cast(Peer, bad))
        for _ in range(3):
            for i in list(good.asked()):
                if i not in download.chunks:
                    await recv(reactor, good, SnapshotChunk(TRUSTED, i, CHUNKS[i]))
        assert sorted(download.chunks) == [0, 1, 2]

    asyncio.run(scenario())


def test_a_silent_peer_loses_its_requests_after_the_timeout() -> None:
    """Requests unanswered for the timeout go to the other peer, which kept up, and each
    counts a strike against the silent one."""

    async def scenario() -> None:
        reactor, fetcher, _, peers, _, _ = rig()
        fetcher.max_strikes = 3  # above the requests in flight: counted, not dropped
        for peer in peers.values():
            await recv(reactor, peer, SnapshotList((OFFER,)))
        manifest_peer = next(
            p for p in peers.values() if isinstance(p.offered[-1], SnapshotManifestRequest)
        )
        await recv(reactor, manifest_peer, SnapshotManifest(TRUSTED, HASHES))
        silent, other = peers["a"], peers["b"]
        for i in other.asked():
            await recv(reactor, other, SnapshotChunk(TRUSTED, i, CHUNKS[i]))
        pending = [i for i in silent.asked() if i not in other.asked()]
        assert pending
        cast(Clock, fetcher.clock).now += 11
        reactor._tick(fetcher)
        assert set(pending) <= set(other.asked()), "the silent peer's chunks were re-asked"
        assert fetcher.strikes["a"] == len(pending) and "a" in fetcher.sources

    asyncio.run(scenario())


def test_a_crash_while_finishing_ends_the_reactors_run() -> None:
    """The check of the whole file runs in a task of the reactor's: an error there (here in
    on_done) is not lost but ends the reactor's run, and so the node."""

    def boom(path: Path) -> None:
        raise RuntimeError("a bug of ours")

    async def scenario() -> None:
        peers = {n: FakePeer(n) for n in ("a",)}
        fetcher = Fetcher(TRUSTED, MemoryDownload(), boom, per_peer=4, clock=Clock())
        reactor = StateSync(NoSnapshots(), fetcher)
        reactor.bind(FakeSwitch(list(peers.values())))
        await _started(reactor, peers)
        for i in peers["a"].asked():
            await recv(reactor, peers["a"], SnapshotChunk(TRUSTED, i, CHUNKS[i]))
        with pytest.raises(ExceptionGroup) as failed:
            await asyncio.wait_for(reactor.run(), 5)
        assert failed.group_contains(RuntimeError, match="a bug of ours")

    asyncio.run(scenario())


SILENT_ROOT = blake3(b"a root nobody can back").digest()
SILENT_OFFER = SnapshotOffer(TRUSTED, len(DATA), CHUNK, SILENT_ROOT)


class Offerers:
    """Three silent offerers agreeing on a root of their own, and one honest peer: each
    silent one re-lists whenever asked and, sent away, reconnects at once (its ban ignored,
    the worst case for the fetcher)."""

    def __init__(self) -> None:
        self.reactor, self.fetcher, self.switch, self.peers, self.download, self.done = rig(
            ("s1", "s2", "s3", "h")
        )
        self.listed: dict[str, int] = {}  # list requests answered, per peer
        self.punished = 0

    async def step(self) -> None:
        """Silent peers punished since the last step leave and come back; every peer answers
        the list requests it has not answered yet."""
        for peer_id, _, _ in self.switch.punished[self.punished :]:
            back = cast(Peer, self.peers[peer_id])
            self.reactor.remove_peer(back)
            self.reactor.add_peer(back)
        self.punished = len(self.switch.punished)
        for peer in self.peers.values():
            asked = sum(isinstance(m, SnapshotListRequest) for m in peer.offered)
            if asked > self.listed.get(peer.id, 0):
                self.listed[peer.id] = asked
                offer = OFFER if peer.id == "h" else SILENT_OFFER
                await recv(self.reactor, peer, SnapshotList((offer,)))

    def manifest_asked(self, peer_id: str) -> int:
        return sum(isinstance(m, SnapshotManifestRequest) for m in self.peers[peer_id].offered)


def test_silent_offerers_outvoting_an_honest_peer_are_dropped_and_the_download_ends() -> None:
    """Three offerers that agree on a root and never answer the manifest request are each
    dropped (banned, benign) after two lapses, however often they come back, and the honest
    peer's manifest and chunks end the download: six timeouts at most."""

    async def scenario() -> None:
        net = Offerers()
        clock = cast(Clock, net.fetcher.clock)
        await net.step()
        lapses = 0
        while net.manifest_asked("h") == 0 and lapses < 12:
            clock.now += 11
            net.reactor._tick(net.fetcher)
            lapses += 1
            await net.step()
        assert net.manifest_asked("h") == 1, f"the honest peer never asked in {lapses} lapses"
        assert lapses <= 6
        silent = ("s1", "s2", "s3")
        assert sorted(p for p, _, _ in net.switch.punished) == list(silent)
        assert {r for _, r, _ in net.switch.punished} == {GoAwayReason.BENIGN_OTHER}
        assert all(net.manifest_asked(p) == 2 for p in silent), "each asked twice, no more"
        status = net.fetcher.status()
        assert status.dropped == silent and status.peers_banned == {"silent": 3}
        await recv(net.reactor, net.peers["h"], SnapshotManifest(TRUSTED, HASHES))
        for _ in range(3):
            for index in net.peers["h"].asked():
                if index not in net.download.chunks:
                    await recv(
                        net.reactor, net.peers["h"], SnapshotChunk(TRUSTED, index, CHUNKS[index])
                    )
        await asyncio.sleep(0)
        assert net.done == [Path("snapshot.part")]
        assert all(net.peers[p].asked() == [] for p in silent)

    asyncio.run(scenario())


def test_a_dropped_peer_serving_alone_is_asked_again_on_its_last_strike() -> None:
    """A lone server dropped for lapses is still the one to ask when it comes back (nobody
    else serves), but on its last strike: one more lapse drops it again."""

    async def scenario() -> None:
        reactor, fetcher, switch, peers, _, _ = rig(("a",))
        peer = peers["a"]
        await recv(reactor, peer, SnapshotList((OFFER,)))
        for _ in range(2):
            cast(Clock, fetcher.clock).now += 11
            reactor._tick(fetcher)
        assert [p for p, _, _ in switch.punished] == ["a"] and fetcher.sources == {}
        reactor.remove_peer(cast(Peer, peer))
        reactor.add_peer(cast(Peer, peer))
        await recv(reactor, peer, SnapshotList((OFFER,)))
        assert len(_manifest_asked_of(peers)) == 3, "asked again: nobody else serves"
        cast(Clock, fetcher.clock).now += 11
        reactor._tick(fetcher)
        assert [p for p, _, _ in switch.punished] == ["a", "a"]

    asyncio.run(scenario())


def test_an_answer_clears_a_peers_strikes() -> None:
    """A peer that lets one request lapse and then answers one is back to no strikes, so
    an occasional late answer never adds up to a drop."""

    async def scenario() -> None:
        reactor, fetcher, switch, peers, _, _ = rig(("a",))
        peer = peers["a"]
        await recv(reactor, peer, SnapshotList((OFFER,)))
        cast(Clock, fetcher.clock).now += 11
        reactor._tick(fetcher)
        assert fetcher.strikes["a"] == 1
        await recv(reactor, peer, SnapshotManifest(TRUSTED, HASHES))
        assert fetcher.strikes["a"] == 0 and switch.punished == []

    asyncio.run(scenario())


def test_the_peers_remembered_for_their_lapses_are_bounded() -> None:
    """Identities cost nothing: past MAX_REMEMBERED, the oldest strikes and drops are
    forgotten, the newest kept."""
    fetcher = Fetcher(TRUSTED, MemoryDownload(), print, clock=Clock())
    for n in range(MAX_REMEMBERED + 10):
        fetcher.lapsed(f"p{n}")
        fetcher.drop(f"p{n}")
    assert len(fetcher.strikes) == len(fetcher.dropped) == MAX_REMEMBERED
    assert f"p{MAX_REMEMBERED + 9}" in fetcher.dropped and "p0" not in fetcher.dropped
