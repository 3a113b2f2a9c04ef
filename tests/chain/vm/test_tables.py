"""Contract tables and the other host functions: Antelope's iterators, idx64, RAM billing,
who may write where, read-only calls."""

from __future__ import annotations

import hashlib
import struct

import pytest

from chain.core.execution import ram
from chain.core.execution.contracts import ContractCall, TxTrace, name_to_u64
from chain.core.execution.state import Account, StateView
from chain.core.primitives import schema
from chain.core.primitives.errors import ContractError
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName, PublicKey
from chain.testing import MemoryKV
from chain.vm import ContractRuntime
from tests.chain.vm.wat import contract, deploy, le, run


@pytest.fixture(scope="module")
def runtime() -> ContractRuntime:
    return ContractRuntime()


def store(primary: int, size: int = 4, payer: str = "$receiver") -> str:
    payer_expr = (
        "(local.get $receiver)" if payer == "$receiver" else f"(i64.const {name_to_u64(payer)})"
    )
    return (
        f"(drop (call $db_store_i64 (i64.const 1) (i64.const 2) {payer_expr}"
        f" (i64.const {primary}) (i32.const 200) (i32.const {size})))"
    )


def test_rows_iterate_in_primary_order(runtime: ContractRuntime) -> None:
    """lowerbound, next and end walk a table's rows in numeric order, Antelope's way."""
    code = contract(
        store(5)
        + store(3)
        + store(9)
        + """
        (i32.store (i32.const 0)
          (call $db_lowerbound_i64 (local.get $receiver) (i64.const 1) (i64.const 2) (i64.const 4)))
        (i32.store (i32.const 4) (call $db_next_i64 (i32.load (i32.const 0)) (i32.const 8)))
        (i32.store (i32.const 16) (call $db_next_i64 (i32.load (i32.const 4)) (i32.const 100)))
        (i32.store (i32.const 20)
          (call $db_end_i64 (local.get $receiver) (i64.const 1) (i64.const 2)))
        (i32.store (i32.const 24)
          (call $db_find_i64 (local.get $receiver) (i64.const 1) (i64.const 2) (i64.const 4)))
        (i32.store (i32.const 28)
          (call $db_get_i64
            (call $db_find_i64 (local.get $receiver) (i64.const 1) (i64.const 2) (i64.const 3))
            (i32.const 32) (i32.const 2)))
        (call $set_action_return_value (i32.const 0) (i32.const 34))
        """,
        data='(data (i32.const 200) "row!")',
    )
    view = StateView(MemoryKV())
    deploy(view, runtime, "db", code)
    out = run(runtime, view, "db").actions[0].return_value
    lb, nxt, primary, after, end, missing, size = struct.unpack("<iiQiiii", out[:32])
    assert lb >= 0 and nxt >= 0 and primary == 9
    assert after == end == missing < -1
    assert (size, out[32:34]) == (4, b"ro")
    key = schema.row_key(name_to_u64("db"), 1, 2, 5)
    assert view.raw(key) == name_to_u64("db").to_bytes(8, "big") + b"row!"
    assert ram.used(view, "db") == 3 * ram.row_bytes(key, b"\0" * 12)


def test_remove_and_update_rebill_the_payer(runtime: ContractRuntime) -> None:
    """update bills the new size and remove refunds the row: usage ends where it began."""
    code = contract(
        store(1, payer="alice")
        + """
        (call $db_update_i64
          (call $db_find_i64 (local.get $receiver) (i64.const 1) (i64.const 2) (i64.const 1))
          (i64.const 0) (i32.const 200) (i32.const 40))
        """,
    )
    remove = contract(
        """(call $db_remove_i64
             (call $db_find_i64 (local.get $receiver) (i64.const 1) (i64.const 2) (i64.const 1)))"""
    )
    view = StateView(MemoryKV())
    deploy(view, runtime, "db", code)
    run(runtime, view, "db")
    key = schema.row_key(name_to_u64("db"), 1, 2, 1)
    assert ram.used(view, "alice") == ram.row_bytes(key, b"\0" * 48)
    deploy(view, runtime, "db", remove)
    run(runtime, view, "db")
    assert view.raw(key) is None and ram.used(view, "alice") == 0


def test_payer_must_authorize(runtime: ContractRuntime) -> None:
    """A row cannot be billed to an account that did not authorize the action."""
    code = contract(store(1, payer="bob"))
    view = StateView(MemoryKV())
    deploy(view, runtime, "db", code)
    with pytest.raises(ContractError, match="payer bob is neither the contract nor an authorizer"):
        run(runtime, view, "db")


def test_other_contracts_tables_are_readable_not_writable(runtime: ContractRuntime) -> None:
    """A contract reads another's row, and may not remove it."""
    view = StateView(MemoryKV())
    deploy(view, runtime, "owner", contract(store(1), data='(data (i32.const 200) "mine")'))
    run(runtime, view, "owner")
    owner = name_to_u64("owner")
    read = f"""(call $db_find_i64 (i64.const {owner}) (i64.const 1) (i64.const 2) (i64.const 1))"""
    deploy(
        view,
        runtime,
        "reader",
        contract(
            f"""(drop (call $db_get_i64 {read} (i32.const 0) (i32.const 4)))
            (call $set_action_return_value (i32.const 0) (i32.const 4))"""
        ),
    )
    assert run(runtime, view, "reader").actions[0].return_value == b"mine"
    deploy(view, runtime, "reader", contract(f"(call $db_remove_i64 {read})"))
    with pytest.raises(ContractError, match="db_remove_i64: the table belongs to another contract"):
        run(runtime, view, "reader")


def test_end_iterator_cannot_be_read(runtime: ContractRuntime) -> None:
    """db_get of an end iterator aborts rather than reading anything."""
    code = contract(
        """(drop (call $db_get_i64
             (call $db_end_i64 (local.get $receiver) (i64.const 1) (i64.const 2))
             (i32.const 0) (i32.const 4)))"""
    )
    view = StateView(MemoryKV())
    deploy(view, runtime, "db", code)
    with pytest.raises(ContractError, match="db_get_i64: end iterator"):
        run(runtime, view, "db")


def test_idx64_finds_rows_by_secondary(runtime: ContractRuntime) -> None:
    """idx64 entries are found by secondary, walked in (secondary, primary) order, updated
    and removed, each billed to its payer."""
    idx = """(drop (call $db_idx64_store (i64.const 1) (i64.const 3) (local.get $receiver)
                 (i64.const {p}) (i32.const {s})))"""
    code = contract(
        # secondaries at 300: 50, 20, 50 for primaries 1, 2, 3
        idx.format(p=1, s=300)
        + idx.format(p=2, s=308)
        + idx.format(p=3, s=316)
        + """
        (i64.store (i32.const 400) (i64.const 21))
        (i32.store (i32.const 0) (call $db_idx64_lowerbound (local.get $receiver) (i64.const 1)
            (i64.const 3) (i32.const 400) (i32.const 8)))
        (i64.store (i32.const 16) (i64.load (i32.const 400)))
        (i32.store (i32.const 24) (call $db_idx64_next (i32.load (i32.const 0)) (i32.const 32)))
        (i32.store (i32.const 40) (call $db_idx64_find_secondary (local.get $receiver)
            (i64.const 1) (i64.const 3) (i32.const 308) (i32.const 48)))
        (call $db_idx64_update (call $db_idx64_find_primary (local.get $receiver) (i64.const 1)
            (i64.const 3) (i32.const 56) (i64.const 3)) (i64.const 0) (i32.const 324))
        (call $db_idx64_remove (i32.load (i32.const 40)))
        (call $set_action_return_value (i32.const 0) (i32.const 64))
        """,
        data=f'(data (i32.const 300) "{le(50)}{le(20)}{le(50)}{le(7)}")',
    )
    view = StateView(MemoryKV())
    deploy(view, runtime, "db", code)
    out = run(runtime, view, "db").actions[0].return_value
    lb, _, p1, s1, nxt, _, p2, fs, _, pfs, sfp = struct.unpack("<iiQQiiQiiQQ", out)
    assert lb >= 0 and (s1, p1) == (50, 1)  # first secondary >= 21
    assert nxt >= 0 and p2 == 3  # then (50, 3)
    assert fs >= 0 and pfs == 2 and sfp == 50  # secondary 20 is row 2; row 3's was 50
    db = name_to_u64("db")
    entries = [(k[-16:], v) for k, v in view.written().items() if k.startswith(schema.IDX64) and v]
    assert sorted(int.from_bytes(k[:8], "big") for k, _ in entries) == [7, 50]  # 3 moved, 2 gone
    assert view.raw(schema.idx64_primary_key(db, 1, 3, 3)) == (7).to_bytes(8, "big")
    assert ram.used(view, "db") == 2 * ram.IDX64_ENTRY_BYTES


def test_host_reads_of_the_block_and_accounts(runtime: ContractRuntime) -> None:
    """current_time, get_block_num, current_receiver, is_account, has_auth and sha256
    give what the chain says."""
    alice, bob = name_to_u64("alice"), name_to_u64("bob")
    code = contract(
        f"""
        (i64.store (i32.const 0) (call $current_time))
        (i32.store (i32.const 8) (call $get_block_num))
        (i64.store (i32.const 12) (call $current_receiver))
        (i32.store (i32.const 20) (call $is_account (i64.const {alice})))
        (i32.store (i32.const 24) (call $is_account (i64.const {bob})))
        (i32.store (i32.const 28) (call $has_auth (i64.const {alice})))
        (i32.store (i32.const 32) (call $has_auth (i64.const {bob})))
        (call $sha256 (i32.const 200) (i32.const 3) (i32.const 36))
        (call $set_action_return_value (i32.const 0) (i32.const 68))
        """,
        data='(data (i32.const 200) "abc")',
    )
    view = StateView(MemoryKV())
    view.put_account(Account(AccountName("alice"), PublicKey(b"\x02" + b"\x01" * 32)))
    deploy(view, runtime, "db", code)
    out = run(runtime, view, "db").actions[0].return_value
    assert struct.unpack("<qiQiiii", out[:36]) == (
        1_700_000_000_000_000,
        42,
        name_to_u64("db"),
        1,
        0,
        1,
        0,
    )
    assert out[36:] == hashlib.sha256(b"abc").digest()


def test_readonly_call_refuses_writes_and_keeps_events(runtime: ContractRuntime) -> None:
    """A read-only call may emit events into its result but not write a row."""
    view = StateView(MemoryKV())
    deploy(
        view,
        runtime,
        "db",
        contract(
            "(call $emit_event (i64.const 1234) (i32.const 0) (i32.const 0))"
            "(call $emit_event (local.get $action) (i32.const 200) (i32.const 2))",
            data='(data (i32.const 200) "ok")',
        ),
    )

    def call() -> TxTrace:
        return runtime.run_readonly(
            view,
            ContractCall(AccountName("db"), "go", (), b""),
            params=ChainParams(),
            block_time_s=1,
            block_num=1,
            fuel_left=1_000_000,
        )

    with pytest.raises(ContractError, match="is not a name"):
        call()
    deploy(
        view,
        runtime,
        "db",
        contract(
            "(call $emit_event (local.get $action) (i32.const 200) (i32.const 2))" + store(1),
            data='(data (i32.const 200) "ok")',
        ),
    )
    with pytest.raises(ContractError, match="db_store_i64 is not allowed in a read-only call"):
        call()
    deploy(
        view,
        runtime,
        "db",
        contract(
            "(call $emit_event (local.get $action) (i32.const 200) (i32.const 2))",
            data='(data (i32.const 200) "ok")',
        ),
    )
    before = dict(view.written())
    trace = call()
    assert trace.actions[0].events == [("go", b"ok")]
    assert view.written() == before
