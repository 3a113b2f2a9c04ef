"""The state commitment is a function of the set of entries alone, updated incrementally to
exactly what a full recomputation gives, and every block header commits to the whole state."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chain.controller import Chain
from chain.core.execution import state_hash
from chain.core.execution.actions import Transfer
from chain.core.execution.state_hash import _BATCH, STATE_HASH_BYTES, StateHash
from chain.core.primitives import schema
from chain.core.primitives.errors import EncodingError
from chain.core.primitives.types import AccountName
from chain.testing import now_ms, state_dump
from genesis.testing import DevNet

entries = st.dictionaries(st.binary(min_size=1, max_size=12), st.binary(max_size=20), max_size=30)
few_keys = st.dictionaries(st.sampled_from([b"a", b"b", b"c", b"d"]), st.binary(max_size=3))


@given(entries)
def test_the_hash_ignores_order(state: dict[bytes, bytes]) -> None:
    """The same entries in any order hash the same."""
    items = list(state.items())
    assert StateHash.of(items) == StateHash.of(reversed(items))


@given(entries, entries, entries)
def test_an_update_equals_the_hash_recomputed(
    before: dict[bytes, bytes], written: dict[bytes, bytes], deleted: dict[bytes, bytes]
) -> None:
    """Removing replaced entries and adding new ones gives the hash of the new state."""
    after = dict(before)
    after.update(written)
    for key in deleted:
        after.pop(key, None)
    removed = [(k, v) for k, v in before.items() if after.get(k) != v]
    added = [(k, v) for k, v in after.items() if before.get(k) != v]
    updated = StateHash.of(before.items()).updated(removed, added)
    assert updated == StateHash.of(after.items())
    assert updated.root() == StateHash.of(after.items()).root()


@given(st.lists(few_keys, min_size=2, max_size=8))
def test_successive_updates_of_the_same_keys_stay_exact(states: list[dict[bytes, bytes]]) -> None:
    """Block after block over a few keys, each incremental hash equals the one computed from
    scratch."""
    current = StateHash.of(states[0].items())
    for before, after in itertools.pairwise(states):
        removed = [(k, v) for k, v in before.items() if after.get(k) != v]
        added = [(k, v) for k, v in after.items() if before.get(k) != v]
        current = current.updated(removed, added)
        assert current == StateHash.of(after.items())


prefixed = st.dictionaries(
    st.tuples(
        st.sampled_from([b"a", b"b", b"s", b"z"]),
        st.one_of(st.binary(max_size=2), st.binary(min_size=254, max_size=258)),
    ).map(lambda t: t[0] + t[1]),
    st.binary(max_size=3),
    max_size=12,
)


@given(st.lists(prefixed, min_size=2, max_size=6))
def test_moving_block_after_block_equals_the_hash_recomputed(
    states: list[dict[bytes, bytes]],
) -> None:
    """``moved`` over sorted changes (writes, deletions, rewrites of the same value; keys of
    up to 258 bytes) gives the hash of the new state
    computed from scratch, block after block."""
    current = StateHash.of(states[0].items())
    for before, after in itertools.pairwise(states):
        keys = sorted(before.keys() | after.keys())
        changes = [(k, after.get(k)) for k in keys]
        current = current.moved(changes, {k: before.get(k) for k in keys})
        assert current == StateHash.of(after.items())


def test_a_block_of_more_changes_than_a_batch_of_elements_moves_exactly() -> None:
    """Changes past the elements summed at once (a few batches of rewrites, deletions and new
    keys, ending mid-batch) move the hash to exactly the new state's."""
    count = 3 * _BATCH + 5
    before = {f"k{i:04}".encode(): bytes([i % 251]) * 40 for i in range(count)}
    after = {k: v + b"!" for k, v in before.items() if k[-1] % 3}
    after |= {f"n{i:04}".encode(): b"new" for i in range(count // 2)}
    keys = sorted(before.keys() | after.keys())
    moved = StateHash.of(before.items()).moved(
        [(k, after.get(k)) for k in keys], {k: before.get(k) for k in keys}
    )
    assert moved == StateHash.of(after.items())


def test_the_memo_serves_a_rewritten_keys_old_element_and_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An element put in by one block is taken from the memo when the next block rewrites its
    key (the result still exact), and the memo never holds more than its bound."""
    monkeypatch.setattr(state_hash, "_MEMO", 10)
    memo = state_hash._scratch.memo
    memo.clear()
    first = {f"k{i:02}".encode(): b"v1" for i in range(4)}
    moved = StateHash.empty().moved(sorted(first.items()), dict.fromkeys(first))
    assert set(memo) == {bytes([len(k), 0, 0, 0][::-1]) + k + b"v1" for k in first}
    second = {k: b"v2" for k in first}
    moved = moved.moved(sorted(second.items()), first)
    assert moved == StateHash.of(second.items())
    assert all(entry.endswith(b"v2") for entry in memo)  # the v1 elements were taken out
    many = {f"n{i:02}".encode(): b"x" for i in range(25)}
    moved = moved.moved(sorted(many.items()), dict.fromkeys(many))
    assert moved == StateHash.of((second | many).items())
    assert len(memo) == 10


def test_entries_that_differ_by_a_moved_boundary_hash_differently() -> None:
    """(key, value) pairs are hashed with the key's length: ab|c is not a|bc."""
    assert StateHash.of([(b"ab", b"c")]) != StateHash.of([(b"a", b"bc")])


def test_bytes_round_trip_and_a_wrong_length_is_refused() -> None:
    """The lanes survive to_bytes/from_bytes; a buffer of another length is an EncodingError."""
    h = StateHash.of([(b"k", b"v"), (b"k2", b"v2")])
    assert StateHash.from_bytes(h.to_bytes()) == h
    assert len(h.to_bytes()) == STATE_HASH_BYTES
    with pytest.raises(EncodingError, match="state hash"):
        StateHash.from_bytes(h.to_bytes()[:-1])


def test_every_header_commits_to_the_whole_state_also_after_a_pop(tmp_path: Path) -> None:
    """After blocks with transfers, and after popping one, the head's state root is the hash
    of every state entry in the store."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    for amount in (3, 4, 5):
        chain.admit_transaction(
            net.tx(chain, Transfer(AccountName("alice"), AccountName("bob"), amount)), now_ms()
        )
        net.produce(chain)
        assert chain.head.state_root == _commitment(chain)
    top = chain.block_by_num(chain.head.num)
    chain.store.pop_block(top)
    parent = chain.store.header_state(top.header.previous)
    assert parent is not None
    assert chain.store.state_hash().root() == parent.state_root
    assert parent.state_root == _commitment(chain)


def _commitment(chain: Chain) -> bytes:
    """The state root of every committed entry in ``chain``'s store, computed afresh."""
    return StateHash.of((k, v) for k, v in state_dump(chain).items() if schema.committed(k)).root()


def test_the_dedup_set_is_one_committed_list_per_block_indexed_by_the_tx_index(
    tmp_path: Path,
) -> None:
    """After a block of two transfers the state holds one committed TX_BLOCK list and no entry
    per id, and ``indexed_ids`` of it gives exactly the transaction index entries the block
    wrote (what a snapshot's import writes for it)."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    for amount in (1, 2):
        chain.admit_transaction(
            net.tx(chain, Transfer(AccountName("alice"), AccountName("bob"), amount)), now_ms()
        )
    net.produce(chain)
    dump = state_dump(chain)
    lists = [(k, v) for k, v in dump.items() if k.startswith(schema.TX_BLOCK)]
    assert len(lists) == 1 and all(schema.committed(k) for k in dump)
    assert not any(k.startswith(schema.TX_SEEN) for k in dump)
    block = chain.block_by_num(chain.head.num)
    assert len(block.transactions) == 2
    index = {schema.tx_index_key(t.id): schema.be(block.num, 8) for t in block.transactions}
    assert dict(schema.indexed_ids(*lists[0])) == index
    assert all(chain.store.get(k) == v for k, v in index.items())
