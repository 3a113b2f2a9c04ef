"""One thread owns the chain; the event loop reaches it only through ``ChainRunner.call``.

LevelDB calls and block execution are blocking; running them on a dedicated thread keeps the
event loop (RPC, timers, the network) responsive, and a single thread means the chain
manager never sees two callers at once. After every call that changed the chain, the thread
publishes the chain's new immutable ``ChainView`` (``runner.view``) and tells subscribers on
the event loop; readers that need no more than the view never wait for the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from chain.controller import Chain
from chain.types import BlockNum, TxId
from chain.view import ChainView

P = ParamSpec("P")
T = TypeVar("T")


class ChainRunner:
    """The chain's own thread, with two lanes: blocks (ours and our peers') go before queued
    transaction batches and queries, so a block never waits behind admission work longer
    than the one call already running (``bench_propagation.py`` measures the effect)."""

    URGENT, NORMAL = 0, 1

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self._view = chain.view()
        self._subscribers: list[Callable[[ChainView], None]] = []
        self._queue: queue.PriorityQueue[tuple[int, int, _Job | None]] = queue.PriorityQueue()
        self._seq = itertools.count()
        self._thread = threading.Thread(target=self._work, name="chain", daemon=True)
        self._thread.start()

    @property
    def view(self) -> ChainView:
        """The chain as of its last change (safe to read from any thread)."""
        return self._view

    def subscribe(self, callback: Callable[[ChainView], None]) -> None:
        """Call ``callback(view)`` on the event loop after every change of the chain."""
        self._subscribers.append(callback)

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._submit(self.NORMAL, functools.partial(fn, *args, **kwargs))

    async def call_urgent(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._submit(self.URGENT, functools.partial(fn, *args, **kwargs))

    async def _submit(self, lane: int, job: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((lane, next(self._seq), _Job(job, future, loop)))
        return await future

    def _work(self) -> None:
        while True:
            _, _, job = self._queue.get()
            if job is None:
                return
            if job.future.cancelled():
                continue
            result, error = None, None
            try:
                result = job.fn()
            except BaseException as err:  # handed to the awaiting task, which re-raises it
                error = err
            try:
                view = self.chain.view()
            except Exception:  # the store failed: the caller sees its own error
                view = self._view
            changed = view is not self._view
            self._view = view  # published before the caller resumes
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting
                if changed and self._subscribers:
                    job.loop.call_soon_threadsafe(self._notify, view)
                job.loop.call_soon_threadsafe(_settle, job.future, result, error)

    def _notify(self, view: ChainView) -> None:
        if view is not self._view:
            return  # a newer view is on its way
        for callback in self._subscribers:
            callback(view)

    def close(self) -> None:
        """Finish the calls already queued, then stop the thread."""
        self._queue.put((self.NORMAL + 1, next(self._seq), None))
        self._thread.join()


@dataclass(slots=True)
class _Job:
    fn: Callable[[], Any]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class InclusionWatch:
    """Futures that resolve with the block number once a transaction is in a block."""

    def __init__(self) -> None:
        self._waiters: dict[TxId, list[asyncio.Future[BlockNum]]] = {}

    def watch(self, tx_id: TxId) -> asyncio.Future[BlockNum]:
        future: asyncio.Future[BlockNum] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(tx_id, []).append(future)
        return future

    def forget(self, tx_id: TxId, future: asyncio.Future[BlockNum]) -> None:
        waiters = self._waiters.get(tx_id, [])
        if future in waiters:
            waiters.remove(future)
        if not waiters:
            self._waiters.pop(tx_id, None)

    def included(self, tx_ids: Iterable[TxId], num: BlockNum) -> None:
        if not self._waiters:
            return  # the common case (no client waits), for blocks of thousands of ids
        for tx_id in tx_ids:
            for future in self._waiters.pop(tx_id, []):
                if not future.done():
                    future.set_result(num)
