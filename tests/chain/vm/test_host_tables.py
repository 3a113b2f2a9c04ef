"""The table API of Antelope's multi_index: upper bounds, reverse iteration and every
secondary key type, through the host functions as a contract calls them."""

from __future__ import annotations

import math
import struct

import pytest

from chain.core.execution.contracts import name_to_u64
from chain.core.execution.state import StateView
from chain.core.primitives.errors import ContractError
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName
from chain.testing import MemoryKV
from chain.vm import ContractRuntime
from chain.vm.host_tables import double_key, double_value
from chain.vm.tables import IDX64, IDX128, IDX256, IDX_DOUBLE, IndexKind, Tables
from tests.chain.vm.wat import contract, deploy, run

DB = name_to_u64("db")


@pytest.fixture(scope="module")
def runtime() -> ContractRuntime:
    return ContractRuntime()


def tables(view: StateView) -> Tables:
    return Tables(
        view, DB, AccountName("db"), frozenset(), ChainParams(), readonly=False, where="db::go"
    )


def test_primary_upperbound_and_previous_walk_rows_both_ways() -> None:
    """upperbound is the first key past the bound; previous from the end walks down to the
    first row and then answers -1, as Antelope's db_previous_i64 does."""
    t = tables(StateView(MemoryKV()))
    for primary in (5, 3, 9):
        t.store(1, 2, DB, primary, b"row")
    assert t.get(t.upperbound(DB, 1, 2, 3)) == b"row"
    itr = t.upperbound(DB, 1, 2, 3)
    assert t.next(itr)[1] == 9
    assert t.upperbound(DB, 1, 2, 9) == t.end(DB, 1, 2)
    assert t.upperbound(DB, 1, 2, 2**64 - 1) == t.end(DB, 1, 2)
    walked = []
    itr = t.end(DB, 1, 2)
    while True:
        itr, primary = t.previous(itr)
        if itr < 0:
            break
        walked.append(primary)
    assert walked == [9, 5, 3]
    assert t.previous(t.end(DB, 7, 7)) == (-1, 0)  # an empty table has nothing before its end
    with pytest.raises(ContractError, match="db_previous_i64: invalid iterator -99"):
        t.previous(-99)


def test_previous_sees_rows_written_in_this_view_over_committed_ones() -> None:
    """Reverse iteration merges the committed state with the view's writes and deletions."""
    base = StateView(MemoryKV())
    t = tables(base)
    for primary in (1, 2, 3):
        t.store(1, 2, DB, primary, b"r")
    committed = MemoryKV(
        {k: v for k, v in base.written().items() if v is not None}  # the block is applied
    )
    child = StateView(committed).child()
    t2 = tables(child)
    t2.remove(t2.find(DB, 1, 2, 3))
    t2.store(1, 2, DB, 4, b"r")
    itr, primary = t2.previous(t2.end(DB, 1, 2))
    assert primary == 4
    itr, primary = t2.previous(itr)
    assert primary == 2  # 3 was deleted in the child


KEYS: list[tuple[IndexKind, list[bytes]]] = [
    (IDX64, [(v).to_bytes(8, "big") for v in (50, 20, 50, 7)]),
    (IDX128, [(v).to_bytes(16, "big") for v in (2**100, 5, 2**100, 2**64)]),
    (IDX256, [bytes([b]) * 32 for b in (9, 1, 9, 4)]),
    (IDX_DOUBLE, [double_key(v) for v in (2.5, -1e300, 2.5, -0.5)]),
]


@pytest.mark.parametrize(("kind", "keys"), KEYS, ids=[k.name for k, _ in KEYS])
def test_every_secondary_kind_orders_and_walks_as_antelope(
    kind: IndexKind, keys: list[bytes]
) -> None:
    """For each key type: entries walk in (secondary, primary) order both ways, bounds are
    lower (>=) and upper (>), find_primary gives the key, and an iterator of one kind is
    refused by another's functions."""
    t = tables(StateView(MemoryKV()))
    for primary, key in enumerate(keys, start=1):
        t.idx_store(kind, 1, 3, DB, primary, key)
    order = sorted((key, primary) for primary, key in enumerate(keys, start=1))
    forward = []
    itr, key, primary = t.idx_lowerbound(kind, DB, 1, 3, b"\0" * kind.size)
    while itr >= 0:
        forward.append((key, primary))
        itr, primary = t.idx_next(kind, itr)
        key = t.idx_find_primary(kind, DB, 1, 3, primary)[1] if itr >= 0 else b""
    assert forward == order
    backward = []
    itr = t.idx_end(kind, DB, 1, 3)
    while (found := t.idx_previous(kind, itr))[0] >= 0:
        itr = found[0]
        backward.append(found[1])
    assert backward == [p for _, p in reversed(order)]
    low = order[1][0]
    assert t.idx_lowerbound(kind, DB, 1, 3, low)[1:] == order[1]
    upper = t.idx_upperbound(kind, DB, 1, 3, low)
    assert upper[1] > low and upper[1:] == next(e for e in order if e[0] > low)
    assert t.idx_find_secondary(kind, DB, 1, 3, keys[0])[1] == 1
    other = IDX128 if kind is not IDX128 else IDX64
    with pytest.raises(ContractError, match=f"is of a {kind.name} index"):
        t.idx_next(other, upper[0])


def test_double_keys_order_as_numbers() -> None:
    """A double's key bytes sort as the numbers do, -0.0 is 0.0, and they read back."""
    values = [-math.inf, -1e300, -2.5, -1e-300, 0.0, 1e-300, 2.5, 1e300, math.inf]
    keys = [double_key(v) for v in values]
    assert keys == sorted(keys)
    assert double_key(-0.0) == double_key(0.0)
    assert [double_value(k) for k in keys] == values


def _wat_store(fn: str, primary: int, key_ptr: int, extra: str = "") -> str:
    return (
        f"(drop (call ${fn} (i64.const 1) (i64.const 3) (local.get $receiver)"
        f" (i64.const {primary}) (i32.const {key_ptr}){extra}))"
    )


def test_keys_cross_the_boundary_as_antelope_passes_them(runtime: ContractRuntime) -> None:
    """idx128 keys are little-endian u128s, idx256 keys two u128 words (high word first)
    with their count, idx_double keys f64s; lowerbound writes the found key back."""
    hi, lo = 0x0102030405060708090A0B0C0D0E0F10, 0x1112131415161718191A1B1C1D1E1F20
    words = hi.to_bytes(16, "little") + lo.to_bytes(16, "little")
    data = (
        words + (2**70).to_bytes(16, "little") + struct.pack("<d", -3.5) + b"\0" * 32
    )  # at 300: idx256 key (32), idx128 key (16), double (8), then a zeroed key (32) at 356
    hexed = "".join(f"\\{b:02x}" for b in data)
    code = contract(
        _wat_store("db_idx256_store", 1, 300, " (i32.const 2)")
        + _wat_store("db_idx128_store", 1, 332)
        + _wat_store("db_idx_double_store", 1, 348)
        + """
        (drop (call $db_idx256_lowerbound (local.get $receiver) (i64.const 1) (i64.const 3)
            (i32.const 356) (i32.const 2) (i32.const 400)))
        (drop (call $db_idx128_lowerbound (local.get $receiver) (i64.const 1) (i64.const 3)
            (i32.const 408) (i32.const 424)))
        (f64.store (i32.const 432) (f64.const -1e308))
        (drop (call $db_idx_double_lowerbound (local.get $receiver) (i64.const 1)
            (i64.const 3) (i32.const 432) (i32.const 440)))
        (call $set_action_return_value (i32.const 356) (i32.const 92))
        """,
        data=f'(data (i32.const 300) "{hexed}")',
    )
    view = StateView(MemoryKV())
    deploy(view, runtime, "db", code)
    out = run(runtime, view, "db").actions[0].return_value
    assert out[:32] == words and out[44:52] == (1).to_bytes(8, "little")
    assert out[52:68] == (2**70).to_bytes(16, "little")
    assert struct.unpack("<d", out[76:84])[0] == -3.5 and out[84:92] == (1).to_bytes(8, "little")
    key = bytes.fromhex(f"{hi:032x}{lo:032x}")  # the checksum's bytes, ordered as bytes
    t = tables(view)
    assert t.idx_find_primary(IDX256, DB, 1, 3, 1)[1] == key


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (_wat_store("db_idx256_store", 1, 300, " (i32.const 3)"), "2 u128 words, not 3"),
        (
            "(f64.store (i32.const 300) (f64.const nan))"
            + _wat_store("db_idx_double_store", 1, 300),
            "NaN is not an allowed secondary key",
        ),
        (_wat_store("db_idx128_store", 1, 65530), "out of bounds memory access"),
        (
            "(drop (call $db_idx64_next (i32.const 7) (i32.const 0)))",
            "no index entry at iterator 7",
        ),
        (
            "(drop (call $db_idx128_previous (i32.const -40) (i32.const 0)))",
            "db_idx128_previous: invalid iterator -40",
        ),
        (
            "(drop (call $db_previous_i64 (i32.const 3) (i32.const 0)))",
            "db_previous_i64: no row at iterator 3",
        ),
        (
            "(drop (call $db_idx256_find_primary (local.get $receiver) (i64.const 1)"
            " (i64.const 3) (i32.const 0) (i32.const 1) (i64.const 1)))",
            "2 u128 words, not 1",
        ),
    ],
    ids=["idx256-count", "nan", "bad-pointer", "bad-iterator", "bad-end", "bad-row", "find-count"],
)
def test_hostile_calls_abort_the_action(runtime: ContractRuntime, body: str, error: str) -> None:
    """A wrong key count, a NaN, a pointer past memory or an iterator that is no live one
    aborts the action with the reason, the same on every node."""
    view = StateView(MemoryKV())
    deploy(view, runtime, "db", contract(body))
    with pytest.raises(ContractError, match=error):
        run(runtime, view, "db")
