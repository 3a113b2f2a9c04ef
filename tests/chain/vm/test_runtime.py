"""The contract runtime against real wasmtime: limits, errors that name where, determinism,
and the issue's hostile contracts."""

from __future__ import annotations

import struct

import pytest
import wasmtime

from chain.core.execution.contracts import ContractHost, name_to_u64
from chain.core.execution.state import StateView
from chain.core.primitives import schema
from chain.core.primitives.errors import ContractError, ResourceExceeded
from chain.core.primitives.params import ChainParams
from chain.testing import MemoryKV
from chain.vm import ContractRuntime
from chain.vm.cache import ModuleCache
from tests.chain.vm.wat import ACTIVE, contract, deploy, le, run


@pytest.fixture(scope="module")
def runtime() -> ContractRuntime:
    return ContractRuntime()


def fresh(runtime: ContractRuntime, code: bytes, account: str = "hostile") -> StateView:
    view = StateView(MemoryKV())
    deploy(view, runtime, account, code)
    return view


def test_runtime_is_the_cores_contract_host() -> None:
    """ContractRuntime implements the core's ContractHost protocol (checked by mypy too)."""
    host: ContractHost = ContractRuntime()
    assert callable(host.run) and callable(host.validate)


# --- validation at setcode -------------------------------------------------------------------


def test_unknown_import_is_refused_by_name(runtime: ContractRuntime) -> None:
    """A module importing a host function we do not provide is refused, naming it."""
    code = bytes(
        wasmtime.wat2wasm(
            '(module (import "env" "db_store_i256" (func (param i32)))'
            ' (memory (export "memory") 1) (func (export "apply") (param i64 i64 i64)))'
        )
    )
    with pytest.raises(ContractError, match=r"import env\.db_store_i256: no such host function"):
        runtime.validate(code, ChainParams())


def test_wrong_import_signature_is_refused(runtime: ContractRuntime) -> None:
    """An allowed import with another signature than ours is refused, showing both."""
    code = bytes(
        wasmtime.wat2wasm(
            '(module (import "env" "prints_l" (func (param i64)))'
            ' (memory (export "memory") 1) (func (export "apply") (param i64 i64 i64)))'
        )
    )
    with pytest.raises(ContractError, match=r"env\.prints_l: signature \(i64\)"):
        runtime.validate(code, ChainParams())


def test_module_over_the_size_limit_is_refused(runtime: ContractRuntime) -> None:
    """A module larger than max_code_bytes is refused before it is compiled."""
    code = contract("", data=f'(data (i32.const 0) "{"x" * 2000}")')
    with pytest.raises(ContractError, match="max_code_bytes"):
        runtime.validate(code, ChainParams(max_code_bytes=1000))


@pytest.mark.parametrize(
    ("wat", "reason"),
    [
        ('(module (memory (export "memory") 1))', "export a function apply"),
        ('(module (memory 1) (func (export "apply") (param i64 i64 i64)))', "export its memory"),
        (
            '(module (memory (export "memory") 33) (func (export "apply") (param i64 i64 i64)))',
            "past max_memory_pages 32",
        ),
        (
            '(module (memory (export "memory") 1) (func $s) (start $s)'
            ' (func (export "apply") (param i64 i64 i64)))',
            "start function",
        ),
    ],
)
def test_module_shape_is_checked(runtime: ContractRuntime, wat: str, reason: str) -> None:
    """apply and memory must be exported, memory within the cap, and no start function."""
    with pytest.raises(ContractError, match=reason):
        runtime.validate(bytes(wasmtime.wat2wasm(wat)), ChainParams())


def test_invalid_wasm_is_refused(runtime: ContractRuntime) -> None:
    """Bytes that are not a valid module are a ContractError, not a wasmtime exception."""
    with pytest.raises(ContractError, match="invalid WebAssembly module"):
        runtime.validate(b"\x00asm\x01\x00\x00\x00\xff", ChainParams())


# --- a minimal action ------------------------------------------------------------------------


# Prints its action data as text.
ECHO_DATA = contract(
    """
    (drop (call $read_action_data (i32.const 0) (i32.const 100)))
    (call $prints_l (i32.const 0) (call $action_data_size))
    """
)

ECHO = contract(
    """
    (drop (call $read_action_data (i32.const 0) (i32.const 8)))
    (call $require_auth (i64.load (i32.const 0)))
    (call $prints_l (i32.const 100) (i32.const 5))
    """,
    data='(data (i32.const 100) "hello")',
)


def test_action_reads_data_checks_auth_and_prints(runtime: ContractRuntime) -> None:
    """apply gets its data, require_auth passes for an authorizer, and prints reach the trace."""
    view = fresh(runtime, ECHO, "echo")
    trace = run(runtime, view, "echo", data=name_to_u64("alice").to_bytes(8, "little"))
    assert [a.console for a in trace.actions] == ["hello"]
    assert trace.fuel == trace.actions[0].fuel > 30_000  # three host calls at least


def test_missing_authority_names_contract_action_and_account(runtime: ContractRuntime) -> None:
    """require_auth of an account that did not authorize aborts with where and who."""
    view = fresh(runtime, ECHO, "echo")
    with pytest.raises(ContractError, match=r"^echo::go: missing authority of bob$"):
        run(runtime, view, "echo", data=name_to_u64("bob").to_bytes(8, "little"))


def test_assertion_message_is_the_contracts(runtime: ContractRuntime) -> None:
    """eosio_assert(0, msg) aborts with the contract's UTF-8 message, named."""
    code = contract(
        "(call $eosio_assert (i32.const 0) (i32.const 0) (i32.const 17))",
        data='(data (i32.const 0) "overdrawn balance")',
    )
    with pytest.raises(
        ContractError, match=r"^token::transfer: assertion failed: overdrawn balance$"
    ):
        run(runtime, fresh(runtime, code, "token"), "token", "transfer")


def test_no_contract_deployed(runtime: ContractRuntime) -> None:
    """Calling an account without code is a named ContractError."""
    with pytest.raises(ContractError, match="no contract is deployed at nobody"):
        run(runtime, StateView(MemoryKV()), "nobody")


# --- hostile contracts -----------------------------------------------------------------------


def test_infinite_loop_runs_out_of_fuel(runtime: ContractRuntime) -> None:
    """An endless loop stops when its fuel is spent, naming max_tx_fuel."""
    code = contract("(loop $l (br $l))")
    with pytest.raises(
        ResourceExceeded, match=r"^loop::run: out of fuel \(max_tx_fuel 20000000\)$"
    ):
        run(runtime, fresh(runtime, code, "loop"), "loop", "run", fuel=1_000_000)


def test_host_call_loop_runs_out_of_fuel(runtime: ContractRuntime) -> None:
    """Host calls are charged too: a loop of cheap host calls also runs out, by name."""
    code = contract("(loop $l (drop (call $action_data_size)) (br $l))")
    with pytest.raises(ResourceExceeded, match="out of fuel"):
        run(runtime, fresh(runtime, code), "hostile", fuel=1_000_000)


def test_memory_grow_stops_at_the_cap(runtime: ContractRuntime) -> None:
    """memory.grow past max_memory_pages returns -1; the module sees it and carries on."""
    code = contract(
        """
        (i32.store (i32.const 0) (memory.grow (i32.const 31)))
        (i32.store (i32.const 4) (memory.grow (i32.const 1)))
        (call $set_action_return_value (i32.const 0) (i32.const 8))
        """
    )
    trace = run(runtime, fresh(runtime, code), "hostile")
    assert struct.unpack("<ii", trace.actions[0].return_value) == (1, -1)


def test_trap_at_the_memory_cap_names_the_limit(runtime: ContractRuntime) -> None:
    """A module that traps after its memory.grow failed at the cap gets the limit named."""
    code = contract(
        "(if (i32.eq (memory.grow (i32.const 100)) (i32.const -1)) (then unreachable))",
        pages=32,
    )
    with pytest.raises(
        ResourceExceeded, match=r"^hostile::go: memory limit \(max_memory_pages 32\): unreachable$"
    ):
        run(runtime, fresh(runtime, code), "hostile")


def test_unbounded_recursion_is_a_stack_overflow(runtime: ContractRuntime) -> None:
    """Recursion without end traps with a fixed message, not a crash or wasmtime's text."""
    code = contract("(call $down)", funcs="(func $down (call $down))")
    with pytest.raises(ContractError, match=r"^hostile::go: stack overflow$"):
        run(runtime, fresh(runtime, code), "hostile")


def test_table_write_flood_hits_the_ram_limit(runtime: ContractRuntime) -> None:
    """Storing rows without end fails at the payer's max_ram_bytes, naming the payer."""
    code = contract(
        """
        (local $i i64)
        (loop $l
          (drop (call $db_store_i64 (i64.const 1) (i64.const 2) (local.get $receiver)
                 (local.get $i) (i32.const 0) (i32.const 1000)))
          (local.set $i (i64.add (local.get $i) (i64.const 1)))
          (br $l))
        """
    )
    with pytest.raises(
        ResourceExceeded, match=r"^hostile::go: hostile uses \d+ bytes .* max_ram_bytes 65536$"
    ):
        run(runtime, fresh(runtime, code), "hostile", params=ChainParams(max_ram_bytes=65536))


def test_huge_return_value_is_refused(runtime: ContractRuntime) -> None:
    """A return value past 8 KiB is refused with the limit named."""
    code = contract("(call $set_action_return_value (i32.const 0) (i32.const 60000))")
    with pytest.raises(ResourceExceeded, match="return value of 60000 bytes, past 8192"):
        run(runtime, fresh(runtime, code), "hostile")


def test_huge_event_is_refused(runtime: ContractRuntime) -> None:
    """An event past 4 KiB is refused with the limit named, before its bytes are read."""
    code = contract("(call $emit_event (local.get $action) (i32.const 0) (i32.const -1))")
    with pytest.raises(ResourceExceeded, match=r"event of 4294967295 bytes, past 4096"):
        run(runtime, fresh(runtime, code), "hostile")


def test_too_many_events_are_refused(runtime: ContractRuntime) -> None:
    """At most 64 events per action."""
    code = contract(
        "(loop $l (call $emit_event (local.get $action) (i32.const 0) (i32.const 1)) (br $l))"
    )
    with pytest.raises(ResourceExceeded, match="more than 64 events"):
        run(runtime, fresh(runtime, code), "hostile")


def test_trap_halfway_leaves_nothing_in_the_parent_view(runtime: ContractRuntime) -> None:
    """Writes made before a trap stay in the dropped child view: the parent keeps nothing."""
    code = contract(
        """
        (drop (call $db_store_i64 (i64.const 1) (i64.const 2) (local.get $receiver)
               (i64.const 7) (i32.const 0) (i32.const 4)))
        unreachable
        """
    )
    parent = fresh(runtime, code)
    before = dict(parent.written())
    child = parent.child()
    with pytest.raises(ContractError, match=r"^hostile::go: unreachable$"):
        run(runtime, child, "hostile")
    assert child.raw(schema.row_key(name_to_u64("hostile"), 1, 2, 7)) is not None
    assert parent.written() == before


def test_nan_results_are_canonical(runtime: ContractRuntime) -> None:
    """Float operations producing NaN give the canonical NaN bits whatever the hardware."""
    code = contract(
        """
        (i32.store (i32.const 0)
          (i32.reinterpret_f32 (f32.div (f32.const 0) (f32.const 0))))
        (i32.store (i32.const 4)
          (i32.reinterpret_f32 (f32.add (f32.const -nan:0x200001) (f32.const 1))))
        (i64.store (i32.const 8)
          (i64.reinterpret_f64 (f64.sqrt (f64.const -1))))
        (i64.store (i32.const 16)
          (i64.reinterpret_f64 (f64.mul (f64.const nan:0x4000000000001) (f64.const 2))))
        (call $set_action_return_value (i32.const 0) (i32.const 24))
        """
    )
    trace = run(runtime, fresh(runtime, code), "hostile")
    f32a, f32b, f64a, f64b = struct.unpack("<IIQQ", trace.actions[0].return_value)
    assert (f32a, f32b) == (0x7FC00000, 0x7FC00000)
    assert (f64a, f64b) == (0x7FF8000000000000, 0x7FF8000000000000)


def inline_to_self(depth_marker: str = "") -> bytes:
    """A contract that sends itself the same action inline, forever."""
    action = le(name_to_u64("deeper"))
    me = le(name_to_u64("hostile"))
    # contract, action, 1 permission level (itself, active), 0 bytes of data
    return contract(
        "(call $send_inline (i32.const 0) (i32.const 34))",
        data=f'(data (i32.const 0) "{me}{action}\\01{me}{ACTIVE}\\00")',
    )


def test_inline_chain_past_the_depth_limit(runtime: ContractRuntime) -> None:
    """A contract calling itself inline without end stops at max_inline_depth, by name."""
    with pytest.raises(
        ResourceExceeded, match=r"^hostile::deeper: inline depth 5 past max_inline_depth 4$"
    ):
        run(runtime, fresh(runtime, inline_to_self()), "hostile")


def test_inline_actions_run_after_the_sender_in_order(runtime: ContractRuntime) -> None:
    """An inline action runs after the action that sent it returns, one level deeper."""
    sink, me = le(name_to_u64("sink")), le(name_to_u64("relay"))
    relay = contract(
        """
        (call $send_inline (i32.const 0) (i32.const 37))
        (call $prints_l (i32.const 100) (i32.const 5))
        """,
        data=f'(data (i32.const 0) "{sink}{le(name_to_u64("take"))}\\01{me}{ACTIVE}\\03abc")'
        '(data (i32.const 100) "relay")',
    )
    view = fresh(runtime, relay, "relay")
    deploy(view, runtime, "sink", ECHO_DATA)
    trace = run(runtime, view, "relay")
    assert [(a.call.contract, a.call.action, a.depth, a.console) for a in trace.actions] == [
        ("relay", "go", 0, "relay"),
        ("sink", "take", 1, "abc"),
    ]
    assert trace.actions[1].call.authorization == ("relay",)
    assert trace.fuel == sum(a.fuel for a in trace.actions)


def test_inline_action_needs_the_senders_authority(runtime: ContractRuntime) -> None:
    """An inline action may only name the sender or an authorizer of the sending action."""
    sink = le(name_to_u64("sink"))
    relay = contract(
        "(call $send_inline (i32.const 0) (i32.const 34))",
        data=f'(data (i32.const 0) "{sink}{sink}\\01{le(name_to_u64("bob"))}{ACTIVE}\\00")',
    )
    with pytest.raises(ContractError, match="send_inline: bob did not authorize relay::go"):
        run(runtime, fresh(runtime, relay, "relay"), "relay")


# --- determinism -----------------------------------------------------------------------------


WORK = contract(
    """
    (local $i i32)
    (loop $l
      (call $sha256 (i32.const 0) (i32.const 64) (i32.const 64))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 20))))
    (call $prints_l (i32.const 64) (i32.const 32))
    (call $emit_event (local.get $action) (i32.const 64) (i32.const 32))
    (call $set_action_return_value (i32.const 64) (i32.const 32))
    """
)


def test_same_call_same_fuel(runtime: ContractRuntime) -> None:
    """Running the same call twice gives the same fuel and the same trace."""
    view = fresh(runtime, WORK)
    assert run(runtime, view, "hostile") == run(runtime, view, "hostile")


def test_cold_and_warm_runtimes_give_identical_traces() -> None:
    """A new runtime compiling the module and a warm one with it cached agree exactly."""
    warm = ContractRuntime()
    view = fresh(warm, WORK)
    run(warm, view, "hostile")
    cold = ContractRuntime(ModuleCache())
    assert run(cold, view, "hostile") == run(warm, view, "hostile")
