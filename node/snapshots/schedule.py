"""The periodic snapshot: one written each time the LIB passes a multiple of
``snapshot-interval-blocks``, the oldest pruned beyond ``snapshot-keep``.

A subscriber of the chain's updates notes that one is due (it must not block); the writing
is this part's own task, so the node's task group owns it and a stop waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog

from chain.events import ChainUpdate
from node.snapshots.service import prune_snapshots

log = structlog.get_logger("node")


class SnapshotSchedule:
    def __init__(
        self,
        every: int,
        lib: int,
        write: Callable[[], Awaitable[object]],
        directory: Path,
        keep: int,
        paused: Callable[[], bool] = lambda: False,
    ) -> None:
        """``every``: blocks between snapshots (0: none); ``lib``: the LIB at start (a
        restart does not write one at once); ``write``: writes one of the LIB;
        ``paused``: True while no snapshot should be written (fetching one by state sync)."""
        self._every = every
        self._due = lib // every if every else 0
        self._write = write
        self._directory = directory
        self._keep = keep
        self._paused = paused
        self._wanted = asyncio.Event()

    def chain_updated(self, update: ChainUpdate) -> None:
        """A subscriber of the chain's updates."""
        if not self._every or not update.lib_advanced or self._paused():
            return
        due = update.view.lib_num // self._every
        if due > self._due:
            self._due = due
            self._wanted.set()

    async def run(self) -> None:
        """Write each snapshot that became due; several due while one is written make one."""
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            try:
                await self._write()
            except Exception as err:  # one written already by the operator, a full disk
                log.warning("periodic_snapshot_failed", why=str(err))
                continue
            await asyncio.to_thread(prune_snapshots, self._directory, self._keep)
