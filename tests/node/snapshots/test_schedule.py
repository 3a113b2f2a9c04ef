"""The periodic snapshot: due when the LIB passes a multiple of the interval, written by its
own task, never at start and never while state sync fetches."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from chain.core.primitives.types import BlockNum
from chain.events import NO_EVENTS, ChainUpdate
from chain.view import ChainView
from genesis.testing import DevNet
from node.snapshots.schedule import SnapshotSchedule
from tests.support.wait import until


def _lib_moves(view: ChainView, before: int, after: int) -> ChainUpdate:
    return ChainUpdate(replace(view, lib_num=BlockNum(after)), NO_EVENTS, BlockNum(before))


def test_a_snapshot_is_written_each_time_the_lib_passes_a_multiple(tmp_path: Path) -> None:
    """With an interval of 4 and the LIB at 5 at start, nothing is written until the LIB
    reaches 8; moves within 8..11 write nothing more; 12 writes again; nothing while paused."""
    chain = DevNet.create().open(tmp_path / "chain")
    view = chain.view()
    chain.store.close()
    written: list[int] = []
    paused = [False]
    lib = [5]

    async def write() -> None:
        written.append(lib[0])

    schedule = SnapshotSchedule(4, 5, write, tmp_path / "snapshots", 2, lambda: paused[0])

    async def lib_moves(before: int, after: int, writes: int) -> None:
        """Move the LIB and wait until ``writes`` snapshots are written in all and none is
        wanted any more (a write not expected, once wanted, would have begun)."""
        paused[0] = after == 16
        lib[0] = after
        schedule.chain_updated(_lib_moves(view, before, after))
        await until(
            lambda: len(written) >= writes and not schedule._wanted.is_set(),
            f"snapshot {writes} written",
        )

    async def main() -> None:
        task = asyncio.create_task(schedule.run())
        for before, after, writes in ((5, 7, 0), (7, 8, 1), (8, 11, 1), (11, 12, 2), (12, 16, 2)):
            await lib_moves(before, after, writes)
        task.cancel()

    (tmp_path / "snapshots").mkdir()
    asyncio.run(main())
    assert written == [8, 12]
