"""Writing a snapshot of the LIB's state: the one owner of it, whoever asks.

The admin RPC (``/v1/producer/create_snapshot``) and the periodic schedule
(``node.snapshots.schedule``) both call ``SnapshotWriter.write``; one snapshot is written at a
time. The state is pinned on the chain thread (a LevelDB snapshot, a moment's work); the file
is written on a worker thread while the chain goes on, with progress in the log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog

from chain.controller import Chain
from chain.storage.snapshot import SnapshotHead, SnapshotSummary
from node.errors import NodeError
from node.runner import ChainRunner
from node.snapshots.service import create_snapshot, snapshot_name

log = structlog.get_logger("node")

# Seconds between ``snapshot_writing`` progress lines.
PROGRESS_EVERY_S = 5.0


class SnapshotBusy(NodeError):
    """A snapshot is being written already."""


@dataclass(frozen=True, slots=True)
class WrittenSnapshot:
    """The snapshot written: of which block, where, and what it holds."""

    head: SnapshotHead
    path: Path
    summary: SnapshotSummary


class SnapshotWriter:
    def __init__(self, runner: ChainRunner, directory: Path) -> None:
        self._runner = runner
        self.directory = directory
        self._running = False

    async def write(self) -> WrittenSnapshot:
        """Write the LIB's state to a file of ``directory``; raises ``SnapshotBusy`` while
        another is being written."""
        if self._running:
            raise SnapshotBusy("a snapshot is being written already")
        self._running = True
        try:
            head, entries = await self._runner.call(_lib_state)
            path = self.directory / snapshot_name(head.num, head.block.id)
            log.info("snapshot_writing", block=head.num, file=str(path))
            last = [time.monotonic()]

            def report(count: int, size: int) -> None:
                if time.monotonic() - last[0] >= PROGRESS_EVERY_S:
                    last[0] = time.monotonic()
                    log.info("snapshot_writing", block=head.num, entries=count, bytes=size)

            summary = await asyncio.to_thread(create_snapshot, head, entries, path, report)
        finally:
            self._running = False
        log.info("snapshot_written", block=head.num, file=str(path), entries=summary.entries)
        return WrittenSnapshot(head, path, summary)


def _lib_state(chain: Chain) -> tuple[SnapshotHead, Iterator[tuple[bytes, bytes]]]:
    return chain.store.lib_state(chain.chain_id)
