"""How RPC reads share the node with writes: reads batched onto the chain thread within a
time budget, and paced behind admission."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from chain.controller import Chain
from chain.core.primitives.errors import NotFound
from genesis.testing import DevNet
from node.api import reads as reads_module
from node.api.reads import ChainReads, ReadPacer, ReadsBusy
from node.metrics import NodeMetrics
from node.runner import ChainRunner


def _with_runner(tmp_path: Path, body: Callable[[ChainRunner], Coroutine[Any, Any, None]]) -> None:
    chain = DevNet.create().open(tmp_path / "chain")
    runner = ChainRunner(chain)
    try:
        asyncio.run(body(runner))
    finally:
        runner.close()


def test_reads_run_on_the_chain_thread_in_batches_within_a_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Queued reads go to the chain thread together, a batch ending once its time budget is
    spent (on the test's clock); each caller gets its own answer, or its own error, in
    order."""
    metrics = NodeMetrics()
    threads: list[str] = []
    now = [0.0]
    clock = SimpleNamespace(perf_counter=lambda: now[0], monotonic=time.monotonic)
    monkeypatch.setattr(reads_module, "time", clock)

    def slow(n: int) -> Callable[[Chain], int]:
        def query(chain: Chain) -> int:
            threads.append(threading.current_thread().name)
            now[0] += 0.012  # a 12 ms read
            if n == 3:
                raise NotFound("three")
            return n + chain.head.num

        return query

    async def body(runner: ChainRunner) -> None:
        reads = ChainReads(runner, metrics, batch_budget_s=0.02)
        serving = asyncio.create_task(reads.run())
        fast = await asyncio.gather(*(reads(lambda c: c.head.num) for _ in range(6)))
        assert fast == [0] * 6 and batches() == 1
        results = await asyncio.gather(*(reads(slow(n)) for n in range(6)), return_exceptions=True)
        serving.cancel()
        assert results[:3] == [0, 1, 2] and results[4:] == [4, 5]
        assert isinstance(results[3], NotFound)

    def batches() -> float | None:
        return metrics.registry.get_sample_value("bor_rpc_chain_read_batches_total")

    _with_runner(tmp_path, body)
    assert set(threads) == {"chain"}
    assert 1 + 3 <= (batches() or 0) <= 1 + 6  # two 12 ms reads spend a 20 ms budget
    assert metrics.registry.get_sample_value("bor_rpc_chain_reads_total") == 12


def test_the_pacer_spaces_reads_only_while_writes_are_in_flight() -> None:
    """With writes in flight, reads past the burst start 1/rate apart; without, at once."""
    writing = True
    pacer = ReadPacer(lambda: writing, NodeMetrics(), rate=100.0, burst=2)

    async def turns(n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            await pacer.turn()
        return time.perf_counter() - started

    paced = asyncio.run(turns(12))
    assert 0.08 <= paced < 0.5  # 10 reads past the burst of 2, 10 ms apart
    writing = False
    assert asyncio.run(turns(50)) < 0.05


def test_the_pacer_refuses_a_read_whose_slot_is_too_far() -> None:
    """A read that would wait longer than ``max_wait_s`` for its slot is refused at once."""
    metrics = NodeMetrics()
    pacer = ReadPacer(lambda: True, metrics, rate=10.0, burst=0, max_wait_s=0.25)

    async def main() -> None:
        waiting = [asyncio.create_task(pacer.turn()) for _ in range(3)]  # 0, 0.1, 0.2 s
        await asyncio.sleep(0)
        with pytest.raises(ReadsBusy):
            await pacer.turn()  # would start 0.3 s from now
        await asyncio.gather(*waiting)

    asyncio.run(main())
    assert metrics.registry.get_sample_value("bor_rpc_reads_refused_total") == 1
