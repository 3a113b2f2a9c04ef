"""The runtime's fast path against real wasmtime: pooled instance slots give every action the
module's initial state and come back after every action, memory read by host functions
follows memory.grow, and read-only calls cannot take the chain thread's slot."""

from __future__ import annotations

import threading

import pytest

from chain.core.execution.contracts import ContractCall
from chain.core.execution.state import StateView
from chain.core.primitives.errors import ContractError, ResourceExceeded
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName
from chain.testing import MemoryKV
from chain.vm import ContractRuntime
from chain.vm import runtime as runtime_module
from chain.vm.engine import MAX_MEMORY_PAGES, POOL_INSTANCES
from tests.chain.vm.wat import contract, deploy, run


@pytest.fixture(scope="module")
def runtime() -> ContractRuntime:
    return ContractRuntime()


def fresh(runtime: ContractRuntime, code: bytes, account: str = "pool") -> StateView:
    view = StateView(MemoryKV())
    deploy(view, runtime, account, code)
    return view


# Prints its data segment's first byte, then changes everything an instance owns: that byte,
# a mutable global, the memory's size. A reused slot that kept any of it would show.
DIRTY = contract(
    """
    (call $prints_l (i32.const 0) (i32.const 1))
    (if (i32.ne (global.get $g) (i32.const 7))
      (then (call $eosio_assert (i32.const 0) (i32.const 16) (i32.const 6))))
    (if (i32.ne (memory.size) (i32.const 1))
      (then (call $eosio_assert (i32.const 0) (i32.const 32) (i32.const 5))))
    (i32.store8 (i32.const 0) (i32.const 66))
    (global.set $g (i32.const 8))
    (drop (memory.grow (i32.const 3)))
    """,
    data='(data (i32.const 0) "A") (data (i32.const 16) "global") (data (i32.const 32) "grown")'
    " (global $g (mut i32) (i32.const 7))",
)


def test_every_action_starts_from_the_modules_initial_state(runtime: ContractRuntime) -> None:
    """Actions that reuse a pooled slot see the module's data, globals and memory size, never
    what the previous action left there."""
    view = fresh(runtime, DIRTY)
    for _ in range(5):
        trace = run(runtime, view, "pool")
        assert trace.actions[0].console == "A"


def test_failed_actions_give_their_slot_back(runtime: ContractRuntime) -> None:
    """More trapping actions than the pool has slots, then a good one: a slot is returned
    whether the action ends well or not."""
    view = fresh(runtime, contract("unreachable"), "trap")
    fresh_view = fresh(runtime, DIRTY)
    for _ in range(POOL_INSTANCES + 4):
        with pytest.raises(ContractError, match="trap::go: unreachable"):
            run(runtime, view, "trap")
    assert run(runtime, fresh_view, "pool").actions[0].console == "A"


def test_inline_chain_longer_than_the_pool(runtime: ContractRuntime) -> None:
    """Each action's slot is released before its inline actions run, so a chain of inline
    actions needs one slot at a time (checked with a depth limit past the pool's size)."""
    # Sends itself the same action, inline, until the depth limit stops it.
    code = contract(
        """
        (i64.store (i32.const 0) (local.get $receiver))
        (i64.store (i32.const 8) (local.get $action))
        (i32.store8 (i32.const 16) (i32.const 1))
        (i64.store (i32.const 17) (local.get $receiver))
        (i64.store (i32.const 25) (i64.const 3617214756542218240))
        (i32.store8 (i32.const 33) (i32.const 0))
        (call $send_inline (i32.const 0) (i32.const 34))
        """
    )
    view = fresh(runtime, code, "loop")
    depth = POOL_INSTANCES + 8
    params = ChainParams(max_inline_depth=depth)
    with pytest.raises(ResourceExceeded, match=f"inline depth {depth + 1} past"):
        run(runtime, view, "loop", auth=("loop",), params=params, fuel=10**9)


def test_host_reads_follow_memory_grow(runtime: ContractRuntime) -> None:
    """A host function reads memory that memory.grow added during the action, and an access
    past the grown memory still aborts."""
    code = contract(
        """
        (drop (memory.grow (i32.const 1)))
        (i32.store8 (i32.const 70000) (i32.const 90))
        (call $prints_l (i32.const 70000) (i32.const 1))
        (call $prints_l (i32.const 131071) (i32.const 2))
        """
    )
    view = fresh(runtime, code, "grow")
    with pytest.raises(ContractError, match=r"out of bounds memory access \(2 bytes at 131071\)"):
        run(runtime, view, "grow")
    ok = contract(
        """
        (drop (memory.grow (i32.const 1)))
        (i32.store8 (i32.const 70000) (i32.const 90))
        (call $prints_l (i32.const 70000) (i32.const 1))
        """
    )
    assert run(runtime, fresh(runtime, ok, "grow"), "grow").actions[0].console == "Z"


def test_memory_limit_past_the_pools_slot_is_refused(runtime: ContractRuntime) -> None:
    """A chain whose max_memory_pages is past what a pool slot holds gets an error naming
    both, on every node alike, rather than a smaller limit than it asked for."""
    view = fresh(runtime, DIRTY)
    params = ChainParams(max_memory_pages=MAX_MEMORY_PAGES + 1)
    with pytest.raises(ContractError, match=f"max_memory_pages {MAX_MEMORY_PAGES + 1}"):
        run(runtime, view, "pool", params=params)


def test_readonly_calls_never_take_the_last_slot(
    runtime: ContractRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every read-only slot in use, one more read-only call is refused at once while
    a transaction's action still runs."""
    slots = threading.BoundedSemaphore(1)
    monkeypatch.setattr(runtime_module, "_READONLY_SLOTS", slots)
    view = fresh(runtime, DIRTY)
    call = ContractCall(AccountName("pool"), "go", (AccountName("alice"),), b"")
    assert slots.acquire(blocking=False)
    try:
        with pytest.raises(ResourceExceeded, match="every read-only slot is busy"):
            runtime.run_readonly(
                view, call, params=ChainParams(), block_time_s=0, block_num=1, fuel_left=10**6
            )
        assert run(runtime, view, "pool").actions[0].console == "A"
    finally:
        slots.release()
    trace = runtime.run_readonly(
        view, call, params=ChainParams(), block_time_s=0, block_num=1, fuel_left=10**6
    )
    assert trace.actions[0].console == "A"
