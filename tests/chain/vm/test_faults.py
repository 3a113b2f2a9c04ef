"""What an action costs and how it fails, against real wasmtime: the fixed fuel of an action,
trace output priced and capped per transaction, every out-of-fuel path an ``OutOfFuel``, and
instantiation failures split between the contract's (a verdict) and the node's (a fault)."""

from __future__ import annotations

import pytest
import wasmtime

from chain.core.execution.contracts import ContractCall, TxTrace, name_to_u64
from chain.core.execution.state import StateView
from chain.core.primitives import schema
from chain.core.primitives.encoding import pack
from chain.core.primitives.errors import ContractError, OutOfFuel, ResourceExceeded
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName
from chain.testing import MemoryKV
from chain.vm import ContractRuntime
from chain.vm.errors import RuntimeFault
from chain.vm.host import HOST_CALL_FUEL, MAX_TRACE_BYTES, OUTPUT_BYTE_FUEL
from chain.vm.runtime import ACTION_FUEL
from chain.vm.validate import code_hash
from tests.chain.vm.wat import ACTIVE, contract, deploy, le, run


@pytest.fixture(scope="module")
def runtime() -> ContractRuntime:
    return ContractRuntime()


def fresh(runtime: ContractRuntime, code: bytes, account: str = "faulty") -> StateView:
    view = StateView(MemoryKV())
    deploy(view, runtime, account, code)
    return view


def planted(code: bytes, account: str = "faulty") -> StateView:
    """A state holding ``code`` as if setcode had accepted it (to run what it now refuses)."""
    view = StateView(MemoryKV())
    view.put_raw(schema.code_key(account), pack([code_hash(code), ""]))
    view.put_raw(schema.wasm_key(account), code)
    return view


APPLY = '(func (export "apply") (param i64 i64 i64))'
DATA_PAST_MEMORY = bytes(
    wasmtime.wat2wasm(f'(module (memory (export "memory") 1) (data (i32.const 70000) "x") {APPLY})')
)
ELEM_PAST_TABLE = bytes(
    wasmtime.wat2wasm(
        f'(module (memory (export "memory") 1) (table 1 funcref) (elem (i32.const 5) $f)'
        f" (func $f) {APPLY})"
    )
)


# --- instantiation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "trap"),
    [
        (DATA_PAST_MEMORY, "out of bounds memory access"),
        (ELEM_PAST_TABLE, "undefined table element"),
    ],
    ids=["data", "elem"],
)
def test_setcode_refuses_segments_that_do_not_fit(
    runtime: ContractRuntime, code: bytes, trap: str
) -> None:
    """A data segment past the memory or an element segment past the table traps when the
    module is instantiated: validate finds it at setcode and refuses, naming the trap."""
    with pytest.raises(ContractError, match=f"cannot be instantiated .*: {trap}$"):
        runtime.validate(code, ChainParams())


def test_setcode_refuses_a_table_past_the_runtimes_limit(runtime: ContractRuntime) -> None:
    """A table larger than an instance slot holds is refused as a ContractError, not as
    wasmtime's own exception."""
    code = bytes(
        wasmtime.wat2wasm(f'(module (memory (export "memory") 1) (table 20000 funcref) {APPLY})')
    )
    with pytest.raises(ContractError, match=r"does not fit the runtime: .*20000"):
        runtime.validate(code, ChainParams())


def test_a_trap_while_instantiating_is_the_contracts_error(runtime: ContractRuntime) -> None:
    """A stored module whose instantiation traps fails its action with a ContractError naming
    the trap (the same on every node), not with the memory limit."""
    with pytest.raises(ContractError, match=r"^faulty::go: instantiation: out of bounds memory"):
        run(runtime, planted(DATA_PAST_MEMORY), "faulty")


def test_a_failure_to_instantiate_that_is_no_trap_is_a_node_fault(
    runtime: ContractRuntime,
) -> None:
    """When wasmtime refuses an instance for a reason that is no trap (here a store whose
    memory limit is below the module's minimum), the action raises RuntimeFault, which is no
    ChainError: nothing may take it for a verdict on the transaction."""
    view = fresh(runtime, contract("", pages=2))
    with pytest.raises(RuntimeFault, match="faulty::go: could not instantiate") as info:
        run(runtime, view, "faulty", params=ChainParams(max_memory_pages=1))
    assert not isinstance(info.value, ContractError | ResourceExceeded)


# --- the fixed cost of an action -------------------------------------------------------------


def test_an_empty_action_costs_action_fuel(runtime: ContractRuntime) -> None:
    """An action that does nothing still pays ACTION_FUEL for its store and instance."""
    trace = run(runtime, fresh(runtime, contract("")), "faulty")
    assert ACTION_FUEL <= trace.fuel < ACTION_FUEL + 100


def test_too_little_fuel_for_an_action_is_out_of_fuel(runtime: ContractRuntime) -> None:
    """With less fuel than ACTION_FUEL left, the action is refused before its store is made,
    with the named out-of-fuel error."""
    view = fresh(runtime, contract(""))
    with pytest.raises(OutOfFuel, match=r"^faulty::go: out of fuel \(max_tx_fuel 20000000\)$"):
        run(runtime, view, "faulty", fuel=ACTION_FUEL - 1)


def test_inline_actions_pay_action_fuel_too(runtime: ContractRuntime) -> None:
    """An inline action is charged ACTION_FUEL like any other: with fuel for the sender only,
    the inline action runs out, by name."""
    sink, me = le(name_to_u64("sink")), le(name_to_u64("relay"))
    relay = contract(
        "(call $send_inline (i32.const 0) (i32.const 34))",
        data=f'(data (i32.const 0) "{sink}{le(name_to_u64("take"))}\\01{me}{ACTIVE}\\00")',
    )
    view = fresh(runtime, relay, "relay")
    deploy(view, runtime, "sink", contract(""))
    full = run(runtime, view, "relay", fuel=10**6)
    assert [a.fuel >= ACTION_FUEL for a in full.actions] == [True, True]
    sender = full.actions[0].fuel
    with pytest.raises(OutOfFuel, match=r"^sink::take: out of fuel"):
        run(runtime, view, "relay", fuel=sender + ACTION_FUEL - 1)
    assert run(runtime, view, "relay", fuel=full.fuel + 100) == full


# --- trace output ------------------------------------------------------------------------------


def printing(n: int) -> bytes:
    return contract(f"(call $prints_l (i32.const 0) (i32.const {n}))")


def test_trace_output_costs_output_fuel_per_byte(runtime: ContractRuntime) -> None:
    """Console bytes cost OUTPUT_BYTE_FUEL each, ten times a byte moved: printing 1,000 bytes
    costs exactly 100,000 fuel more than printing none."""
    none = run(runtime, fresh(runtime, printing(0)), "faulty").fuel
    some = run(runtime, fresh(runtime, printing(1000)), "faulty").fuel
    assert some - none == 1000 * OUTPUT_BYTE_FUEL


def test_events_and_return_values_cost_output_fuel(runtime: ContractRuntime) -> None:
    """An event's data and a return value are priced as trace output too: 500 bytes of
    either cost exactly 500 * OUTPUT_BYTE_FUEL more than none."""
    for call in (
        "(call $emit_event (local.get $action) (i32.const 0) (i32.const {}))",
        "(call $set_action_return_value (i32.const 0) (i32.const {}))",
    ):
        none = run(runtime, fresh(runtime, contract(call.format(0))), "faulty").fuel
        some = run(runtime, fresh(runtime, contract(call.format(500))), "faulty").fuel
        assert some - none == 500 * OUTPUT_BYTE_FUEL


def events(count: int) -> bytes:
    """Emits ``count`` events of 4 KiB each."""
    return contract(
        f"""
        (local $i i32)
        (loop $l
          (call $emit_event (local.get $action) (i32.const 0) (i32.const 4096))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $l (i32.lt_u (local.get $i) (i32.const {count}))))
        """
    )


def test_trace_output_is_capped_per_transaction(runtime: ContractRuntime) -> None:
    """Events within an action's own limits but past MAX_TRACE_BYTES in all are refused,
    naming the cap."""
    assert MAX_TRACE_BYTES < 17 * 4096
    with pytest.raises(ResourceExceeded, match=f"trace output of .* past {MAX_TRACE_BYTES} per"):
        run(runtime, fresh(runtime, events(17)), "faulty")


def test_the_trace_cap_counts_every_call_of_the_transaction(runtime: ContractRuntime) -> None:
    """A second call of the same transaction (the same TxTrace) counts the first one's
    output: each fits alone, both together do not."""
    view = fresh(runtime, events(10))
    call = ContractCall(AccountName("faulty"), "go", (AccountName("alice"),), b"")
    trace = TxTrace()
    kwargs = {"params": ChainParams(), "block_time_s": 0, "block_num": 1, "fuel_left": 10**8}
    runtime.run(view, call, trace, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ResourceExceeded, match="trace output of 69632 bytes"):
        runtime.run(view, call, trace, **kwargs)  # type: ignore[arg-type]


def test_console_is_cut_at_the_transactions_room(runtime: ContractRuntime) -> None:
    """Console is cut, not refused, where the transaction's output cap leaves no room."""
    view = fresh(
        runtime,
        contract(
            """
        (local $i i32)
        (loop $l
          (call $emit_event (local.get $action) (i32.const 0) (i32.const 4096))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $l (i32.lt_u (local.get $i) (i32.const 15))))
        (call $emit_event (local.get $action) (i32.const 0) (i32.const 3000))
        (call $prints_l (i32.const 0) (i32.const 4000))
        """
        ),
    )
    trace = run(runtime, view, "faulty")
    assert len(trace.actions[0].console) == MAX_TRACE_BYTES - 15 * 4096 - 3000


# --- out of fuel, every way ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "fuel"),
    [
        ("(loop $l (br $l))", 10**6),  # wasm instructions
        ("(loop $l (drop (call $action_data_size)) (br $l))", 10**6),  # host calls
        ("", ACTION_FUEL - 1),  # the action's own cost
        ("(call $prints_l (i32.const 0) (i32.const 0))", ACTION_FUEL + HOST_CALL_FUEL - 1),
    ],
)
def test_every_way_to_run_out_of_fuel_is_out_of_fuel(
    runtime: ContractRuntime, body: str, fuel: int
) -> None:
    """Wasm code, a host call's charge and the action's fixed cost all raise OutOfFuel (a
    ResourceExceeded), the one error the transition may blame on a full block."""
    with pytest.raises(OutOfFuel, match="out of fuel"):
        run(runtime, fresh(runtime, contract(body)), "faulty", fuel=fuel)
