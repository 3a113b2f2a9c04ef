"""/v1/chain/stream over a real websocket: live blocks, filters, contract data decoded, blocks
with their transactions, refusals with their reason and close code, the caps, a plain GET,
and its AsyncAPI document."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from chain.abi import parse_abi
from chain.controller import Chain
from chain.core.execution.actions import Action, Call, SetCode, Stake, Transfer
from chain.core.primitives.types import AccountName
from chain.testing import now_ms
from genesis.testing import DevNet
from node.admission import Admitter
from node.api.http import make_app
from node.api.rpc import Api
from node.api.stream.hub import STREAM_PATH, StreamHub, StreamLimits
from node.metrics import NodeMetrics
from node.runner import ChainRunner, InclusionWatch
from tests.node.api import kv_contract
from tests.node.api.limits import CALL_FUEL, http_limits, stream_limits
from tests.support.wait import until

Client = TestClient[web.Request, web.Application]
WS = aiohttp.ClientWebSocketResponse
A, B, C = AccountName("alice"), AccountName("bob"), AccountName("carol")


class Node:
    def __init__(self, client: Client, runner: ChainRunner, net: DevNet, metrics: NodeMetrics):
        self.client, self.runner, self.net, self.metrics = client, runner, net, metrics

    async def produce(self, *txs: Callable[[Chain], object]) -> None:
        for admit in txs:
            await self.runner.call(admit)
        await self.runner.call(self.net.produce)

    def admit(self, action: Action) -> Callable[[Chain], object]:
        def admit(chain: Chain) -> None:
            chain.admit_transaction(self.net.tx(chain, action), now_ms())

        return admit

    def transfer(self, sender: str, recipient: str) -> Callable[[Chain], object]:
        def admit(chain: Chain) -> None:
            action = Transfer(AccountName(sender), AccountName(recipient), 1)
            chain.admit_transaction(self.net.tx(chain, action), now_ms())

        return admit


Check = Callable[[Node], Awaitable[None]]


def _serve(
    tmp_path: Path, check: Check, limits: StreamLimits | None = None, cors: str = ""
) -> None:
    async def main() -> None:
        net = DevNet.create(1)
        runner = ChainRunner(net.open(tmp_path))
        metrics = NodeMetrics()
        api = Api(runner, metrics, InclusionWatch(), Admitter(runner, metrics), call_fuel=CALL_FUEL)
        hub = StreamHub(runner, limits or stream_limits(), metrics, cors)
        runner.subscribe(hub.chain_updated)
        app = make_app(
            api, metrics, http_limits(max_body_bytes=1 << 16), cors_origin=cors, stream=hub
        )
        client: Client = TestClient(TestServer(app))
        await client.start_server()
        try:
            await check(Node(client, runner, net, metrics))
        finally:
            await client.close()
            runner.close()

    asyncio.run(main())


async def _next(ws: WS) -> dict[str, Any]:
    message = await ws.receive(timeout=5)
    assert message.type is aiohttp.WSMsgType.TEXT, message
    frame: dict[str, Any] = json.loads(message.data)
    return frame


async def _until(ws: WS, kind: str) -> dict[str, Any]:
    while True:
        frame = await _next(ws)
        if frame["type"] == kind:
            return frame


async def _refused(ws: WS) -> tuple[str, int | None]:
    """The error's reason and the close code that followed it."""
    frame = await _next(ws)
    assert frame["type"] == "error", frame
    closing = await ws.receive(timeout=5)
    assert closing.type is aiohttp.WSMsgType.CLOSE, closing
    return frame["reason"], ws.close_code


def test_a_subscriber_gets_each_new_block_and_the_lib(tmp_path: Path) -> None:
    """Subscribed at the head, a client gets a block frame per block produced, in order,
    with the block's header fields and a cursor naming it, then the LIB's move."""

    async def check(node: Node) -> None:
        async with node.client.ws_connect(STREAM_PATH) as ws:
            await ws.send_json({"type": "subscribe", "stream": "blocks", "cursor": None})
            subscribed = await _next(ws)
            assert subscribed["type"] == "subscribed" and subscribed["resume_from"] == 1
            for num in (1, 2, 3):
                await node.produce()
                frame = await _next(ws)
                assert frame["type"] == "block" and frame["block"]["num"] == num
                block = frame["block"]
                assert frame["cursor"] == {"num": num, "id": block["id"]}
                assert set(block) == {
                    "num", "id", "previous", "producer", "slot", "timestamp", "transaction_count"
                }  # fmt: skip
                assert (await _next(ws)) == {"type": "lib", "num": num, "id": block["id"]}
        assert node.metrics.stream_messages._value.get() >= 7

    _serve(tmp_path, check)


def test_filters_select_transactions_and_actions_by_account_and_name(tmp_path: Path) -> None:
    """transactions for bob get the block's transfer to bob only (a recipient matches);
    actions named stake get the stake only; a block with nothing selected sends nothing;
    amounts are assets of the chain's token."""

    async def check(node: Node) -> None:
        async with (
            node.client.ws_connect(STREAM_PATH) as txs,
            node.client.ws_connect(STREAM_PATH) as actions,
        ):
            await txs.send_json(
                {"type": "subscribe", "stream": "transactions", "accounts": ["bob"]}
            )
            await actions.send_json(
                {"type": "subscribe", "stream": "actions", "actions": ["stake"]}
            )
            await _next(txs), await _next(actions)
            await node.produce(node.transfer("alice", "carol"))  # neither selects it
            stake = Stake(A, 5)
            await node.produce(
                node.transfer("alice", "bob"),
                lambda c: c.admit_transaction(node.net.tx(c, stake), now_ms()),
            )
            frame = await _until(txs, "transactions")
            assert frame["type"] == "transactions" and frame["block"]["num"] == 2
            [tx] = frame["transactions"]
            transfer = {"sender": "alice", "recipient": "bob", "amount": "0.0001 BOR", "memo": ""}
            assert tx["actions"] == [{"action": "transfer", "data": transfer}]
            frame = await _until(actions, "actions")
            assert frame["type"] == "actions" and frame["block"]["num"] == 2
            [action] = frame["actions"]
            assert action["name"] == "stake" and action["authorization"] == ["alice"]
            assert action["data"] == {"account": "alice", "amount": "0.0005 BOR"}
            assert action["index"] == 0 and len(action["tx_id"]) == 64

    _serve(tmp_path, check)


def test_contract_data_is_decoded_and_blocks_carry_their_transactions(tmp_path: Path) -> None:
    """An actions subscriber gets the contract's action and event decoded by its ABI beside
    the hex, and after a redeploy with a renamed field, decoded by the new ABI; a blocks
    subscriber that asked for transactions gets each block's transactions in its frame."""
    kv = parse_abi(kv_contract.ABI)
    renamed = kv_contract.ABI.replace('"amount"', '"quantity"')

    def put(n: int) -> Call:
        return Call(A, "put", (B,), kv.encode_action("put", {"id": n, "owner": "bob", "amount": n}))

    async def check(node: Node) -> None:
        async with (
            node.client.ws_connect(STREAM_PATH) as blocks,
            node.client.ws_connect(STREAM_PATH) as actions,
        ):
            await blocks.send_json({"type": "subscribe", "stream": "blocks", "transactions": True})
            await actions.send_json({"type": "subscribe", "stream": "actions", "actions": ["put"]})
            await _next(blocks), await _next(actions)
            await node.produce(node.admit(SetCode(A, kv_contract.wasm(), kv_contract.ABI)))
            await node.produce(node.admit(put(1)))
            await node.produce(node.admit(SetCode(A, kv_contract.wasm(), renamed)))
            await node.produce(node.admit(put(2)))
            seen = [(await _until(actions, "actions"))["actions"][0] for _ in range(2)]
            assert [a["data"] for a in seen] == [
                {"id": 1, "owner": "bob", "amount": 1},
                {"id": 2, "owner": "bob", "quantity": 2},
            ]
            assert [a["events"][0]["data"] for a in seen] == [a["data"] for a in seen]
            assert seen[0]["hex"] == put(1).data.hex() and seen[0]["account"] == "alice"
            frames = [await _until(blocks, "block") for _ in range(4)]
            assert [len(f["block"]["transactions"]) for f in frames] == [1, 1, 1, 1]
            call = frames[1]["block"]["transactions"][0]["actions"][0]
            assert call == {
                "action": "call",
                "data": {
                    "contract": "alice",
                    "action_name": "put",
                    "authorization": ["bob"],
                    "data": put(1).data.hex(),
                },
            }

    _serve(tmp_path, check)


def test_bad_subscriptions_get_an_error_and_1008(tmp_path: Path) -> None:
    """Not JSON, an unknown stream, a bad account name, too many names, an unknown field and
    a second message after subscribing each get an error frame naming the problem, then a
    1008 close."""

    async def check(node: Node) -> None:
        bad: list[tuple[Any, str]] = [
            ("{not json", "not JSON"),
            ({"type": "subscribe", "stream": "votes"}, "'stream' must be one of"),
            ({"type": "subscribe", "stream": "actions", "accounts": ["Bob!"]}, "not an account"),
            ({"type": "subscribe", "stream": "actions", "accounts": ["a"] * 65}, "at most 64"),
            ({"type": "subscribe", "stream": "blocks", "irreversible": True}, "unknown field"),
            ({"type": "subscribe", "stream": "blocks", "cursor": {"num": 1}}, "'cursor' must"),
            ({"type": "subscribe", "stream": "actions", "transactions": True}, "blocks stream"),
        ]
        for message, why in bad:
            async with node.client.ws_connect(STREAM_PATH) as ws:
                if isinstance(message, str):
                    await ws.send_str(message)
                else:
                    await ws.send_json(message)
                reason, code = await _refused(ws)
                assert why in reason and code == 1008
        async with node.client.ws_connect(STREAM_PATH) as ws:
            await ws.send_json({"type": "subscribe", "stream": "blocks"})
            await _next(ws)
            await ws.send_json({"type": "subscribe", "stream": "blocks"})
            reason, code = await _refused(ws)
            assert "one subscription per connection" in reason and code == 1008

    _serve(tmp_path, check)


def test_a_cursor_not_on_the_chain_is_refused(tmp_path: Path) -> None:
    """A cursor whose id is not the chain's block at its number gets "not on this chain"."""

    async def check(node: Node) -> None:
        await node.produce()
        await node.produce()
        cursor = {"num": 1, "id": "00000001" + "ab" * 28}
        async with node.client.ws_connect(STREAM_PATH) as ws:
            await ws.send_json({"type": "subscribe", "stream": "blocks", "cursor": cursor})
            reason, code = await _refused(ws)
            assert "not on this chain" in reason and code == 1008

    _serve(tmp_path, check)


def test_streams_over_the_caps_are_refused_with_1013(tmp_path: Path) -> None:
    """With http-max-streams-per-address = 1, a second stream from the same client gets an
    error naming the option and a 1013 close when it subscribes; once the first closes, a new
    one is served."""

    async def check(node: Node) -> None:
        async with node.client.ws_connect(STREAM_PATH) as first:
            await first.send_json({"type": "subscribe", "stream": "blocks"})
            await _next(first)
            async with node.client.ws_connect(STREAM_PATH) as second:
                await second.send_json({"type": "subscribe", "stream": "blocks"})
                reason, code = await _refused(second)
                assert "(http-max-streams-per-address = 1)" in reason and code == 1013
            assert node.metrics.stream_subscribers._value.get() == 1
        await until(
            lambda: node.metrics.stream_subscribers._value.get() == 0,
            "the server seeing the first one close",
        )
        async with node.client.ws_connect(STREAM_PATH) as third:
            await third.send_json({"type": "subscribe", "stream": "blocks"})
            assert (await _next(third))["type"] == "subscribed"

    _serve(tmp_path, check, stream_limits(max_streams_per_address=1))


def test_a_plain_get_and_a_foreign_page_are_refused_with_json(tmp_path: Path) -> None:
    """A GET without an upgrade gets 426 with the RPC's error object; an upgrade from another
    site's page gets 403 unless the public listener's CORS origin allows it."""

    async def check(node: Node) -> None:
        response = await node.client.get(STREAM_PATH)
        assert response.status == 426 and response.headers["Upgrade"] == "websocket"
        assert (await response.json())["error"]["name"] == "upgrade_required"
        try:
            await node.client.ws_connect(STREAM_PATH, origin="https://evil.example")
        except aiohttp.WSServerHandshakeError as err:
            assert err.status == 403
        else:
            raise AssertionError("a foreign origin was served")
        allowed = await node.client.ws_connect(STREAM_PATH, origin="https://explorer.example")
        await allowed.close()

    _serve(tmp_path, check, cors="https://explorer.example")


def test_the_asyncapi_document_describes_every_message(tmp_path: Path) -> None:
    """/v1/asyncapi.json is an AsyncAPI 3.0 document with the subscribe message and every
    frame the server sends, and /openapi.json points to it."""

    async def check(node: Node) -> None:
        doc = await (await node.client.get("/v1/asyncapi.json")).json()
        assert doc["asyncapi"] == "3.0.0"
        assert doc["channels"]["stream"]["address"] == STREAM_PATH
        assert set(doc["components"]["messages"]) == {
            "subscribe", "subscribed", "block", "transactions", "actions", "undo", "lib",
            "lagged", "error",
        }  # fmt: skip
        openapi = await (await node.client.get("/openapi.json")).json()
        assert "/v1/asyncapi.json" in openapi["info"]["description"]
        assert "/v1/asyncapi.json" in openapi["paths"]
        assert STREAM_PATH not in openapi["paths"]

    _serve(tmp_path, check)


def test_a_client_that_never_subscribes_is_closed(tmp_path: Path) -> None:
    """A connection that sends no subscribe message within the time allowed gets an error
    naming the option and a 1008 close."""

    async def check(node: Node) -> None:
        async with node.client.ws_connect(STREAM_PATH) as ws:
            reason, code = await _refused(ws)
            assert "no subscribe message within 0.2 s" in reason and code == 1008
            assert "http-stream-subscribe-timeout-ms = 200" in reason

    _serve(tmp_path, check, stream_limits(max_streams=1, subscribe_timeout_ms=200))


def test_unsubscribed_sockets_do_not_hold_subscription_places(tmp_path: Path) -> None:
    """With one stream allowed and two unsubscribed sockets per address, a silent socket
    leaves the one place to a subscriber, and a third silent one is refused with 1013 naming
    its own option."""

    async def check(node: Node) -> None:
        async with node.client.ws_connect(STREAM_PATH) as silent:
            async with node.client.ws_connect(STREAM_PATH) as ws:
                await ws.send_json({"type": "subscribe", "stream": "blocks"})
                assert (await _next(ws))["type"] == "subscribed"
                async with (
                    node.client.ws_connect(STREAM_PATH) as second,
                    node.client.ws_connect(STREAM_PATH) as third,
                ):
                    reason, code = await _refused(third)
                    assert "http-max-unsubscribed-streams-per-address = 2" in reason
                    assert code == 1013
                    assert not second.closed
            assert not silent.closed

    limits = stream_limits(max_streams=1, max_unsubscribed_per_address=2)
    _serve(tmp_path, check, limits)


def test_stopping_the_listener_closes_every_stream_at_once(tmp_path: Path) -> None:
    """The listener's shutdown ends a subscribed stream and one still to subscribe with "the
    node is stopping" and 1001, so the node's stop does not wait for its clients."""

    async def check(node: Node) -> None:
        async with (
            node.client.ws_connect(STREAM_PATH) as subscribed,
            node.client.ws_connect(STREAM_PATH) as silent,
        ):
            await subscribed.send_json({"type": "subscribe", "stream": "blocks"})
            await _next(subscribed)
            stopping = asyncio.create_task(node.client.server.close())
            for ws in (subscribed, silent):
                reason, code = await _refused(ws)
                assert reason == "the node is stopping" and code == 1001
            await asyncio.wait_for(stopping, 5)

    _serve(tmp_path, check)
