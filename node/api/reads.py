"""How RPC reads share the node with writes, so that reads never starve them.

``ReadPacer``: while transactions are being admitted, reads start at most ``rate`` a second,
in arrival order. A read costs the event loop time however it is answered (aiohttp's share
alone is not small), and clients that poll in a loop read again as soon as they are answered,
so the faster reads are, the more of them take the GIL from admission: cheaper reads alone
do not protect writes. Pacing gives writes priority; with no writes in flight, reads are not
paced at all.

``ChainReads``: reads that need more than the chain's view run on the chain thread, in
batches. They share that thread with blocks and admission batches, and one call per read
would put polling clients' reads ahead of every admission batch, at two thread wake-ups
each. So reads queue here, on the event loop, and one task hands them to the chain thread a
batch at a time: at most one batch is in flight, and a batch stops at a time budget, so a
block or a batch of transactions never waits behind more than ``BATCH_BUDGET_S`` of reads.
(A read that arrives while a block is being produced still waits for it.)

Overload is answered, not queued without end: a read that would wait for its pace slot
longer than ``max_wait_s``, or find ``max_waiting`` reads queued for the chain thread, is
refused at once (``ReadsBusy``, HTTP 503 with a JSON reason) so that a client learns to back
off; below those bounds, bursts simply wait their turn.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from chain.controller import Chain
from node.errors import NodeError
from node.metrics import NodeMetrics
from node.runner import ChainRunner

T = TypeVar("T")

# Reads handed to the chain thread at once, at most.
MAX_BATCH = 64
# Chain-thread time one batch may take before it hands the rest back: an account read costs
# ~0.3 ms there, a full block's decode ~20 ms; 20 ms is the admission batch's order of size.
BATCH_BUDGET_S = 0.02
# Reads started per second while transactions are being admitted. On the 2-core machine
# bench_rpc.py ran on (150-250 us of the node's CPU a read), 20 polling clients then kept
# pushes at ~0.7-0.8 of their rate alone, with a read's median at ~50 ms (20 clients / 400);
# at 600 a second the median fell to ~33 ms and pushes to ~0.64.
PACED_READS_PER_S = 400.0
# Reads that may start at once, unpaced, after a quiet moment (a wallet's few reads together).
PACE_BURST = 8
# Writes count as in flight for this long after an admission batch.
WRITES_WINDOW_S = 0.25
# A read whose pace slot is further away than this is refused with 503 instead.
MAX_PACE_WAIT_S = 1.0
# Reads queued beyond which the RPC answers 503: 20 clients polling need 20; 256 leaves room
# for bursts of several hundred clients without letting the queue outgrow a few batches.
MAX_WAITING = 256


class ReadsBusy(NodeError):
    """Too many reads are waiting; the RPC answers 503 with the reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}; retry later")
        self.reason = reason


class ReadPacer:
    """Start times for reads, ``1 / rate`` apart while ``writing()`` says writes are in
    flight (a virtual clock, so reads go in arrival order and nobody polls)."""

    def __init__(
        self,
        writing: Callable[[], bool],
        metrics: NodeMetrics,
        *,
        rate: float = PACED_READS_PER_S,
        burst: int = PACE_BURST,
        max_wait_s: float = MAX_PACE_WAIT_S,
    ) -> None:
        self.writing = writing
        self.metrics = metrics
        self.interval = 1.0 / rate
        self.burst = burst
        self.max_wait_s = max_wait_s
        self._next = 0.0  # when the next read may start

    async def turn(self) -> None:
        """Wait for this read's slot; raises ReadsBusy if it is too far away."""
        if not self.writing():
            return
        now = time.monotonic()
        start = max(self._next, now - self.burst * self.interval)
        if start - now > self.max_wait_s:
            self.metrics.rpc_reads_refused.inc()
            raise ReadsBusy(f"reads are paced behind writes {start - now:.1f} s ahead")
        self._next = start + self.interval
        if start > now:
            await asyncio.sleep(start - now)


@dataclass(slots=True)
class _Read:
    query: Callable[[Chain], Any]
    future: asyncio.Future[Any]


class ChainReads:
    def __init__(
        self,
        runner: ChainRunner,
        metrics: NodeMetrics,
        *,
        max_waiting: int = MAX_WAITING,
        batch_budget_s: float = BATCH_BUDGET_S,
    ) -> None:
        self.runner = runner
        self.metrics = metrics
        self.max_waiting = max_waiting
        self.batch_budget_s = batch_budget_s
        self._waiting: deque[_Read] = deque()
        self._arrived = asyncio.Event()

    async def __call__(self, query: Callable[[Chain], T]) -> T:
        """``query(chain)``, run on the chain thread; raises ReadsBusy when too many wait."""
        if len(self._waiting) >= self.max_waiting:
            self.metrics.rpc_reads_refused.inc()
            raise ReadsBusy(f"{len(self._waiting)} reads are waiting for the chain")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Read(query, future))
        self._arrived.set()
        return await future

    async def run(self) -> None:
        """Hand queued reads to the chain thread, one batch at a time, until cancelled."""
        while True:
            if not self._waiting:
                self._arrived.clear()
                await self._arrived.wait()
                continue
            batch: list[_Read] = []
            while self._waiting and len(batch) < MAX_BATCH:
                read = self._waiting.popleft()
                if not read.future.done():  # its caller went away
                    batch.append(read)
            if not batch:
                continue
            outcomes = await self.runner.call(self._run, [r.query for r in batch])
            self.metrics.rpc_chain_reads.inc(len(outcomes))
            self.metrics.rpc_read_batches.inc()
            for read, (value, error) in zip(batch, outcomes, strict=False):
                if read.future.done():
                    continue
                if error is not None:
                    read.future.set_exception(error)
                else:
                    read.future.set_result(value)
            # Over its time budget, the batch left these for the next one, first in line.
            self._waiting.extendleft(reversed(batch[len(outcomes) :]))

    def _run(
        self, chain: Chain, queries: list[Callable[[Chain], Any]]
    ) -> list[tuple[Any, Exception | None]]:
        """On the chain thread: answer queries in order until the time budget is spent (at
        least one, so the batch always moves)."""
        deadline = time.perf_counter() + self.batch_budget_s
        outcomes: list[tuple[Any, Exception | None]] = []
        for query in queries:
            try:
                outcomes.append((query(chain), None))
            except Exception as err:  # the reader's own error (NotFound, a store error)
                outcomes.append((None, err))
            if time.perf_counter() > deadline:
                break
        return outcomes
