"""The HTTP RPC on a real chain and LevelDB store, served by aiohttp on loopback."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from chain.actions import Action, Transfer
from chain.block import SignedBlock
from chain.controller import Chain
from chain.testing import DevNet
from chain.transaction import SignedTransaction
from chain.types import AccountName
from node.admission import Admitter
from node.http import make_app
from node.metrics import NodeMetrics
from node.producer import ProducerLoop
from node.rpc import Api, NetworkApi
from node.runner import ChainRunner, InclusionWatch

A, B = AccountName("alice"), AccountName("bob")
Client = TestClient[web.Request, web.Application]


@dataclass
class Rig:
    """A node's RPC on loopback over a real chain; the test reaches the chain only through
    the runner, as the node does."""

    client: Client
    api: Api
    net: DevNet
    chain: Chain
    runner: ChainRunner

    async def tx(self, *actions: Action, **kwargs: Any) -> SignedTransaction:
        return await self.runner.call(self.net.tx, self.chain, *actions, **kwargs)

    async def produce(self) -> SignedBlock:
        block = await self.runner.call(self.net.produce, self.chain)
        self.api.committed([block])
        return block

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        response = await self.client.post(path, json=body)
        return response.status, await response.json()


Scenario = Callable[[Rig], Awaitable[None]]


def _run(
    tmp_path: Path,
    scenario: Scenario,
    net: DevNet | None = None,
    wrap: Callable[[Chain, int], Chain] | None = None,
    network: NetworkApi | None = None,
    **api_options: Any,
) -> None:
    async def main() -> None:
        devnet = net or DevNet.create(1)
        chain = devnet.open(tmp_path)
        runner = ChainRunner(chain)
        if wrap is not None:
            runner.chain = wrap(chain, await runner.call(threading.get_ident))
        metrics, watch = NodeMetrics(), InclusionWatch()
        admitter = Admitter(runner, metrics)
        api = Api(runner, metrics, watch, admitter, network, **api_options)
        client = TestClient(TestServer(make_app(api, metrics, 1 << 16)))
        await client.start_server()
        admission = asyncio.create_task(admitter.run())
        reads = asyncio.create_task(api.run())
        try:
            await scenario(Rig(client, api, devnet, chain, runner))
        finally:
            admission.cancel()
            reads.cancel()
            await client.close()
            runner.close()
            chain.store.close()

    asyncio.run(main())


def _body(stx: SignedTransaction, **extra: Any) -> dict[str, Any]:
    return {"packed_trx": stx.packed.hex(), "signatures": [s.hex() for s in stx.signatures]} | extra


def test_get_info_block_account(tmp_path: Path) -> None:
    """get_info, get_block (by number and by id), get_account and get_producers answer a
    produced chain, by POST and by GET."""

    async def scenario(rig: Rig) -> None:
        await rig.produce()
        status, info = await rig.post("/v1/chain/get_info", {})
        assert status == 200 and info["head_block_num"] == 1
        assert info["chain_id"] == rig.net.genesis.to_initial_state().chain_id.hex()
        assert info["last_irreversible_block_num"] == 1
        assert info["last_irreversible_block_id"] == info["head_block_id"]
        status, block = await rig.post("/v1/chain/get_block", {"block_num_or_id": 1})
        assert status == 200 and block["id"] == info["head_block_id"]
        by_id = await rig.post("/v1/chain/get_block", {"block_num_or_id": block["id"]})
        assert by_id == (200, block)
        status, account = await rig.post("/v1/chain/get_account", {"account_name": "bob"})
        assert status == 200 and account["balance"] == 10**10
        status, prods = await rig.post("/v1/chain/get_producers", {})
        assert prods["active"]["producers"][0]["producer_name"] == "producera"
        response = await rig.client.get("/v1/chain/get_info")
        assert response.status == 200

    _run(tmp_path, scenario)


def test_push_modes_and_inclusion(tmp_path: Path) -> None:
    """sync push is accepted, commit push resolves with its block, async push is admitted in
    the background, and /metrics counts them."""

    async def scenario(rig: Rig) -> None:
        stx = await rig.tx(Transfer(A, B, 5))
        status, result = await rig.post("/v1/chain/push_transaction", _body(stx))
        assert (status, result["status"]) == (200, "accepted")
        producer = ProducerLoop(
            rig.runner,
            ("producera",),
            {rig.net.keys["producera"].public_key: rig.net.keys["producera"]},
            rig.api.metrics,
            lambda b: rig.api.watch.included([t.id for t in b.transactions], b.num),
        )
        committed = await rig.tx(Transfer(A, B, 6))
        push = asyncio.create_task(
            rig.post("/v1/chain/push_transaction", _body(committed, mode="commit"))
        )
        await asyncio.sleep(0.05)
        block = await producer.maybe_produce(rig.runner.view.head.slot + 1)
        assert block is not None
        status, result = await push
        assert result == {
            "transaction_id": committed.id.hex(),
            "status": "included",
            "block_num": block.num,
        }
        status, tx = await rig.post("/v1/chain/get_transaction", {"id": stx.id.hex()})
        assert (status, tx["block_num"], tx["status"]) == (200, block.num, "irreversible")
        status, account = await rig.post("/v1/chain/get_account", {"account_name": "bob"})
        assert account["balance"] == 10**10 + 11
        asynced = await rig.tx(Transfer(A, B, 7))
        status, result = await rig.post("/v1/chain/push_transaction", _body(asynced, mode="async"))
        assert (status, result["status"]) == (200, "submitted")
        for _ in range(100):  # the queued transaction is admitted in the background
            if rig.runner.view.mempool_size == 1:
                break
            await asyncio.sleep(0.01)
        status, pending = await rig.post("/v1/chain/get_transaction", {"id": asynced.id.hex()})
        assert (status, pending["status"]) == (200, "pending")
        metrics = await (await rig.client.get("/metrics")).text()
        assert "bor_head_block_num 1.0" in metrics
        assert "bor_mempool_transactions 1.0" in metrics
        assert "bor_transactions_accepted_total 3.0" in metrics

    _run(tmp_path, scenario)


def test_bad_requests_get_named_4xx_and_change_nothing(tmp_path: Path) -> None:
    """Malformed, unsigned, unaffordable or duplicate pushes and bad reads get their named 4xx,
    and leave the state and the mempool as they were (but for the one good push)."""

    async def scenario(rig: Rig) -> None:
        good = await rig.tx(Transfer(A, B, 1))
        wrong_signer = await rig.tx(Transfer(A, B, 1), signers=["bob"])
        cases: list[tuple[Any, int, str]] = [
            ({"packed_trx": "zz", "signatures": ["00"]}, 400, "bad_field"),
            ({"packed_trx": "9401", "signatures": ["00" * 65]}, 400, "malformed_transaction"),
            (_body(good) | {"signatures": ["00" * 65]}, 401, "bad_signature"),
            (_body(wrong_signer), 401, "missing_authority"),
            (_body(await rig.tx(Transfer(A, B, 10**15))), 402, "insufficient_funds"),
            (_body(await rig.tx(Transfer(A, AccountName("nobody"), 1))), 404, "unknown_account"),
            (_body(await rig.tx(Transfer(A, B, 1), expiration=1)), 400, "tx_expired"),
            (_body(good, mode="sometimes"), 400, "bad_field"),
            ({"packed_trx": "00" * 9000, "signatures": ["00"]}, 413, "tx_too_large"),
        ]
        before = await rig.post("/v1/chain/get_account", {"account_name": "alice"})
        for body, status, name in cases:
            got_status, got = await rig.post("/v1/chain/push_transaction", body)
            assert (got_status, got["error"]["name"]) == (status, name), body
        await rig.post("/v1/chain/push_transaction", _body(good))
        status, dup = await rig.post("/v1/chain/push_transaction", _body(good))
        assert (status, dup["error"]["name"]) == (409, "tx_duplicate")
        response = await rig.client.post("/v1/chain/get_block", data=b"{nope")
        assert response.status == 400
        assert (await response.json())["error"]["name"] == "malformed_json"
        status, missing = await rig.post("/v1/chain/get_block", {"block_num_or_id": 99})
        assert (status, missing["error"]["name"]) == (404, "not_found")
        status, _ = await rig.post("/v1/chain/get_account", {"account_name": "Nope!"})
        assert status == 400
        huge = await rig.client.post("/v1/chain/get_info", data=b"x" * (1 << 17))
        assert huge.status == 413
        assert await rig.post("/v1/chain/get_account", {"account_name": "alice"}) == before
        pending = await rig.runner.call(lambda: [p.tx.id for p in rig.chain.mempool.pending()])
        assert pending == [good.id]  # only the one good transaction

    _run(tmp_path, scenario)


def test_openapi_describes_every_route(tmp_path: Path) -> None:
    """/openapi.json lists every route, /metrics, and push_transaction's parameters."""

    async def scenario(rig: Rig) -> None:
        doc = await (await rig.client.get("/openapi.json")).json()
        assert set(rig.api.routes) <= set(doc["paths"])
        assert "/metrics" in doc["paths"]
        params = doc["paths"]["/v1/chain/push_transaction"]["post"]["requestBody"]
        assert "mode" in params["content"]["application/json"]["schema"]["properties"]

    _run(tmp_path, scenario)
