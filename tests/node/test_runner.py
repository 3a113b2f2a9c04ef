"""The chain thread: its two lanes (urgent calls overtake queued normal ones) and the
updates it delivers to subscribers."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from chain.controller import Chain
from chain.core.consensus.block import SignedBlock
from chain.core.execution.actions import Transfer
from chain.core.primitives.types import AccountName
from chain.events import BlockStep, ChainEvents, ChainUpdate
from chain.testing import now_ms
from genesis.testing import DevNet
from node.runner import ChainRunner, InclusionWatch
from tests.support.wait import SLOWDOWN, settle


def test_urgent_calls_overtake_queued_normal_calls(tmp_path: Path) -> None:
    """An urgent call queued behind normal calls runs next, as soon as the current call ends."""
    chain = DevNet.create().open(tmp_path / "chain")
    runner = ChainRunner(chain)
    order: list[str] = []
    entered, gate = threading.Event(), threading.Event()

    def job(_: Chain, name: str) -> str:
        if name == "running":
            entered.set()
            gate.wait(5)
        order.append(name)
        return name

    async def main() -> None:
        running = asyncio.create_task(runner.call(job, "running"))
        assert await asyncio.to_thread(entered.wait, 5 * SLOWDOWN), "the first call began"
        normal = [asyncio.create_task(runner.call(job, f"normal{i}")) for i in range(2)]
        await settle()  # both queued
        urgent = asyncio.create_task(runner.call_urgent(job, "urgent"))
        await settle()
        gate.set()
        assert await asyncio.gather(running, *normal, urgent) == [
            "running",
            "normal0",
            "normal1",
            "urgent",
        ]

    try:
        asyncio.run(main())
    finally:
        runner.close()
    assert order == ["running", "urgent", "normal0", "normal1"]


def test_a_call_gets_the_chain_on_its_thread_and_nothing_else_does(tmp_path: Path) -> None:
    """``call(fn, *args)`` runs ``fn(chain, *args)`` on the chain thread; the runner offers
    the event loop no other way to its chain."""
    chain = DevNet.create().open(tmp_path / "chain")
    runner = ChainRunner(chain)

    def where(given: Chain, offset: int) -> tuple[bool, str, int]:
        return given is chain, threading.current_thread().name, given.head.num + offset

    try:
        assert asyncio.run(runner.call(where, 5)) == (True, "chain", 5)
        assert asyncio.run(runner.call_urgent(where, 1)) == (True, "chain", 1)
    finally:
        runner.close()
    assert not [name for name in dir(runner) if not name.startswith("_") and "chain" in name]


def test_an_exception_reaches_the_caller(tmp_path: Path) -> None:
    """An exception raised by a call on the chain thread is raised to the awaiting caller."""
    chain = DevNet.create().open(tmp_path / "chain")
    runner = ChainRunner(chain)

    def fail(_: Chain) -> None:
        raise ValueError("boom")

    try:
        with pytest.raises(ValueError, match="boom"):
            asyncio.run(runner.call(fail))
    finally:
        runner.close()


def test_every_update_reaches_subscribers_in_order_before_the_caller_resumes(
    tmp_path: Path,
) -> None:
    """Calls run back to back each reach every subscriber as one ChainUpdate, in order, none
    skipped or merged, and before the caller's await returns."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path / "chain")
    runner = ChainRunner(chain)
    first: list[ChainUpdate] = []
    second: list[ChainUpdate] = []
    runner.subscribe(first.append)
    runner.subscribe(second.append)

    async def main() -> list[SignedBlock]:
        calls = [runner.call(net.produce) for _ in range(6)]
        blocks = await asyncio.gather(*calls)
        head = runner.view.head.num
        assert [u.view.head.num for u in first] == list(range(1, head + 1))
        seen = len(first)
        await runner.call(net.produce)
        assert len(first) == seen + 1, "the update arrived before the await returned"
        await runner.call(lambda c: c.head)  # changes nothing: no update
        assert len(first) == seen + 1
        return [*blocks, first[-1].events.applied[0]]

    try:
        blocks = asyncio.run(main())
    finally:
        runner.close()
    assert second == first
    assert [u.events.produced for u in first] == blocks
    assert [u.events.applied for u in first] == [[b] for b in blocks]
    libs = [0, *(u.view.lib_num for u in first)]
    assert [u.previous_lib for u in first] == libs[:-1], "each update says where the LIB was"
    assert any(u.lib_advanced for u in first)


def test_a_failing_subscriber_does_not_starve_the_others(tmp_path: Path) -> None:
    """A subscriber that raises is logged; the subscribers after it still get the update."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path / "chain")
    runner = ChainRunner(chain)
    seen: list[ChainUpdate] = []

    def broken(update: ChainUpdate) -> None:
        raise RuntimeError("a subscriber's bug")

    runner.subscribe(broken)
    runner.subscribe(seen.append)
    try:
        block = asyncio.run(runner.call(net.produce))
    finally:
        runner.close()
    assert [u.events.produced for u in seen] == [block]


def test_inclusion_waits_for_a_block_that_stays_on_our_chain(tmp_path: Path) -> None:
    """A transaction's waiters resolve with the number of the block that holds it, but not
    for a block applied and popped again within the same update."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path / "chain")
    tx = net.tx(chain, Transfer(AccountName("alice"), AccountName("bob"), 1))
    chain.admit_transaction(tx, now_ms())
    block = net.produce(chain)
    view = chain.view()
    chain.store.close()
    watch = InclusionWatch()

    async def main() -> None:
        waiter = watch.watch(tx.id)
        undone = ChainEvents((BlockStep(block), BlockStep(block, undo=True)))
        watch.chain_updated(ChainUpdate(view, undone, view.lib_num))
        assert not waiter.done()
        watch.chain_updated(ChainUpdate(view, ChainEvents((BlockStep(block),)), view.lib_num))
        assert waiter.done() and waiter.result() == block.num

    asyncio.run(main())
