"""One admission path: transactions from peers (the chain service the tx relay calls) and from
the RPC take the same queue, the same counters and the same refusal when it is full; a
push_transactions batch takes it in one chain-thread call (``admit_many``) under the same
bounds and verdicts."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import wasmtime

from chain.controller import Chain
from chain.core.execution.actions import Call, SetCode, Transfer
from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.errors import MempoolFull, TransactionError
from chain.core.primitives.types import AccountName
from genesis.testing import DevNet
from node.admission import Admitter, Outcome
from node.metrics import NodeMetrics
from node.network import NodeChainService
from node.runner import ChainRunner
from tests.support.wait import settle, until

A, B = AccountName("alice"), AccountName("bob")


def _with_runner(
    tmp_path: Path, body: Callable[[ChainRunner, DevNet], Coroutine[Any, Any, None]]
) -> None:
    net = DevNet.create(1)
    runner = ChainRunner(net.open(tmp_path / "chain"))
    try:
        asyncio.run(asyncio.wait_for(body(runner, net), 30))
    finally:
        runner.close()


def _counted(metrics: NodeMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def _names(errors: list[TransactionError | None]) -> list[str | None]:
    return [None if e is None else e.name for e in errors]


def _pending(chain: Chain) -> set[bytes]:
    return {p.tx.id for p in chain.mempool.pending()}


def test_a_peers_transaction_is_admitted_and_counted_where_an_rpc_one_is(
    tmp_path: Path,
) -> None:
    """A batch from a peer goes through the Admitter: the pacer sees admission busy, it is
    counted in bor_transactions_* beside the RPC's, and only the RPC's transaction is handed
    to subscribers (the tx relay passes a peer's on itself)."""

    async def body(runner: ChainRunner, net: DevNet) -> None:
        metrics = NodeMetrics()
        admitter = Admitter(runner, metrics)
        service = NodeChainService(runner, admitter)
        told: list[SignedTransaction] = []
        admitter.subscribe(told.append)
        admitting = asyncio.create_task(admitter.run())
        from_rpc = await runner.call(net.tx, Transfer(A, B, 1))
        from_peer = await runner.call(net.tx, Transfer(A, B, 2))
        assert not admitter.admitting(60.0)
        errors = await service.admit_transactions([from_peer, from_peer])
        assert _names(errors) == [None, "tx_duplicate"]
        assert admitter.admitting(60.0), "the read pacer sees a peer's batch"
        await admitter.admit(from_rpc)
        admitting.cancel()
        assert _counted(metrics, "bor_transactions_accepted_total") == 2
        assert _counted(metrics, "bor_transactions_rejected_total", reason="tx_duplicate") == 1
        assert told == [from_rpc]
        assert await runner.call(_pending) == {from_rpc.id, from_peer.id}

    _with_runner(tmp_path, body)


def test_a_full_queue_refuses_a_peers_transactions_at_once(tmp_path: Path) -> None:
    """Transactions from a peer that find the admission queue full are refused at once with
    MempoolFull (counted as an RPC push's refusal is); those that fit are admitted."""

    async def body(runner: ChainRunner, net: DevNet) -> None:
        metrics = NodeMetrics()
        admitter = Admitter(runner, metrics, queue_size=2)
        service = NodeChainService(runner, admitter)
        txs = [await runner.call(net.tx, Transfer(A, B, n)) for n in (1, 2, 3)]
        admitter.admit_later(txs[0])  # nothing drains the queue yet
        relayed = asyncio.create_task(service.admit_transactions(txs[1:]))
        await settle()
        assert not relayed.done(), "the one that fit waits for its outcome"
        admitting = asyncio.create_task(admitter.run())
        errors = await relayed
        admitting.cancel()
        assert _names(errors) == [None, MempoolFull.name]
        assert _counted(metrics, "bor_transactions_rejected_total", reason="mempool_full") == 1
        assert await runner.call(_pending) == {txs[0].id, txs[1].id}

    _with_runner(tmp_path, body)


PRINTS_HI = """(module
  (import "env" "prints_l" (func $prints_l (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "hi")
  (func (export "apply") (param i64 i64 i64) (call $prints_l (i32.const 0) (i32.const 2))))"""


def test_an_rpc_push_is_answered_with_the_trace_of_its_contract_actions(tmp_path: Path) -> None:
    """Admitter.admit returns the trace of a call run on admission (here the console text a
    real module printed) and None for a native transaction."""

    async def body(runner: ChainRunner, net: DevNet) -> None:
        admitter = Admitter(runner, NodeMetrics())
        admitting = asyncio.create_task(admitter.run())
        deploy = await runner.call(net.tx, SetCode(A, bytes(wasmtime.wat2wasm(PRINTS_HI)), ""))
        assert await admitter.admit(deploy) is None
        await runner.call(net.produce)
        call = await runner.call(net.tx, Call(A, "hello", (B,), b""))
        trace = await admitter.admit(call)
        admitting.cancel()
        assert trace is not None and [a.console for a in trace.actions] == ["hi"]

    _with_runner(tmp_path, body)


def test_an_async_refusal_is_kept_for_its_sender_until_a_retry_is_admitted(
    tmp_path: Path,
) -> None:
    """A transaction queued with admit_later and refused is told by ``refusal`` (named and
    counted); an admitted or duplicate one is not, and a refusal is forgotten once the same
    id is admitted."""

    async def body(runner: ChainRunner, net: DevNet) -> None:
        metrics = NodeMetrics()
        admitter = Admitter(runner, metrics)
        admitting = asyncio.create_task(admitter.run())
        good = await runner.call(net.tx, Transfer(A, B, 1))
        forged = await runner.call(lambda c: net.tx(c, Transfer(A, B, 2), signers=["bob"]))
        admitter.admit_later(good)
        admitter.admit_later(forged)
        admitter.admit_later(good)  # a duplicate: its id is in the mempool, that says enough
        await admitter.admit(await runner.call(net.tx, Transfer(A, B, 3)))  # after those, FIFO
        refused = admitter.refusal(forged.id)
        assert refused is not None and refused.name == "missing_authority"
        assert admitter.refusal(good.id) is None
        assert _counted(metrics, "bor_transactions_rejected_total", reason="missing_authority")
        # The genuine transaction with that id, pushed again, clears the refusal.
        genuine = SignedTransaction(
            forged.tx, forged.packed, (await runner.call(net.tx, Transfer(A, B, 2))).signatures
        )
        await admitter.admit(genuine)
        assert admitter.refusal(forged.id) is None
        admitting.cancel()

    _with_runner(tmp_path, body)


def test_deployed_modules_are_compiled_off_the_chain_thread_before_admission(
    tmp_path: Path,
) -> None:
    """The admitter hands each module a batch deploys, once, to its compiler (a worker
    thread, not the chain's) before the batch reaches the chain, and so does the chain
    service for a peer's blocks; transactions that deploy nothing cost it no call."""

    async def body(runner: ChainRunner, net: DevNet) -> None:
        seen: list[tuple[bytes, str]] = []
        chain_thread = await runner.call(lambda c: threading.current_thread().name)

        def precompile(code: bytes) -> None:
            seen.append((code, threading.current_thread().name))

        admitter = Admitter(runner, NodeMetrics(), precompile=precompile)
        admitting = asyncio.create_task(admitter.run())
        code = bytes(wasmtime.wat2wasm(PRINTS_HI))
        deploy = await runner.call(net.tx, SetCode(A, code, ""))
        transfer = await runner.call(net.tx, Transfer(A, B, 1))
        assert await admitter.admit(transfer) is None
        assert seen == []
        assert await admitter.admit(deploy) is None
        assert [c for c, _ in seen] == [code]
        assert all(thread != chain_thread for _, thread in seen)
        block = await runner.call(net.produce)
        await NodeChainService(runner, admitter).push_blocks([block], 0)
        assert [c for c, _ in seen] == [code, code]
        admitting.cancel()

    _with_runner(tmp_path, body)


def test_the_queue_is_bounded_in_bytes_too(tmp_path: Path) -> None:
    """Past its byte bound (here two transfers' worth) the admission queue refuses a
    transaction with MempoolFull saying so, and takes one again once drained."""

    async def body(runner: ChainRunner, net: DevNet) -> None:
        txs = [await runner.call(net.tx, Transfer(A, B, n)) for n in (1, 2, 3, 4)]
        admitter = Admitter(runner, NodeMetrics(), queue_bytes=txs[0].size + txs[1].size)
        admitter.admit_later(txs[0])
        admitter.admit_later(txs[1])
        try:
            admitter.admit_later(txs[2])
        except MempoolFull as err:
            assert "admission queue holds" in str(err)
        else:
            raise AssertionError("a third transaction fit in two transactions' bytes")
        admitting = asyncio.create_task(admitter.run())

        async def admitted() -> bool:
            return len(await runner.call(_pending)) == 2

        await until(admitted, "the two queued admitted")
        assert await admitter.admit(txs[3]) is None
        admitting.cancel()
        assert await runner.call(_pending) == {txs[0].id, txs[1].id, txs[3].id}

    _with_runner(tmp_path, body)


# --- admit_many: a push_transactions batch in one chain-thread call ---------------------------


def _outcome_names(outcomes: list[Outcome]) -> list[str | None]:
    return [o.name if isinstance(o, TransactionError) else None for o in outcomes]


def _counting_calls(runner: ChainRunner) -> list[int]:
    """Count the runner's chain-thread calls from now on (one entry per call)."""
    calls: list[int] = []
    call = runner.call

    async def counted(fn: Any, *args: Any) -> Any:
        calls.append(1)
        return await call(fn, *args)

    runner.call = counted  # type: ignore[method-assign,assignment]
    return calls


def test_a_batch_past_the_count_bound_is_admitted_up_to_it_in_one_chain_call(
    tmp_path: Path,
) -> None:
    """With one transaction queued and room for three, a batch of four has its first two
    admitted in one chain-thread call and the last two refused at once with MempoolFull,
    counted as a single push's refusal is."""

    async def body(runner: ChainRunner, net: DevNet) -> None:
        metrics = NodeMetrics()
        admitter = Admitter(runner, metrics, queue_size=3)
        txs = [await runner.call(net.tx, Transfer(A, B, n)) for n in range(1, 6)]
        admitter.admit_later(txs[0])  # nothing drains the queue yet
        batch = asyncio.create_task(admitter.admit_many([(t, None) for t in txs[1:]]))
        await settle()
        assert not batch.done(), "the two that fit wait for the chain"
        calls = _counting_calls(runner)
        admitting = asyncio.create_task(admitter.run())
        outcomes = await batch
        admitting.cancel()
        assert _outcome_names(outcomes) == [None, None, MempoolFull.name, MempoolFull.name]
        assert len(calls) == 1, "the queued one and the batch's two went in one call"
        rejected = {"reason": MempoolFull.name}
        assert metrics.registry.get_sample_value("bor_transactions_rejected_total", rejected) == 2
        assert await runner.call(_pending) == {t.id for t in txs[:3]}

    _with_runner(tmp_path, body)


def test_a_batch_past_the_byte_bound_is_refused_from_there(tmp_path: Path) -> None:
    """On an empty queue that holds two transfers' bytes, a batch of three has its third
    refused with MempoolFull saying the queue's bytes, and the first two admitted."""

    async def body(runner: ChainRunner, net: DevNet) -> None:
        txs = [await runner.call(net.tx, Transfer(A, B, n)) for n in (1, 2, 3)]
        admitter = Admitter(runner, NodeMetrics(), queue_bytes=txs[0].size + txs[1].size)
        admitting = asyncio.create_task(admitter.run())
        outcomes = await admitter.admit_many([(t, None) for t in txs])
        admitting.cancel()
        assert _outcome_names(outcomes) == [None, None, MempoolFull.name]
        assert "admission queue holds" in str(outcomes[2])
        assert await runner.call(_pending) == {txs[0].id, txs[1].id}

    _with_runner(tmp_path, body)


def test_duplicates_and_a_refusal_mid_batch_are_answered_each_in_order(tmp_path: Path) -> None:
    """A batch holding a transaction already in the mempool, a forged one and the same
    transaction twice gets tx_duplicate for both repeats and missing_authority for the forged
    one, in its order; the rest are admitted and handed to subscribers, and the refusal is
    not kept for get_transaction (its caller was told)."""

    async def body(runner: ChainRunner, net: DevNet) -> None:
        metrics = NodeMetrics()
        admitter = Admitter(runner, metrics)
        told: list[SignedTransaction] = []
        admitter.subscribe(told.append)
        admitting = asyncio.create_task(admitter.run())
        earlier = await runner.call(net.tx, Transfer(A, B, 1))
        await admitter.admit(earlier)
        good, last = [await runner.call(net.tx, Transfer(A, B, n)) for n in (2, 3)]
        forged = await runner.call(lambda c: net.tx(c, Transfer(A, B, 4), signers=["bob"]))
        batch = [earlier, good, forged, good, last]
        outcomes = await admitter.admit_many([(t, None) for t in batch])
        admitting.cancel()
        duplicate = "tx_duplicate"
        assert _outcome_names(outcomes) == [duplicate, None, "missing_authority", duplicate, None]
        assert told == [earlier, good, last]
        assert admitter.refusal(forged.id) is None
        assert metrics.registry.get_sample_value("bor_transactions_accepted_total") == 3
        assert await runner.call(_pending) == {earlier.id, good.id, last.id}

    _with_runner(tmp_path, body)


def test_an_empty_batch_is_answered_at_once(tmp_path: Path) -> None:
    """admit_many of nothing returns an empty list without waiting for the queue's task."""

    async def body(runner: ChainRunner, net: DevNet) -> None:
        assert await Admitter(runner, NodeMetrics()).admit_many([]) == []

    _with_runner(tmp_path, body)
