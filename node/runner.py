"""One thread owns the chain; the event loop reaches it only through ``ChainRunner.call``.

LevelDB calls and block execution are blocking; running them on a dedicated thread keeps the
event loop (RPC, timers, later the network) responsive, and a single thread means the chain
manager never sees two callers at once.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from chain.controller import Chain
from chain.types import BlockNum, TxId

P = ParamSpec("P")
T = TypeVar("T")


class ChainRunner:
    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="chain")

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self._executor.shutdown(wait=True)


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

    def included(self, tx_ids: list[TxId], num: BlockNum) -> None:
        for tx_id in tx_ids:
            for future in self._waiters.pop(tx_id, []):
                if not future.done():
                    future.set_result(num)
