"""The chain thread's two lanes: urgent calls overtake queued normal ones."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from genesis.testing import DevNet
from node.runner import ChainRunner


def test_urgent_calls_overtake_queued_normal_calls(tmp_path: Path) -> None:
    """An urgent call queued behind normal calls runs next, as soon as the current call ends."""
    chain = DevNet.create().open(tmp_path / "chain")
    runner = ChainRunner(chain)
    order: list[str] = []
    gate = threading.Event()

    def job(name: str) -> str:
        if name == "running":
            gate.wait(5)
        order.append(name)
        return name

    async def main() -> None:
        running = asyncio.create_task(runner.call(job, "running"))
        await asyncio.sleep(0.05)  # the thread is inside the first call now
        normal = [asyncio.create_task(runner.call(job, f"normal{i}")) for i in range(2)]
        await asyncio.sleep(0.01)
        urgent = asyncio.create_task(runner.call_urgent(job, "urgent"))
        await asyncio.sleep(0.01)
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
        chain.store.close()
    assert order == ["running", "urgent", "normal0", "normal1"]


def test_an_exception_reaches_the_caller(tmp_path: Path) -> None:
    """An exception raised by a call on the chain thread is raised to the awaiting caller."""
    chain = DevNet.create().open(tmp_path / "chain")
    runner = ChainRunner(chain)

    def fail() -> None:
        raise ValueError("boom")

    try:
        with pytest.raises(ValueError, match="boom"):
            asyncio.run(runner.call(fail))
    finally:
        runner.close()
        chain.store.close()
