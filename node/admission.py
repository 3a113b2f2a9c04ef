"""Transaction admission: every push, whatever its mode, goes through one queue.

A task drains the queue in batches into the chain thread (``Chain.admit_transactions``), so
50 concurrent clients cost one thread hop and one signature-recovery batch per batch instead
of one per request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from chain.errors import MempoolFull, TransactionError
from chain.transaction import SignedTransaction
from node.metrics import NodeMetrics
from node.runner import ChainRunner

log = structlog.get_logger("admission")

# Largest batch handed to the chain thread at once: about 60 ms of work at 8k tx/s, short
# enough that the producer loop (which shares the chain thread) is never held up for long.
MAX_BATCH = 512
QUEUE_SIZE = 20_000

_Item = tuple[SignedTransaction, "asyncio.Future[None] | None"]


class Admitter:
    def __init__(
        self,
        runner: ChainRunner,
        metrics: NodeMetrics,
        on_accepted: Callable[[SignedTransaction], None] = lambda tx: None,
    ) -> None:
        self.runner = runner
        self.metrics = metrics
        self.on_accepted = on_accepted
        self._queue: asyncio.Queue[_Item] = asyncio.Queue(QUEUE_SIZE)
        self._last_batch = -1e9  # time.monotonic() of the last batch handed over

    def admitting(self, window_s: float) -> bool:
        """Whether transactions wait here now or a batch went to the chain in ``window_s``."""
        return not self._queue.empty() or time.monotonic() - self._last_batch < window_s

    async def admit(self, stx: SignedTransaction) -> None:
        """Admit ``stx``; raises the TransactionError that refused it."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._put((stx, future))
        await future

    def admit_later(self, stx: SignedTransaction) -> None:
        """Queue ``stx`` and return at once; a refusal is only logged and counted."""
        self._put((stx, None))

    def _put(self, item: _Item) -> None:
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull as err:
            self.metrics.tx_rejected.labels(reason=MempoolFull.name).inc()
            raise MempoolFull("the admission queue is full; retry later") from err

    async def run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < MAX_BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            txs = [stx for stx, _ in batch]
            self._last_batch = time.monotonic()
            results = await self.runner.call(self._admit, txs, int(time.time() * 1000))
            for (stx, future), error in zip(batch, results, strict=True):
                self._settle(stx, future, error)

    def _admit(self, txs: list[SignedTransaction], now_ms: int) -> list[TransactionError | None]:
        """On the chain thread: the chain is read there only."""
        return self.runner.chain.admit_transactions(txs, now_ms)

    def _settle(
        self,
        stx: SignedTransaction,
        future: asyncio.Future[None] | None,
        error: TransactionError | None,
    ) -> None:
        if error is None:
            self.metrics.tx_accepted.inc()
            self.on_accepted(stx)
        else:
            self.metrics.tx_rejected.labels(reason=error.name).inc()
        if future is None:
            if error is not None:
                log.info(
                    "async_tx_rejected", tx=stx.id.hex()[:16], error=error.name, why=str(error)
                )
        elif not future.done():
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
