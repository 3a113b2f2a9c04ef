"""Transaction admission: every transaction, from our RPC or from a peer, goes through one queue.

A task drains the queue in batches into the chain thread (``Chain.admit_transactions``), so
50 concurrent clients cost one thread hop and one signature-recovery batch per batch instead
of one per request. Peers' transactions take the same queue, so the queue's bound, the
``bor_transactions_*`` counters and the read pacer (``node.api.reads``, which slows reads while
admission is busy) see all the node's admission work, not the RPC's share of it.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from chain.controller import Chain
from chain.core.execution.actions import SetCode
from chain.core.execution.contracts import TxTrace
from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.errors import DuplicateTransaction, MempoolFull, TransactionError
from chain.core.primitives.types import PublicKey, TxId
from chain.vm.errors import RuntimeFault
from node.metrics import NodeMetrics
from node.runner import ChainRunner

log = structlog.get_logger("admission")

# Largest batch handed to the chain thread at once: about 60 ms of work at 8k tx/s, short
# enough that the producer loop (which shares the chain thread) is never held up for long.
MAX_BATCH = 512
QUEUE_SIZE = 20_000
# Bytes of transactions waiting in the queue: each is held decoded and as bytes (about twice
# its size) until the chain thread takes it. Counted only, 20,000 setcodes of 261 KB would be
# 10 GB; 600 of them took a producer's queue to ~275 MiB (issue 39). 16 MiB is 8,000 typical
# transfers of ~2 KB and far more than a batch the chain takes at once.
QUEUE_BYTES = 16 << 20
# Async refusals remembered for get_transaction: a client that pushed with ``mode: async``
# learns nothing else. As many as the queue holds, so a full queue's worth of refusals stays
# visible; about 200 bytes each.
REFUSALS_KEPT = QUEUE_SIZE


# An admitted transaction's trace (None: no contract ran), or why it was not admitted: the
# refusal, or the RuntimeFault that left this node without a verdict on it.
Outcome = TransactionError | RuntimeFault | TxTrace | None


@dataclass(slots=True)
class _Item:
    stx: SignedTransaction
    # Told the outcome: the refusal, or the trace of the contracts it ran on admission (None
    # for native actions only); None: nobody waits (an RPC push that answered at once).
    outcome: asyncio.Future[TransactionError | TxTrace | None] | None
    # From a peer: the tx relay passes it on itself, to every peer but the sender.
    relayed: bool = False
    # Its signer keys, recovered already by the RPC (a batch's, in its executor): the chain
    # thread takes them rather than recovering the signatures again.
    keys: frozenset[PublicKey] | None = None
    # Of a batch admitted together (``admit_many``): where its result goes instead.
    slot: tuple[_Results, int] | None = None


class _Results:
    """The results of an ``admit_many`` batch, in its order, and the future told once all
    its transactions have one: a batch costs one future, not one per transaction."""

    __slots__ = ("done", "left", "values")

    def __init__(self, values: list[Outcome], left: int) -> None:
        self.values = values
        self.left = left
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def set(self, index: int, value: Outcome) -> None:
        self.values[index] = value
        self.left -= 1
        if self.left == 0 and not self.done.done():
            self.done.set_result(None)


class Admitter:
    def __init__(
        self,
        runner: ChainRunner,
        metrics: NodeMetrics,
        queue_size: int = QUEUE_SIZE,
        queue_bytes: int = QUEUE_BYTES,
        precompile: Callable[[bytes], None] | None = None,
    ) -> None:
        """``precompile(code)`` checks and compiles a module a transaction deploys, off the
        chain thread (``ContractRuntime.precompile``), before its batch goes to the chain."""
        self.runner = runner
        self.metrics = metrics
        self._precompile = precompile
        # Each entry the transactions put at once (one, or an ``admit_many`` batch), handed to
        # the chain together; the count bound is on transactions, kept here.
        self._queue: asyncio.Queue[list[_Item]] = asyncio.Queue()
        self._queue_size = queue_size
        self._queued = 0
        self._queue_bytes = queue_bytes
        self._queued_bytes = 0
        self._last_batch = -1e9  # time.monotonic() of the last batch handed over
        self._accepted: list[Callable[[SignedTransaction], None]] = []
        self._refused: OrderedDict[TxId, TransactionError] = OrderedDict()

    def subscribe(self, callback: Callable[[SignedTransaction], None]) -> None:
        """Call ``callback(tx)`` for each transaction of our own RPC that was admitted (the
        network offers it to peers); must not block."""
        self._accepted.append(callback)

    def admitting(self, window_s: float) -> bool:
        """Whether transactions wait here now or a batch went to the chain in ``window_s``."""
        return not self._queue.empty() or time.monotonic() - self._last_batch < window_s

    async def admit(
        self, stx: SignedTransaction, keys: frozenset[PublicKey] | None = None
    ) -> TxTrace | None:
        """Admit ``stx``; raises the TransactionError that refused it. Returns the trace of
        the contract actions it ran on the head state (None if it has none): what a push
        answers with. ``keys``: its signer keys, if recovered already from its signatures."""
        outcome: asyncio.Future[TransactionError | TxTrace | None]
        outcome = asyncio.get_running_loop().create_future()
        self._queue_items([self._fits(_Item(stx, outcome, keys=keys))])
        result = await outcome
        if isinstance(result, TransactionError):
            raise result
        return result

    def admit_later(self, stx: SignedTransaction, keys: frozenset[PublicKey] | None = None) -> None:
        """Queue ``stx`` and return at once; a refusal is logged, counted and kept for
        ``refusal`` (the only way its sender learns of it). ``keys`` as for ``admit``."""
        self._queue_items([self._fits(_Item(stx, None, keys=keys))])

    async def admit_many(
        self, txs: Sequence[tuple[SignedTransaction, frozenset[PublicKey] | None]]
    ) -> list[Outcome]:
        """Admit ``txs`` (each with its signer keys, if recovered already) in one chain-thread
        call; for each, in order, its trace (None if no contract ran) or the TransactionError
        that refused it, or the RuntimeFault that stopped the chain from judging it. The same
        bounds as ``admit``, each transaction in turn: those past the queue's count or bytes
        are refused (``MempoolFull``), the earlier ones admitted."""
        if not txs:
            return []
        values: list[Outcome] = [None] * len(txs)
        results = _Results(values, len(txs))
        items: list[_Item] = []
        for index, (stx, keys) in enumerate(txs):
            try:
                items.append(self._fits(_Item(stx, None, keys=keys, slot=(results, index))))
            except MempoolFull as err:
                results.set(index, err)
            else:
                self._queued_bytes += stx.size  # counted now: the next must fit beside it
                self._queued += 1
        self._queued_bytes -= sum(item.stx.size for item in items)
        self._queued -= len(items)
        if items:
            self._queue_items(items)
        await results.done
        return values

    def refusal(self, tx_id: TxId) -> TransactionError | None:
        """Why a recent ``admit_later`` transaction was refused, if it was (and was not
        admitted since, pushed again)."""
        return self._refused.get(tx_id)

    async def admit_relayed(
        self, txs: Sequence[SignedTransaction]
    ) -> list[TransactionError | None]:
        """Admit transactions a peer sent, in order: for each, None or the error that refused
        it. Those that find the queue full are refused at once (``MempoolFull``) rather than
        waiting for room: the sender's own node still holds them."""
        loop = asyncio.get_running_loop()
        outcomes: list[asyncio.Future[TransactionError | TxTrace | None]] = []
        for stx in txs:
            outcome: asyncio.Future[TransactionError | TxTrace | None] = loop.create_future()
            try:
                self._queue_items([self._fits(_Item(stx, outcome, relayed=True))])
            except MempoolFull as err:
                outcome.set_result(err)
            outcomes.append(outcome)
        results = await asyncio.gather(*outcomes)
        return [r if isinstance(r, TransactionError) else None for r in results]

    def _fits(self, item: _Item) -> _Item:
        """``item``, if the queue has room for it; else MempoolFull, counted."""
        size = item.stx.size
        if self._queued_bytes + size > self._queue_bytes and self._queued > 0:
            self.metrics.tx_rejected.labels(reason=MempoolFull.name).inc()
            raise MempoolFull(
                f"the admission queue holds {self._queued_bytes} bytes of transactions"
                f" (at most {self._queue_bytes}); retry later"
            )
        if self._queued >= self._queue_size:
            self.metrics.tx_rejected.labels(reason=MempoolFull.name).inc()
            raise MempoolFull("the admission queue is full; retry later")
        return item

    def _queue_items(self, items: list[_Item]) -> None:
        self._queue.put_nowait(items)
        self._queued += len(items)
        self._queued_bytes += sum(item.stx.size for item in items)

    def _take(self, items: list[_Item]) -> list[_Item]:
        self._queued -= len(items)
        self._queued_bytes -= sum(item.stx.size for item in items)
        return items

    async def run(self) -> None:
        while True:
            # A batch of admit_many is never split: it goes to the chain in one call.
            batch = self._take(await self._queue.get())
            while len(batch) < MAX_BATCH and not self._queue.empty():
                batch.extend(self._take(self._queue.get_nowait()))
            txs = [item.stx for item in batch]
            known = [(item.stx, item.keys) for item in batch if item.keys is not None]
            await self.compile_code(txs)
            self._last_batch = time.monotonic()
            try:
                results = await self.runner.call(_admit, txs, int(time.time() * 1000), known)
            except RuntimeFault as err:
                log.error("contract_runtime_fault", txs=len(txs), why=str(err))
                for item in batch:
                    self._fault(item, err)
                continue
            for item, result in zip(batch, results, strict=True):
                self._settle(item, result)

    async def compile_code(self, txs: Sequence[SignedTransaction]) -> None:
        """Compile the modules that ``txs`` deploy in a worker thread, so the chain thread,
        which checks them at admission and again in a block, finds them compiled and does
        not stop producing or applying blocks to compile (a module the structural limits
        admit compiles in under 100 ms, but a batch or a block may deploy several). Also
        for a peer's blocks, whose deployments this node may not have seen as transactions
        (``NodeChainService.push_blocks``)."""
        precompile = self._precompile
        if precompile is None:
            return
        codes = {a.code for stx in txs for a in stx.tx.actions if isinstance(a, SetCode)}
        for code in codes:
            await asyncio.to_thread(precompile, code)

    def _fault(self, item: _Item, err: RuntimeFault) -> None:
        """This node could not run a contract of the batch: no verdict on its transactions.
        An RPC caller gets the fault (a 503); a peer's transaction is refused for now, as
        when the queue is full (its sender still holds it)."""
        if item.slot is not None:
            item.slot[0].set(item.slot[1], err)
            return
        if item.outcome is None or item.outcome.done():
            return
        if item.relayed:
            item.outcome.set_result(MempoolFull(f"this node cannot run contracts now: {err}"))
        else:
            item.outcome.set_exception(err)

    def _settle(self, item: _Item, result: TransactionError | TxTrace | None) -> None:
        error = result if isinstance(result, TransactionError) else None
        if error is None:
            self.metrics.tx_accepted.inc()
            self._refused.pop(item.stx.id, None)
            if not item.relayed:
                for callback in self._accepted:
                    callback(item.stx)
        else:
            self.metrics.tx_rejected.labels(reason=error.name).inc()
        if item.slot is not None:
            item.slot[0].set(item.slot[1], result)
        elif item.outcome is None:
            if error is not None and not isinstance(error, DuplicateTransaction):
                # A duplicate's id is in the mempool or a block already: that tells its fate.
                self._refused[item.stx.id] = error
                self._refused.move_to_end(item.stx.id)
                if len(self._refused) > REFUSALS_KEPT:
                    self._refused.popitem(last=False)
                log.info(
                    "async_tx_rejected",
                    tx=item.stx.id.hex()[:16],
                    error=error.name,
                    why=str(error),
                )
        elif not item.outcome.done():  # done: its caller went away
            item.outcome.set_result(result)


def _admit(
    chain: Chain,
    txs: list[SignedTransaction],
    now_ms: int,
    known: list[tuple[SignedTransaction, frozenset[PublicKey]]],
) -> list[TransactionError | TxTrace | None]:
    chain.learn_keys(known)
    return chain.admit_traced(txs, now_ms)
