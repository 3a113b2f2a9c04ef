"""A snapshot holds exactly the LIB's state (also while reversible blocks sit above it), an
imported one gives a chain that goes on like the original, and every kind of damage is
refused with a reason that names it."""

from __future__ import annotations

import io
from pathlib import Path

import plyvel
import pytest

from chain.abi import parse_abi
from chain.controller import Chain
from chain.core.execution.actions import Call, SetCode, Transfer
from chain.core.execution.state_hash import StateHash
from chain.core.primitives import schema
from chain.core.primitives.errors import DuplicateTransaction, NotFound, SnapshotError
from chain.core.primitives.types import AccountName
from chain.storage import snapshot
from chain.storage.snapshot import (
    HEAD_PREFIX,
    MAGIC,
    SnapshotHead,
    head_size,
    read_head,
    read_snapshot,
    write_snapshot,
)
from chain.storage.store import BlockStore
from chain.testing import now_ms, state_dump
from genesis.testing import DevNet
from tests.node.api import kv_contract

A, B = AccountName("alice"), AccountName("bob")


@pytest.fixture
def net() -> DevNet:
    return DevNet.create(3, blocks_per_turn=1)


def _grown(net: DevNet, path: Path, blocks: int = 8) -> Chain:
    """A chain with transfers in every block, its LIB a few blocks below its head."""
    chain = net.open(path)
    for k in range(blocks):
        chain.admit_transaction(net.tx(chain, Transfer(A, B, k + 1)), now_ms())
        net.produce(chain)
    assert 1 <= chain.lib < chain.head.num
    return chain


def _snapshot_bytes(chain: Chain) -> tuple[SnapshotHead, bytes]:
    head, entries = chain.store.lib_state(chain.chain_id)
    out = io.BytesIO()
    write_snapshot(out, head, entries)
    return head, out.getvalue()


def _imported(chain: Chain, path: Path) -> tuple[SnapshotHead, BlockStore]:
    """A snapshot of ``chain``'s LIB imported into an empty store at ``path``."""
    head, data = _snapshot_bytes(chain)
    store = BlockStore(str(path))
    _, chunks = read_snapshot(io.BytesIO(data))
    store.import_snapshot(head, chunks)
    return head, store


def _read_all(data: bytes) -> tuple[SnapshotHead, dict[bytes, bytes]]:
    head, chunks = read_snapshot(io.BytesIO(data))
    return head, {k: v for chunk in chunks for k, v in chunk}


def test_the_snapshot_is_the_lib_state_not_the_head_state(net: DevNet, tmp_path: Path) -> None:
    """With reversible blocks above the LIB, the snapshot holds the state of a chain that
    stopped at the LIB, and its hash is the LIB header's state root."""
    chain = _grown(net, tmp_path / "a")
    head, data = _snapshot_bytes(chain)
    assert head.num == chain.lib
    twin = net.open(tmp_path / "b")  # replays the blocks up to the LIB only
    for num in range(1, chain.lib + 1):
        twin.push_block(chain.block_by_num(num), now_ms())
    read_head, state = _read_all(data)
    assert state == {k: v for k, v in state_dump(twin).items() if schema.committed(k)}
    assert any(k.startswith(schema.TX_BLOCK) for k in state), "the dedup set is in it"
    assert read_head.block.id == twin.head.id
    assert StateHash.of(state.items()).root() == twin.head.state_root


def test_a_chain_imported_from_a_snapshot_goes_on_like_the_original(
    net: DevNet, tmp_path: Path
) -> None:
    """Imported into an empty store, the snapshot opens as a chain at the LIB that applies
    the original's later blocks to the same state, restarts, and refuses older blocks with a
    reason."""
    chain = _grown(net, tmp_path / "a")
    head, store = _imported(chain, tmp_path / "b")
    imported = Chain(store, net.genesis.to_initial_state())
    assert (imported.head.id, imported.lib, imported.view().first_block) == (
        head.block.id,
        head.num,
        head.num,
    )
    for num in range(head.num + 1, chain.head.num + 1):
        imported.push_block(chain.block_by_num(num), now_ms())
    assert imported.head.id == chain.head.id
    assert state_dump(imported) == state_dump(chain)
    store.close()
    again = Chain(BlockStore(str(tmp_path / "b")), net.genesis.to_initial_state())
    assert again.head.id == chain.head.id
    with pytest.raises(Exception, match="started from a snapshot at block"):
        again.block_by_num(head.num - 1)
    again.store.close()


def test_a_chain_imported_from_a_snapshot_refuses_a_transaction_applied_before_it(
    net: DevNet, tmp_path: Path
) -> None:
    """The de-duplication set comes with the snapshot: a transaction of the snapshot's block
    or of one before it, pushed again, is refused as a duplicate, and asking for one of a
    block before the snapshot's names the snapshot."""
    chain = _grown(net, tmp_path / "a")
    head, store = _imported(chain, tmp_path / "b")
    imported = Chain(store, net.genesis.to_initial_state())
    assert head.num >= 2
    for num in (head.num - 1, head.num):
        with pytest.raises(DuplicateTransaction):
            imported.admit_transaction(chain.block_by_num(num).transactions[0], now_ms())
    earlier = chain.block_by_num(head.num - 1).transactions[0]
    with pytest.raises(NotFound, match="started from a snapshot at block"):
        imported.transaction(earlier.id)
    store.close()


def test_a_store_imported_by_an_older_bor_keeps_its_dedup_set_when_reopened(
    net: DevNet, tmp_path: Path
) -> None:
    """A snapshot-started store of the old layout (the ids of the snapshot's blocks kept as
    TX_SEEN entries, none in the transaction index) is moved onto the index when it opens: a
    transaction applied before the snapshot is still refused, and no TX_SEEN entry is left."""
    chain = _grown(net, tmp_path / "a")
    head, store = _imported(chain, tmp_path / "b")
    lists = list(store.iterate(schema.TX_BLOCK, schema.prefix_end(schema.TX_BLOCK)))
    store.close()
    db = plyvel.DB(str(tmp_path / "b"))
    for _, value in lists:  # as the older import left it
        for at in range(0, len(value), schema.TX_BLOCK_ITEM):
            tx_id = value[at + 4 : at + schema.TX_BLOCK_ITEM]
            db.delete(schema.TX_INDEX + tx_id)
            db.put(schema.TX_SEEN + tx_id, value[at : at + 4])
    db.close()
    reopened = Chain(BlockStore(str(tmp_path / "b")), net.genesis.to_initial_state())
    applied = chain.block_by_num(head.num - 1).transactions[0]
    with pytest.raises(DuplicateTransaction):
        reopened.admit_transaction(applied, now_ms())
    seen_end = schema.prefix_end(schema.TX_SEEN)
    assert not list(reopened.store.iterate(schema.TX_SEEN, seen_end))
    reopened.store.close()


def _flip_in_bobs_balance(data: bytes) -> bytes:
    """One bit changed inside bob's account record (a bin value: the framing stays intact)."""
    key = schema.account_key(B)
    at = data.index(key) + len(key) + 5  # past the value's bin header, into the record
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda d: d[: len(d) // 2], "truncated"),
        (lambda d: d[:-1], "truncated"),
        (lambda d: b"not a snapshot at all", "not a BoR snapshot"),
        (lambda d: MAGIC + (9).to_bytes(4, "big") + d[len(MAGIC) + 4 :], "format version 9"),
        (_flip_in_bobs_balance, "content hash mismatch"),
        (lambda d: d + b"\x00", "after the end"),
    ],
    ids=["half", "last-byte", "magic", "version", "flipped-byte", "trailing"],
)
def test_a_damaged_snapshot_is_refused_with_its_reason(
    net: DevNet, tmp_path: Path, damage: object, reason: str
) -> None:
    """Truncation, a foreign file, a wrong version, a changed byte and trailing bytes each
    give a SnapshotError naming the problem."""
    chain = _grown(net, tmp_path / "a")
    _, data = _snapshot_bytes(chain)
    with pytest.raises(SnapshotError, match=reason):
        _read_all(damage(data))  # type: ignore[operator]


def test_a_consistent_file_with_a_forged_entry_fails_the_state_commitment(
    net: DevNet, tmp_path: Path
) -> None:
    """A snapshot rewritten with one balance changed (its content hash made anew) does not
    match the block's state root: the content hash alone proves nothing."""
    chain = _grown(net, tmp_path / "a")
    head, entries = chain.store.lib_state(chain.chain_id)
    forged = [(k, v + b"\x00" if k == schema.account_key(B) else v) for k, v in entries]
    with pytest.raises(SnapshotError, match="does not match its commitment"):
        write_snapshot(io.BytesIO(), head, iter(forged))
    honest = StateHash.of(forged)
    out = io.BytesIO()
    # Write it as an attacker would: with the forged state's own hash in the head.
    forged_head = SnapshotHead(head.chain_id, head.block, head.header_state, honest)
    with pytest.raises(SnapshotError, match="state root"):
        write_snapshot(out, forged_head, iter(forged))


def test_an_import_cut_short_leaves_no_chain_and_the_next_import_succeeds(
    net: DevNet, tmp_path: Path
) -> None:
    """A truncated file fails the import after writing entries, but the store holds no chain
    (no chain id), and importing the whole file then gives the full state."""
    chain = _grown(net, tmp_path / "a")
    head, data = _snapshot_bytes(chain)
    store = BlockStore(str(tmp_path / "b"))
    with pytest.raises(SnapshotError, match="truncated"):
        _, chunks = read_snapshot(io.BytesIO(data[: len(data) - 100]))
        store.import_snapshot(head, chunks)
    assert store.chain_id() is None
    _, chunks = read_snapshot(io.BytesIO(data))
    store.import_snapshot(head, chunks)
    assert store.chain_id() == chain.chain_id
    assert store.state_hash() == head.state_hash
    store.close()


def test_the_head_reads_from_the_first_bytes_of_a_file_alone(net: DevNet, tmp_path: Path) -> None:
    """The first HEAD_PREFIX bytes tell how long the head is, and that many bytes give the
    head (what a download checks against the trusted block before the rest arrives); a
    start that is not a snapshot's is refused at once."""
    chain = _grown(net, tmp_path / "a")
    head, data = _snapshot_bytes(chain)
    need = head_size(data[:HEAD_PREFIX])
    assert HEAD_PREFIX < need < len(data)
    _, read = read_head(io.BytesIO(data[:need]))
    assert read.block.id == head.block.id
    with pytest.raises(SnapshotError, match="truncated"):
        read_head(io.BytesIO(data[: need - 1]))
    with pytest.raises(SnapshotError, match="format version 9"):
        head_size(MAGIC + (9).to_bytes(4, "big") + data[len(MAGIC) + 4 : HEAD_PREFIX])
    with pytest.raises(SnapshotError, match="damaged: a frame of"):
        head_size(data[: len(MAGIC) + 4] + (1 << 30).to_bytes(4, "big"))


def test_chunks_are_bounded_in_bytes_as_well_as_entries(
    net: DevNet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk closes once its keys and values reach ``CHUNK_BYTES`` (a block's id list alone
    can be 180 KiB), and the file still reads back to the whole state."""
    chain = _grown(net, tmp_path / "a")
    monkeypatch.setattr(snapshot, "CHUNK_BYTES", 200)
    head, data = _snapshot_bytes(chain)
    _, chunks = read_snapshot(io.BytesIO(data))
    held = [list(chunk) for chunk in chunks]
    assert len(held) > 1
    assert all(sum(len(k) + len(v) for k, v in chunk[:-1]) < 200 for chunk in held)
    assert StateHash.of(e for chunk in held for e in chunk) == head.state_hash


def test_contract_code_and_rows_travel_in_a_snapshot_and_run_after_import(
    net: DevNet, tmp_path: Path
) -> None:
    """A snapshot holds a contract's code, rows, index entries and storage use; the imported
    chain (its module cache cold) runs the contract on them and ends at the original's state."""
    chain = net.open(tmp_path / "a")
    kv = parse_abi(kv_contract.ABI)
    deploy = SetCode(A, kv_contract.wasm(), kv_contract.ABI)
    chain.admit_transaction(net.tx(chain, deploy), now_ms())
    net.produce(chain)
    for k in range(1, 4):
        put = kv.encode_action("put", {"id": k, "owner": "bob", "amount": 10 * k})
        chain.admit_transaction(net.tx(chain, Call(A, "put", (B,), put)), now_ms())
        net.produce(chain)
    last_put = chain.head.num
    while chain.lib < last_put:
        net.produce(chain)
    head, store = _imported(chain, tmp_path / "b")
    _, state = _read_all(_snapshot_bytes(chain)[1])
    for prefix in (schema.CODE, schema.WASM, schema.ROW, schema.IDX64, schema.RAM):
        assert any(k.startswith(prefix) for k in state), prefix
    imported = Chain(store, net.genesis.to_initial_state())
    put = kv.encode_action("put", {"id": 9, "owner": "carol", "amount": 90})
    chain.admit_transaction(net.tx(chain, Call(A, "put", (B,), put)), now_ms())
    net.produce(chain)
    for num in range(head.num + 1, chain.head.num + 1):
        imported.push_block(chain.block_by_num(num), now_ms())
    assert imported.head.state_root == chain.head.state_root
    assert imported.traces(chain.head.num) == chain.traces(chain.head.num) != []
    assert state_dump(imported) == state_dump(chain)
    imported.store.close()
