"""The HTTP RPC on a real chain and LevelDB store, served by aiohttp on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from chain.actions import Transfer
from chain.testing import now_ms
from chain.transaction import SignedTransaction
from chain.types import AccountName
from genesis.testing import DevNet
from node.admission import Admitter
from node.http import make_app
from node.metrics import NodeMetrics
from node.producer import ProducerLoop
from node.rpc import Api
from node.runner import ChainRunner, InclusionWatch

A, B = AccountName("alice"), AccountName("bob")
Client = TestClient[web.Request, web.Application]
Scenario = Callable[[Client, Api, DevNet], Awaitable[None]]


def _run(tmp_path: Path, scenario: Scenario) -> None:
    async def main() -> None:
        net = DevNet.create(1)
        chain = net.open(tmp_path)
        runner = ChainRunner(chain)
        metrics, watch = NodeMetrics(), InclusionWatch()
        admitter = Admitter(runner, metrics)
        api = Api(runner, metrics, watch, admitter)
        client = TestClient(TestServer(make_app(api, metrics, 1 << 16)))
        await client.start_server()
        admission = asyncio.create_task(admitter.run())
        try:
            await scenario(client, api, net)
        finally:
            admission.cancel()
            await client.close()
            runner.close()
            chain.store.close()

    asyncio.run(main())


def _body(stx: SignedTransaction, **extra: Any) -> dict[str, Any]:
    return {"packed_trx": stx.packed.hex(), "signatures": [s.hex() for s in stx.signatures]} | extra


async def _post(client: Client, path: str, body: Any) -> tuple[int, Any]:
    response = await client.post(path, json=body)
    return response.status, await response.json()


def test_get_info_block_account(tmp_path: Path) -> None:
    async def scenario(client: Client, api: Api, net: DevNet) -> None:
        net.produce(api.chain)
        status, info = await _post(client, "/v1/chain/get_info", {})
        assert status == 200 and info["head_block_num"] == 1
        assert info["chain_id"] == api.chain.chain_id.hex()
        assert info["last_irreversible_block_num"] == 1
        status, block = await _post(client, "/v1/chain/get_block", {"block_num_or_id": 1})
        assert status == 200 and block["id"] == info["head_block_id"]
        by_id = await _post(client, "/v1/chain/get_block", {"block_num_or_id": block["id"]})
        assert by_id == (200, block)
        status, account = await _post(client, "/v1/chain/get_account", {"account_name": "bob"})
        assert status == 200 and account["balance"] == 10**10
        status, prods = await _post(client, "/v1/chain/get_producers", {})
        assert prods["active"]["producers"][0]["producer_name"] == "producera"
        response = await client.get("/v1/chain/get_info")
        assert response.status == 200

    _run(tmp_path, scenario)


def test_push_modes_and_inclusion(tmp_path: Path) -> None:
    async def scenario(client: Client, api: Api, net: DevNet) -> None:
        chain = api.chain
        stx = net.tx(chain, Transfer(A, B, 5))
        status, result = await _post(client, "/v1/chain/push_transaction", _body(stx))
        assert (status, result["status"]) == (200, "accepted")
        producer = ProducerLoop(
            api.runner,
            ("producera",),
            {net.keys["producera"].public_key: net.keys["producera"]},
            api.metrics,
            lambda b: api.watch.included([t.id for t in b.transactions], b.num),
        )
        committed = net.tx(chain, Transfer(A, B, 6))
        push = asyncio.create_task(
            _post(client, "/v1/chain/push_transaction", _body(committed, mode="commit"))
        )
        await asyncio.sleep(0.05)
        block = await producer.maybe_produce(chain.head.slot + 1)
        assert block is not None
        status, result = await push
        assert result == {
            "transaction_id": committed.id.hex(),
            "status": "included",
            "block_num": block.num,
        }
        status, tx = await _post(client, "/v1/chain/get_transaction", {"id": stx.id.hex()})
        assert status == 200 and tx["block_num"] == block.num
        status, account = await _post(client, "/v1/chain/get_account", {"account_name": "bob"})
        assert account["balance"] == 10**10 + 11
        asynced = net.tx(chain, Transfer(A, B, 7))
        status, result = await _post(
            client, "/v1/chain/push_transaction", _body(asynced, mode="async")
        )
        assert (status, result["status"]) == (200, "submitted")
        for _ in range(100):  # the queued transaction is admitted in the background
            if asynced.id in chain.mempool:
                break
            await asyncio.sleep(0.01)
        assert asynced.id in chain.mempool
        metrics = await (await client.get("/metrics")).text()
        assert "bor_head_block_num 1.0" in metrics
        assert "bor_transactions_accepted_total 3.0" in metrics

    _run(tmp_path, scenario)


def test_bad_requests_get_named_4xx_and_change_nothing(tmp_path: Path) -> None:
    async def scenario(client: Client, api: Api, net: DevNet) -> None:
        chain = api.chain
        good = net.tx(chain, Transfer(A, B, 1))
        wrong_signer = net.tx(chain, Transfer(A, B, 1), signers=["bob"])
        cases: list[tuple[Any, int, str]] = [
            ({"packed_trx": "zz", "signatures": ["00"]}, 400, "bad_field"),
            ({"packed_trx": "9401", "signatures": ["00" * 65]}, 400, "malformed_transaction"),
            (_body(good) | {"signatures": ["00" * 65]}, 401, "bad_signature"),
            (_body(wrong_signer), 401, "missing_authority"),
            (_body(net.tx(chain, Transfer(A, B, 10**15))), 402, "insufficient_funds"),
            (_body(net.tx(chain, Transfer(A, AccountName("nobody"), 1))), 404, "unknown_account"),
            (_body(net.tx(chain, Transfer(A, B, 1), expiration=1)), 400, "tx_expired"),
            (_body(good, mode="sometimes"), 400, "bad_field"),
            ({"packed_trx": "00" * 9000, "signatures": ["00"]}, 413, "tx_too_large"),
        ]
        before = await _post(client, "/v1/chain/get_account", {"account_name": "alice"})
        for body, status, name in cases:
            got_status, got = await _post(client, "/v1/chain/push_transaction", body)
            assert (got_status, got["error"]["name"]) == (status, name), body
        await _post(client, "/v1/chain/push_transaction", _body(good))
        status, dup = await _post(client, "/v1/chain/push_transaction", _body(good))
        assert (status, dup["error"]["name"]) == (409, "tx_duplicate")
        response = await client.post("/v1/chain/get_block", data=b"{nope")
        assert response.status == 400
        assert (await response.json())["error"]["name"] == "malformed_json"
        status, missing = await _post(client, "/v1/chain/get_block", {"block_num_or_id": 99})
        assert (status, missing["error"]["name"]) == (404, "not_found")
        status, _ = await _post(client, "/v1/chain/get_account", {"account_name": "Nope!"})
        assert status == 400
        huge = await client.post("/v1/chain/get_info", data=b"x" * (1 << 17))
        assert huge.status == 413
        assert await _post(client, "/v1/chain/get_account", {"account_name": "alice"}) == before
        assert len(api.chain.mempool) == 1  # only the one good transaction
        net_now = now_ms()
        assert api.chain.head.num == 0 and net_now > 0

    _run(tmp_path, scenario)


def test_openapi_describes_every_route(tmp_path: Path) -> None:
    async def scenario(client: Client, api: Api, net: DevNet) -> None:
        doc = await (await client.get("/openapi.json")).json()
        assert set(api.routes) <= set(doc["paths"])
        assert "/metrics" in doc["paths"]
        params = doc["paths"]["/v1/chain/push_transaction"]["post"]["requestBody"]
        assert "mode" in params["content"]["application/json"]["schema"]["properties"]

    _run(tmp_path, scenario)
