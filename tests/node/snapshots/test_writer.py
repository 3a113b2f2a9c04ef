"""The node's one snapshot writer, which the admin RPC and the periodic schedule share."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from genesis.testing import DevNet
from node.runner import ChainRunner
from node.snapshots.service import verify_snapshot
from node.snapshots.writer import SnapshotBusy, SnapshotWriter


def test_writes_the_lib_state_and_refuses_a_second_write_meanwhile(tmp_path: Path) -> None:
    """A write asked for while one is under way raises SnapshotBusy; the first writes a
    snapshot of the LIB that verifies, and a later write is taken again."""
    net = DevNet.create(1)
    chain = net.open(tmp_path / "chain")
    net.produce(chain)  # one producer: its block is irreversible at once
    runner = ChainRunner(chain)
    writer = SnapshotWriter(runner, tmp_path / "snapshots")

    async def main() -> None:
        first = asyncio.create_task(writer.write())
        await asyncio.sleep(0)  # the first holds the writer once it has started
        with pytest.raises(SnapshotBusy):
            await writer.write()
        written = await first
        assert written.path.parent == tmp_path / "snapshots"
        assert written.head.num == runner.view.lib_num == 1
        assert verify_snapshot(written.path).head.block.id == written.head.block.id
        assert (await writer.write()).path == written.path

    try:
        asyncio.run(main())
    finally:
        runner.close()
