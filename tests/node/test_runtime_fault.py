"""A fault of this node's contract runtime (``RuntimeFault``: wasmtime failing for a reason
that is no trap) is never taken for a verdict: a peer's block is kept, not rejected, a push is
answered 503, and admission goes on (a fault stands in for the runtime: what is tested is the
handling)."""

from __future__ import annotations

import asyncio
from typing import Any

from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName
from chain.vm.errors import RuntimeFault
from node.admission import Admitter
from node.api.rpc import error_response
from node.metrics import NodeMetrics
from node.network import _push_one
from p2p.service import Outcome

FAULT = RuntimeFault("token::transfer: could not instantiate the contract: no slot")


class _FaultingChain:
    """A chain whose contract runtime fails on this node."""

    def push_block(self, block: Any, now_ms: int) -> Any:
        raise FAULT


class _FaultingRunner:
    """A chain thread whose every call meets a runtime fault."""

    def __init__(self) -> None:
        self.calls = 0

    async def call(self, fn: Any, *args: Any) -> Any:
        self.calls += 1
        raise FAULT


def _stx(n: int) -> SignedTransaction:
    tx = Transaction(2_000_000_000, 0, 0, (Transfer(AccountName("alice"), AccountName("bob"), n),))
    return SignedTransaction.sign(tx, b"chain", [PrivateKey(b"\x01" * 32)])


def test_a_block_that_meets_a_runtime_fault_is_kept_not_rejected() -> None:
    """A peer's block whose application met a runtime fault is reported ADDED (kept in the
    fork database, the peer not struck), never INVALID."""
    result = _push_one(_FaultingChain(), _FakeBlock(), 0)  # type: ignore[arg-type]
    assert result.outcome == Outcome.ADDED
    assert "could not instantiate" in result.detail


class _FakeBlock:
    num = 7
    id = b"\x07" * 32


def test_a_runtime_fault_is_answered_503_with_its_reason() -> None:
    """The RPC answers a runtime fault with 503 node_fault and the reason, not a 500 or a
    4xx verdict on the request."""
    status, body = error_response(FAULT)
    assert status == 503
    assert body["error"] == {"name": "node_fault", "what": str(FAULT)}


def test_admission_survives_a_runtime_fault() -> None:
    """A batch that meets a runtime fault gives an RPC caller the fault and a peer a refusal
    for now (mempool_full), and the admission task goes on to the next batch."""

    async def body() -> None:
        runner = _FaultingRunner()
        admitter = Admitter(runner, NodeMetrics())  # type: ignore[arg-type]
        task = asyncio.create_task(admitter.run())
        try:
            for n in (1, 2):
                try:
                    await admitter.admit(_stx(n))
                except RuntimeFault as err:
                    assert err is FAULT
                else:
                    raise AssertionError("the fault was not passed on")
            errors = await admitter.admit_relayed([_stx(3)])
            assert [e.name if e else None for e in errors] == ["mempool_full"]
            assert runner.calls == 3
            assert not task.done()
        finally:
            task.cancel()

    asyncio.run(asyncio.wait_for(body(), 10))
