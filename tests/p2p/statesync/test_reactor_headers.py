"""State sync without a trusted block: the header chain chooses the snapshot to fetch, the
snapshot must carry the header state of the block chosen, and a block nobody serves is
given up."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from chain.core.header_chain import HeaderChain
from chain.core.primitives.crypto import sha256
from chain.core.primitives.types import BlockId
from chain.storage.snapshot import write_snapshot
from genesis.testing import DevNet
from p2p.statesync.fetch import Fetcher, manifest_root
from p2p.statesync.reactor import RECHOOSE_S, StateSync
from p2p.transport.peer import Peer
from p2p.wire.messages import (
    SnapshotChunk,
    SnapshotList,
    SnapshotManifest,
    SnapshotManifestRequest,
    SnapshotOffer,
)
from tests.p2p.fakes import FakeSwitch
from tests.p2p.statesync.rig import (
    CHUNK,
    CHUNKS,
    DATA,
    HASHES,
    OFFER,
    TRUSTED,
    Clock,
    FakePeer,
    MemoryDownload,
    NoSnapshots,
    recv,
)


class Vouching:
    """A header chain followed (``chain.core.header_chain.HeaderChain``) that vouches for
    ``ids``."""

    def __init__(self, *ids: BlockId) -> None:
        self.ids = set(ids)
        self.lib = 9
        self.tip = SimpleNamespace(num=10)

    def trusts(self, block_id: BlockId) -> bool:
        return block_id in self.ids

    def header_state_digest(self, block_id: BlockId) -> bytes | None:
        return b"d" * 32 if block_id in self.ids else None


def test_without_a_trusted_block_the_newest_offer_the_headers_vouch_for_is_fetched() -> None:
    """No block from the operator: nothing is chosen before the header chain is level with a
    peer; then an offer of a block it does not vouch for is passed over, however new, and of
    those it vouches for, the newest is fetched."""
    older = BlockId((3).to_bytes(4, "big") + b"o" * 28)
    newer_unvouched = BlockId((9).to_bytes(4, "big") + b"n" * 28)
    offers = (
        SnapshotOffer(older, len(DATA), CHUNK, manifest_root(HASHES)),
        OFFER,
        SnapshotOffer(newer_unvouched, len(DATA), CHUNK, manifest_root(HASHES)),
    )

    async def scenario() -> None:
        peer = FakePeer("a")
        switch = FakeSwitch([peer])
        headers = cast(HeaderChain, Vouching(older, TRUSTED))
        fetcher = Fetcher(None, MemoryDownload(), print, headers=headers, clock=Clock())
        reactor = StateSync(NoSnapshots(), fetcher)
        reactor.bind(switch)
        reactor.add_peer(cast(Peer, peer))
        assert fetcher.status().block_id is None
        await recv(reactor, peer, SnapshotList(offers))
        assert fetcher.trusted is None, "not level with the peers yet: the newest may come"
        fetcher.caught_up()
        await recv(reactor, peer, SnapshotList(offers[2:]))
        assert fetcher.trusted is None, "nothing vouched for: nothing chosen"
        await recv(reactor, peer, SnapshotList(offers))
        assert fetcher.trusted == TRUSTED
        assert peer.offered[-1] == SnapshotManifestRequest(TRUSTED)

    asyncio.run(scenario())


def test_a_download_kept_from_an_earlier_run_names_the_block_to_trust() -> None:
    """After a restart with no block from the operator, the download kept (accepted only for
    a block trusted then) goes on, with no header chain to follow again; with neither a block
    nor a header chain, there is nothing to fetch."""
    kept = MemoryDownload()
    kept._offer = OFFER
    fetcher = Fetcher(None, kept, print, headers=cast(HeaderChain, Vouching()))
    assert fetcher.trusted == TRUSTED and fetcher.offer == OFFER
    with pytest.raises(ValueError, match="trusted block or the header chain"):
        Fetcher(None, MemoryDownload(), print)


def _snapshot_file(tmp_path: Path) -> tuple[BlockId, bytes, Path]:
    """A real snapshot file of a small chain's LIB: (its block, its header state's digest)."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path / "chain")
    for _ in range(8):
        net.produce(chain)
    head, entries = chain.store.lib_state(chain.chain_id)
    path = tmp_path / "snapshot.bin"
    with path.open("wb") as out:
        write_snapshot(out, head, entries)
    chain.store.close()
    return head.block.id, sha256(head.header_state.encode()), path


class FileBacked(MemoryDownload):
    """A download whose finished file is ``path``, a real snapshot."""

    def __init__(self, head: BlockId, path: Path) -> None:
        super().__init__(head)
        self.path = path

    async def finish(self) -> Path:
        self.finished += 1
        return self.path


@pytest.mark.parametrize("sound", [True, False])
def test_a_snapshot_chosen_by_headers_must_carry_their_header_state(
    tmp_path: Path, sound: bool
) -> None:
    """The whole file in, a snapshot of a block the header chain vouched for is taken only
    if its header state (schedules, LIB, finality data) is the one the chain gives: a file
    with the right state but another header state is refused and its sources banned."""
    block, digest, path = _snapshot_file(tmp_path)
    offer = SnapshotOffer(block, len(DATA), CHUNK, manifest_root(HASHES))

    class Headers(Vouching):
        def header_state_digest(self, block_id: BlockId) -> bytes | None:
            return digest if sound else b"x" * 32

    async def scenario() -> None:
        peer = FakePeer("a")
        switch = FakeSwitch([peer])
        done: list[Path] = []
        download = FileBacked(block, path)
        headers = cast(HeaderChain, Headers(block))
        fetcher = Fetcher(None, download, done.append, headers=headers, clock=Clock())
        fetcher.caught_up()
        reactor = StateSync(NoSnapshots(), fetcher)
        reactor.bind(switch)
        reactor.add_peer(cast(Peer, peer))
        await recv(reactor, peer, SnapshotList((offer,)))
        await recv(reactor, peer, SnapshotManifest(block, HASHES))
        for index in peer.asked():
            await recv(reactor, peer, SnapshotChunk(block, index, CHUNKS[index]))
        for _ in range(3):
            await asyncio.sleep(0)
        if sound:
            assert done == [path] and switch.punished == []
        else:
            assert done == [] and [p for p, _, _ in switch.punished] == ["a"]
            assert offer.root in fetcher.bad_roots

    asyncio.run(scenario())


def test_a_block_chosen_by_headers_that_nobody_serves_is_given_up() -> None:
    """When every peer offering the chosen block is gone before its manifest came, the
    choice is dropped after RECHOOSE_S, and the header chain is followed again."""

    async def scenario() -> None:
        peer = FakePeer("a")
        switch = FakeSwitch([peer])
        clock = Clock()
        fetcher = Fetcher(
            None, MemoryDownload(), print, headers=cast(HeaderChain, Vouching(TRUSTED)), clock=clock
        )
        fetcher.caught_up()
        reactor = StateSync(NoSnapshots(), fetcher)
        reactor.bind(switch)
        reactor.add_peer(cast(Peer, peer))
        await recv(reactor, peer, SnapshotList((OFFER,)))
        assert fetcher.trusted == TRUSTED and not fetcher.following()
        reactor.remove_peer(cast(Peer, peer))
        reactor._tick(fetcher)
        clock.now += RECHOOSE_S - 1
        reactor._tick(fetcher)
        assert fetcher.trusted == TRUSTED
        clock.now += 2
        reactor._tick(fetcher)
        assert fetcher.trusted is None and fetcher.following()

    asyncio.run(scenario())
