"""What an operator sees of blocks joining the chain, from the chain's updates.

Every block applied (ours and peers') is counted; a peer's block applied while in sync is
timed from its slot start and logged as one ``block_applied`` line (as nodeos does; during
catch-up the sync status tells the story instead). The collector's thresholds follow the
same signal: catching up keeps whole sync batches alive, following the chain does not.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

import structlog

from chain.core.primitives.params import slot_start_ms
from chain.events import ChainUpdate
from node.metrics import NodeMetrics

log = structlog.get_logger("node")

GcThresholds = tuple[int, int, int]


class BlockReporter:
    def __init__(
        self,
        metrics: NodeMetrics,
        in_sync: Callable[[], bool],
        following: GcThresholds,
        catching_up: GcThresholds,
    ) -> None:
        """``following`` and ``catching_up``: the collector's thresholds for each stage."""
        self._metrics = metrics
        self._in_sync = in_sync
        self._following = following
        self._catching_up = catching_up

    def chain_updated(self, update: ChainUpdate) -> None:
        """A subscriber of the chain's updates."""
        events = update.events
        applied = events.applied
        if not applied:
            return
        in_sync = self._in_sync()
        # A lone producer that caught up hears no peer blocks: its own say it follows.
        following = in_sync or events.produced is not None
        gc.set_threshold(*(self._following if following else self._catching_up))
        self._metrics.block_txs.inc(sum(len(b.transactions) for b in applied))
        if not in_sync or events.produced is not None:
            return
        now_ms = time.time() * 1000
        for block in applied:
            latency = now_ms - slot_start_ms(block.header.slot)
            self._metrics.block_latency.observe(latency / 1000)
            log.info(
                "block_applied",
                num=block.num,
                id=block.id.hex()[:16],
                producer=block.header.producer,
                txs=len(block.transactions),
                latency_ms=round(latency, 1),
            )
