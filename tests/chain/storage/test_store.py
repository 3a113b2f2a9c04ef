"""The block store keeps undo records only for reversible blocks, indexes what it holds, and
keeps the contract of ``BlockStoreContract`` on a real LevelDB."""

from __future__ import annotations

from pathlib import Path

import plyvel
import pytest

from chain.core.consensus.block import SignedBlock
from chain.core.consensus.dpos import HeaderState
from chain.core.execution.actions import Transfer
from chain.core.execution.state import Changes
from chain.core.execution.state_hash import StateHash
from chain.core.primitives import schema
from chain.core.primitives.encoding import pack, unpack
from chain.core.primitives.errors import StoreError, StoreInUse
from chain.core.primitives.types import AccountName
from chain.storage.store import BlockStore
from chain.testing import now_ms
from genesis.testing import DevNet


def test_undo_records_and_header_states_are_pruned_at_lib(tmp_path: Path) -> None:
    """Undo records exist only for blocks above the LIB and header states only from the LIB up,
    while every block stays readable."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    for _ in range(9):
        net.produce(chain)
    lib, head = chain.lib, chain.head.num
    assert 0 < lib < head
    store = chain.store
    undo = sorted(int.from_bytes(k[1:], "big") for k, _ in store.iterate(b"u", b"v"))
    assert undo == list(range(lib + 1, head + 1)), "undo records exist only above the LIB"
    for num in range(1, head + 1):
        block_id = store.block_id_at(num)
        assert block_id is not None and store.block(block_id) is not None
        has_state = store.get(schema.header_state_key(block_id)) is not None
        assert has_state == (num >= lib), f"header state of block {num}"


def test_iterate_walks_a_range_both_ways(tmp_path: Path) -> None:
    """iterate in reverse gives the same entries of the range from the last down (a
    contract's reverse walk of its table reads the store this way)."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    for _ in range(4):
        net.produce(chain)
    forward = list(chain.store.iterate(b"n", b"o"))
    assert len(forward) >= 4
    assert list(chain.store.iterate(b"n", b"o", reverse=True)) == forward[::-1]


def test_transaction_index_points_at_the_block(tmp_path: Path) -> None:
    """A transaction's index entry names the block that included it, and the chain returns it with
    that number."""
    net = DevNet.create(1)
    chain = net.open(tmp_path)
    stx = net.tx(chain, Transfer(AccountName("alice"), AccountName("bob"), 3))
    chain.admit_transaction(stx, now_ms())
    block = net.produce(chain)
    assert chain.store.tx_block_num(stx.id) == block.num
    assert chain.transaction(stx.id) == (stx, block.num)


# --- the contract every block store keeps ---------------------------------------------------

History = list[tuple[SignedBlock, HeaderState]]


def _dump(store: BlockStore) -> dict[bytes, bytes]:
    """Every key of the store, state and chain alike."""
    return dict(store.iterate(b"", b"\xff"))


def _hash(k: int) -> StateHash:
    """A distinct commitment per block (these tests check the store, not the hashing)."""
    return StateHash.of([(b"block", bytes([k]))])


def _changes(k: int) -> Changes:
    """Writes of every kind for block ``k``: a new key, an overwrite and a deletion."""
    return [
        (schema.account_key("alice"), f"alice after block {k}".encode()),
        (schema.STATE + b"x" + bytes([k]), b"new"),
        (schema.account_key("bob"), None),
    ]


class BlockStoreContract:
    """What a block store must do, whatever backs it: a subclass says how to open one."""

    def open_store(self, path: Path) -> BlockStore:
        raise NotImplementedError

    @pytest.fixture
    def net(self) -> DevNet:
        return DevNet.create(3, blocks_per_turn=1)

    @pytest.fixture
    def history(self, net: DevNet, tmp_path: Path) -> History:
        """Four real blocks and their header states, made on another chain."""
        source = net.open(tmp_path / "source")
        out: History = []
        for _ in range(4):
            out.append((net.produce(source), source.head))
        source.store.close()
        return out

    def fresh(self, net: DevNet, path: Path) -> BlockStore:
        store = self.open_store(path)
        store.open_chain(net.genesis.to_initial_state())
        return store

    def test_commit_then_pop_restores_every_key(
        self, net: DevNet, history: History, tmp_path: Path
    ) -> None:
        """Popping committed blocks in reverse order leaves every key as it was."""
        store = self.fresh(net, tmp_path / "db")
        dumps = [_dump(store)]
        for k, (block, state) in enumerate(history):
            store.commit_block(block, block.encode(), state, _changes(k), {}, _hash(k))
            assert store.head_id() == block.id
            dumps.append(_dump(store))
        assert dumps[1] != dumps[0]
        for block, _ in reversed(history):
            dumps.pop()
            store.pop_block(block)
            assert _dump(store) == dumps[-1]

    def test_advance_lib_prunes_undo_and_fixes_blocks(
        self, net: DevNet, history: History, tmp_path: Path
    ) -> None:
        """Undo records up to the new LIB go, so those blocks can no longer be popped."""
        store = self.fresh(net, tmp_path / "db")
        for k, (block, state) in enumerate(history):
            store.commit_block(block, block.encode(), state, _changes(k), {}, _hash(k))
        store.advance_lib(0, 2)
        undo = sorted(int.from_bytes(k[1:], "big") for k in _dump(store) if k[:1] == schema.UNDO)
        assert undo == [3, 4]
        assert store.lib_num() == 2
        assert store.header_state(history[0][0].id) is None
        assert store.header_state(history[1][0].id) == history[1][1], "the LIB keeps its state"
        store.pop_block(history[3][0])
        store.pop_block(history[2][0])
        with pytest.raises(StoreError, match="irreversible"):
            store.pop_block(history[1][0])

    def test_evidence_round_trip(self, net: DevNet, history: History, tmp_path: Path) -> None:
        """Evidence stored is read back whole, also after a reopen."""
        store = self.fresh(net, tmp_path / "db")
        assert store.evidence() == []
        first, second = history[0][0], history[1][0]
        store.put_evidence(first, second)
        assert {b.encode() for b in store.evidence()} == {first.encode(), second.encode()}
        store.close()
        again = self.open_store(tmp_path / "db")
        assert {b.id for b in again.evidence()} == {first.id, second.id}
        again.close()

    def test_reopen_after_close_keeps_the_head(
        self, net: DevNet, history: History, tmp_path: Path
    ) -> None:
        """A closed and reopened store has the same head, LIB, blocks and reversible blocks."""
        store = self.fresh(net, tmp_path / "db")
        for k, (block, state) in enumerate(history):
            store.commit_block(block, block.encode(), state, _changes(k), {}, _hash(k))
        store.advance_lib(0, 1)
        before = _dump(store)
        store.close()
        again = self.open_store(tmp_path / "db")
        again.open_chain(net.genesis.to_initial_state())  # the same chain: nothing is written
        assert _dump(again) == before
        assert again.head_id() == history[-1][0].id
        assert again.lib_num() == 1
        root, applied = again.reversible_blocks()
        assert root == history[0][1]
        assert applied == [(state, block) for block, state in history[1:]]
        again.close()

    def test_chain_id_mismatch_is_refused(self, net: DevNet, tmp_path: Path) -> None:
        """A store that holds one chain refuses to open as another, and stays as it was."""
        store = self.fresh(net, tmp_path / "db")
        before = _dump(store)
        other = DevNet.create(1)
        with pytest.raises(StoreError, match="holds chain"):
            store.open_chain(other.genesis.to_initial_state())
        assert _dump(store) == before
        store.close()
        with pytest.raises(StoreError, match="holds chain"):
            other.open(tmp_path / "db")

    def test_second_open_of_one_directory_is_refused(self, net: DevNet, tmp_path: Path) -> None:
        """LevelDB's lock comes out as our StoreInUse (naming the holder when it is another
        process), not as a foreign exception."""
        store = self.fresh(net, tmp_path / "db")
        with pytest.raises(StoreInUse, match="is in use by"):
            self.open_store(tmp_path / "db")
        store.close()


class TestLevelDBBlockStore(BlockStoreContract):
    """The block store contract on a real LevelDB (plyvel) in a temporary directory."""

    def open_store(self, path: Path) -> BlockStore:
        return BlockStore(str(path))

    def test_a_store_with_one_entry_per_transaction_id_is_refused(
        self, net: DevNet, tmp_path: Path
    ) -> None:
        """A data dir from before the per-block id lists (it holds an old per-id expiry entry)
        is refused with what to do, rather than run on with a state its blocks do not hash."""
        self.fresh(net, tmp_path / "db").close()
        db = plyvel.DB(str(tmp_path / "db"))
        db.put(schema.OLD_TX_EXPIRY + bytes(36), b"")
        db.close()
        store = self.open_store(tmp_path / "db")
        with pytest.raises(StoreError, match="one state entry per transaction id"):
            store.open_chain(net.genesis.to_initial_state())
        store.close()

    def test_the_old_by_id_dedup_entries_are_deleted_when_opened(
        self, net: DevNet, tmp_path: Path
    ) -> None:
        """A data dir from before the transaction index served as the de-duplication set's
        lookup still holds ``TX_SEEN`` entries: opening the chain deletes them (5,000 of them,
        more than one batch) and nothing else."""
        self.fresh(net, tmp_path / "db").close()
        db = plyvel.DB(str(tmp_path / "db"))
        before = dict(db.iterator())
        for n in range(5000):
            db.put(schema.TX_SEEN + n.to_bytes(32, "big"), b"\x00\x00\x00\x01")
        db.close()
        store = self.open_store(tmp_path / "db")
        store.open_chain(net.genesis.to_initial_state())
        assert _dump(store) == before
        store.close()

    def test_popping_a_block_of_the_old_layout_brings_back_no_by_id_entry(
        self, net: DevNet, history: History, tmp_path: Path
    ) -> None:
        """An undo record written before the transaction index was the de-duplication set's
        lookup may hold TX_SEEN entries: popping its block restores everything else and
        no TX_SEEN entry."""
        store = self.fresh(net, tmp_path / "db")
        before = _dump(store)
        block, state = history[0]
        store.commit_block(block, block.encode(), state, _changes(0), {}, _hash(0))
        undo_key = schema.undo_key(block.num)
        undo, old_hash = unpack(store.get(undo_key) or b"", "undo record")
        old_layout = pack([[*undo, [schema.TX_SEEN + bytes(32), b"\x00\x00\x00\x09"]], old_hash])
        store.close()
        db = plyvel.DB(str(tmp_path / "db"))
        db.put(undo_key, old_layout)
        db.close()
        store = self.open_store(tmp_path / "db")
        store.pop_block(block)
        assert _dump(store) == before
        store.close()


def test_tables_are_written_uncompressed_and_compressed_ones_stay_readable(
    tmp_path: Path,
) -> None:
    """A store's tables are written without compression (highly compressible values take
    their full size on disk), and a store whose tables an older BoR wrote with Snappy reads
    back the same values."""
    old = plyvel.DB(str(tmp_path / "old"), create_if_missing=True, compression="snappy")
    values = {b"k%05d" % i: bytes(1000) for i in range(2000)}  # 2 MB of zeros
    for key, value in values.items():
        old.put(key, value)
    old.compact_range()  # into tables, compressed
    old.close()
    store = BlockStore(str(tmp_path / "old"))
    try:
        assert all(store.get(key) == value for key, value in values.items())
        for i in range(2000):
            store._db.put(b"n%05d" % i, bytes(1000))
        store._db.compact_range()
    finally:
        store.close()
    tables = sum(p.stat().st_size for p in (tmp_path / "old").glob("*.ldb"))
    assert tables > 2000 * 1000 * 0.9, "the new zeros (2 MB) are stored as they are"
