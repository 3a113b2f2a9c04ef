"""The store's filter of transaction ids holds every id of every ``TX_BLOCK`` entry in the
store, through writes, deletions, rebuilds past its size and reopening; its compiled bit
tests are the reference's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chain.core.execution import engine
from chain.core.primitives import schema
from chain.core.primitives.errors import StoreError
from chain.core.primitives.types import TxId
from chain.storage import txfilter
from chain.storage.store import BlockStore
from chain.storage.txfilter import TxFilter

pytestmark = pytest.mark.skipif(not engine.available(), reason="the compiled core is not built")

IDS = st.binary(min_size=32, max_size=32)


def adder() -> txfilter.Adder:
    add = engine.filter_adder()
    assert add is not None
    return add


@settings(max_examples=200, deadline=None)
@given(st.lists(IDS, max_size=40), st.lists(IDS, max_size=40), st.integers(1, 5000))
def test_compiled_bits_are_the_references(held: list[bytes], others: list[bytes], n: int) -> None:
    """Every id added is held (by the compiled test and the reference); for any id both
    say the same."""
    from chain.core.execution import _fastcore

    f = TxFilter(n, adder())
    f.add_entry(schema.tx_block_value([(7, i) for i in held]))
    assert f.held == len(held)
    for tx_id in held:
        assert f.may_hold(tx_id) and _fastcore.filter_may_hold(f.bits, f.mask, tx_id)
    for tx_id in others:
        assert f.may_hold(tx_id) == _fastcore.filter_may_hold(f.bits, f.mask, tx_id)
    positions = {p for i in held for p in txfilter.positions(i, f.mask)}
    set_bits = {p for p in range(f.mask + 1) if f.bits[p >> 3] & (1 << (p & 7))}
    assert set_bits == positions, "the adder sets exactly the reference's positions"


def test_a_value_that_is_not_whole_items_adds_its_whole_items() -> None:
    f = TxFilter(10, adder())
    one = os.urandom(32)
    f.add_entry(schema.tx_block_value([(1, one)]) + b"\x01\x02")
    assert f.may_hold(one) and f.held == 1


def _lists(store: BlockStore) -> list[bytes]:
    entries = store.iterate(schema.TX_BLOCK, schema.prefix_end(schema.TX_BLOCK))
    return [tx_id for _, v in entries for tx_id in _ids(v)]


def _ids(value: bytes) -> list[bytes]:
    item = schema.TX_BLOCK_ITEM
    return [value[at + 4 : at + item] for at in range(0, len(value) - item + 1, item)]


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 30), st.lists(IDS, min_size=1, max_size=20)),
        st.tuples(st.just("delete"), st.integers(0, 30), st.just([])),
        st.tuples(st.just("reopen"), st.just(0), st.just([])),
    ),
    max_size=25,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_the_store_holds_every_listed_id(
    ops: list[tuple[str, int, list[bytes]]],
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Id lists written, overwritten (an undo restores one so) and deleted, the store
    reopened, the filter rebuilt past a small size: each id listed in the store is held."""
    monkeypatch.setattr(txfilter, "LEAST_CAPACITY", 16)  # rebuilds every few writes
    path = tmp_path_factory.mktemp("store") / "db"
    store = BlockStore(str(path), sync=False)
    try:
        for op, at, ids in ops:
            key = schema.tx_block_key(1000 + at, at)
            if op == "put":
                store._write([(key, schema.tx_block_value([(1000 + at, i) for i in ids]))], [])
            elif op == "delete":
                store._write([], [key])
            else:
                store.close()
                store = BlockStore(str(path), sync=False)
            held = store.tx_filter
            assert held is not None
            assert all(held.may_hold(i) for i in _lists(store))
            assert held.held <= held.capacity, "rebuilt once past its size"
    finally:
        store.close()


def test_without_the_compiled_core_the_store_keeps_no_filter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the compiled pass asks the filter: a store without it builds none."""
    monkeypatch.setattr(engine, "filter_adder", lambda: None)
    store = BlockStore(str(tmp_path / "db"), sync=False)
    try:
        assert store.tx_filter is None
        store._write([(schema.tx_block_key(1, 1), schema.tx_block_value([(1, bytes(32))]))], [])
    finally:
        store.close()


def test_after_a_repair_the_filter_holds_the_index_too(tmp_path: Path) -> None:
    """A repaired store may hold index entries a pop had deleted, which the reference's
    lookup finds: the filter built after a repair holds every indexed id."""
    store = BlockStore(str(tmp_path / "db"), sync=False)
    try:
        orphan = os.urandom(32)
        store._write([(schema.tx_index_key(TxId(orphan)), (9).to_bytes(8, "big"))], [])
        plain, repaired = store._built_tx_filter(), store._built_tx_filter(index_too=True)
        assert plain is not None and repaired is not None
        assert repaired.may_hold(orphan) and repaired.held == 1 and plain.held == 0
    finally:
        store.close()


def test_a_failed_rebuild_keeps_the_filter_and_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch is written before the rebuild: if the rebuild fails, the write stands and
    the old filter, still a superset, stays."""
    monkeypatch.setattr(txfilter, "LEAST_CAPACITY", 1)
    store = BlockStore(str(tmp_path / "db"), sync=False)
    try:
        held = store.tx_filter
        ids = [os.urandom(32) for _ in range(5)]

        def broken(index_too: bool = False) -> TxFilter:
            raise StoreError("iteration failed: test")

        monkeypatch.setattr(store, "_built_tx_filter", broken)
        key = schema.tx_block_key(5, 5)
        store._write([(key, schema.tx_block_value([(5, i) for i in ids]))], [])
        assert store.get(key) is not None and store.tx_filter is held
        assert held is not None and all(held.may_hold(i) for i in ids)
    finally:
        store.close()
