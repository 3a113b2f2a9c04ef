"""One thread owns the chain; the event loop reaches it only through ``ChainRunner.call``.

LevelDB calls and block execution are blocking; running them on a dedicated thread keeps the
event loop (RPC, timers, the network) responsive, and a single thread means the chain
manager never sees two callers at once. After every call that changed the chain, the thread
publishes the chain's new immutable ``ChainView`` (``runner.view``) and hands what the call
changed (``ChainUpdate``: the view and the chain's events) to every subscriber on the event
loop, in order: the one route by which news of the chain leaves its thread. Readers that
need no more than the view never wait for the thread.
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
from typing import Any, Concatenate, ParamSpec, TypeVar

import structlog

from chain.controller import Chain
from chain.core.primitives.types import BlockId, BlockNum, TxId
from chain.events import ChainUpdate
from chain.view import ChainView

log = structlog.get_logger("chain")

P = ParamSpec("P")
T = TypeVar("T")


class ChainRunner:
    """The chain's own thread, with two lanes: blocks (ours and our peers') go before queued
    transaction batches and queries, so a block never waits behind admission work longer
    than the one call already running (``bench_propagation.py`` measures the effect)."""

    URGENT, NORMAL = 0, 1

    def __init__(self, chain: Chain) -> None:
        """The runner owns ``chain`` from here on: nothing else may touch it, and ``close``
        closes its store."""
        self._chain = chain
        self._view = chain.view()
        chain.take_events()  # from now on the chain records what each call changes
        self._subscribers: list[Callable[[ChainUpdate], None]] = []
        self._queue: queue.PriorityQueue[tuple[int, int, _Job | None]] = queue.PriorityQueue()
        self._seq = itertools.count()
        self._thread = threading.Thread(target=self._work, name="chain", daemon=True)
        self._thread.start()

    @property
    def view(self) -> ChainView:
        """The chain as of its last change (safe to read from any thread)."""
        return self._view

    def subscribe(self, callback: Callable[[ChainUpdate], None]) -> None:
        """Call ``callback(update)`` on the event loop after every call that changed the
        chain: every update, in the order of the calls, none skipped or merged, each before
        the call's caller resumes. A callback must not block (it updates memory or puts into
        a bounded queue); one that raises is logged and the others still run."""
        self._subscribers.append(callback)

    async def call(
        self, fn: Callable[Concatenate[Chain, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``fn(chain, *args, **kwargs)`` on the chain thread, behind the calls queued before
        it: the only way to the chain from the event loop."""
        return await self._submit(self.NORMAL, functools.partial(fn, self._chain, *args, **kwargs))

    async def call_urgent(
        self, fn: Callable[Concatenate[Chain, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """As ``call``, ahead of every queued normal call (blocks, votes)."""
        return await self._submit(self.URGENT, functools.partial(fn, self._chain, *args, **kwargs))

    async def _submit(self, lane: int, job: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((lane, next(self._seq), _Job(job, future, loop)))
        return await future

    def _work(self) -> None:
        while True:
            _, _, job = self._queue.get()
            if job is None:
                self._chain.store.close()  # its owner's last act
                return
            if job.future.cancelled():
                continue
            result, error = None, None
            try:
                result = job.fn()
            except BaseException as err:  # handed to the awaiting task, which re-raises it
                error = err
            try:
                view = self._chain.view()
            except Exception:  # the store failed: the caller sees its own error
                view = self._view
            events = self._chain.take_events()
            previous = self._view
            self._view = view  # published before the caller resumes
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting
                if (events or view is not previous) and self._subscribers:
                    update = ChainUpdate(view, events, previous.lib_num)
                    # call_soon_threadsafe keeps the order: updates reach the loop as the
                    # calls ran, and each before its caller's future is settled.
                    job.loop.call_soon_threadsafe(self._notify, update)
                job.loop.call_soon_threadsafe(_settle, job.future, result, error)

    def _notify(self, update: ChainUpdate) -> None:
        for callback in self._subscribers:
            try:
                callback(update)
            except Exception:  # one subscriber's bug must not starve the others of news
                log.exception("chain_subscriber_failed", subscriber=repr(callback))

    def close(self) -> None:
        """Finish the calls already queued, close the chain's store, and stop the thread."""
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

    def chain_updated(self, update: ChainUpdate) -> None:
        """Resolve the waiters of every transaction in a block the update left on our chain
        (a block applied and popped again within the same call included nothing)."""
        if not self._waiters:
            return
        undone: dict[BlockId, int] = {}  # popped later in the update, walking backwards
        for step in reversed(update.events.steps):
            block = step.block
            if step.undo:
                undone[block.id] = undone.get(block.id, 0) + 1
            elif undone.get(block.id, 0) > 0:
                undone[block.id] -= 1
            else:
                self.included((t.id for t in block.transactions), block.num)

    def included(self, tx_ids: Iterable[TxId], num: BlockNum) -> None:
        if not self._waiters:
            return  # the common case (no client waits), for blocks of thousands of ids
        for tx_id in tx_ids:
            for future in self._waiters.pop(tx_id, []):
                if not future.done():
                    future.set_result(num)
