"""The HTTP shell's limits and listeners, served as the node serves them (``node.api.http.serve``:
real sockets on loopback): requests in flight and time per request answered with JSON 503 and
504, slow-drip senders cut off, 405s whose Allow is the documented methods, admin routes only
on the admin listener (behind its token when one is set), CORS only when configured; on
both event loops the node can run on."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from chain.controller import Chain
from genesis.testing import DevNet
from node.admission import Admitter
from node.api.http import make_admin_app, make_app, serve
from node.api.listener import HttpLimits
from node.api.rpc import Api
from node.metrics import NodeMetrics
from node.process import eventloop
from node.runner import ChainRunner, InclusionWatch
from tests.node.api.limits import CALL_FUEL, http_limits
from tests.node.api.test_rpc import FakeNetwork
from tests.support.wait import SLOWDOWN, pace, until

ALICE = {"account_name": "alice"}


@pytest.fixture(autouse=True, params=[eventloop.UVLOOP, eventloop.ASYNCIO])
def loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test on uvloop, the node's loop, and on asyncio's (BOR_EVENT_LOOP=asyncio)."""
    monkeypatch.setenv("BOR_EVENT_LOOP", str(request.param))
    return str(request.param)


@dataclass
class Served:
    url: str
    admin_url: str
    port: int
    runner: ChainRunner
    network: FakeNetwork
    http: aiohttp.ClientSession

    async def post(self, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        async with self.http.post(self.url + path, json=body or {}, **kwargs) as response:
            return response.status, await response.json()


Check = Callable[[Served], Awaitable[None]]


def _port(runner: web.AppRunner) -> int:
    return int(runner.addresses[0][1])


def _serve(
    tmp_path: Path, limits: HttpLimits, check: Check, cors_origin: str = "", token: str = ""
) -> None:
    async def main() -> None:
        chain = DevNet.create(1).open(tmp_path)
        runner = ChainRunner(chain)
        metrics, network = NodeMetrics(), FakeNetwork()
        api = Api(
            runner,
            metrics,
            InclusionWatch(),
            Admitter(runner, metrics),
            network,
            call_fuel=CALL_FUEL,
        )
        public_app = make_app(api, metrics, limits, cors_origin=cors_origin)
        public = await serve(public_app, "127.0.0.1", 0, limits)
        admin = await serve(make_admin_app(api, limits, token), "127.0.0.1", 0, limits)
        reads = asyncio.create_task(api.run())
        try:
            async with aiohttp.ClientSession() as http:
                port = _port(public)
                url, admin_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{_port(admin)}"
                await check(Served(url, admin_url, port, runner, network, http))
        finally:
            reads.cancel()
            await public.cleanup()
            await admin.cleanup()
            runner.close()

    eventloop.run(main())  # on the loop BOR_EVENT_LOOP names (the fixture sets it)


async def _hold_chain(runner: ChainRunner) -> tuple[threading.Event, asyncio.Task[bool]]:
    """Keep the chain thread busy until the returned event is set; return once it is."""
    entered, gate = threading.Event(), threading.Event()

    def hold(_: Chain) -> bool:
        entered.set()
        return gate.wait(10)

    blocker = asyncio.create_task(runner.call(hold))
    assert await asyncio.to_thread(entered.wait, 5 * SLOWDOWN), "the chain thread held"
    return gate, blocker


def test_requests_beyond_the_in_flight_limit_get_503_at_once(tmp_path: Path) -> None:
    """With two requests in flight (waiting for a held chain thread), a third is answered
    503 busy at once; the two are answered once the chain is free."""

    async def check(s: Served) -> None:
        gate, blocker = await _hold_chain(s.runner)
        held = [asyncio.create_task(s.post("/v1/chain/get_account", ALICE)) for _ in range(2)]
        answers: list[tuple[int, Any]] = []

        async def busy() -> bool:  # get_info needs no chain thread: 200 until both are in
            answers.append(await s.post("/v1/chain/get_info"))
            return answers[-1][0] != 200

        await until(busy, "a request refused")
        assert not any(h.done() for h in held), "answered at once, not after the chain"
        status, refused = answers[-1]
        assert (status, refused["error"]["name"]) == (503, "busy")
        assert "in flight" in refused["error"]["what"]
        gate.set()
        await blocker
        assert [status for status, _ in await asyncio.gather(*held)] == [200, 200]
        assert (await s.post("/v1/chain/get_info"))[0] == 200

    _serve(tmp_path, http_limits(max_in_flight=2), check)


def test_an_answer_over_the_time_limit_gets_504(tmp_path: Path) -> None:
    """A read that waits for a held chain thread past the time per request is answered 504
    timeout at that time; the node answers normally afterwards."""

    async def check(s: Served) -> None:
        gate, blocker = await _hold_chain(s.runner)
        started = time.monotonic()
        status, answer = await s.post("/v1/chain/get_account", ALICE)
        elapsed = time.monotonic() - started
        assert (status, answer["error"]["name"]) == (504, "timeout")
        assert elapsed >= limits.max_response_s, "not before the time per request"
        assert not blocker.done(), "at the time limit, not once the chain was free"
        gate.set()
        await blocker
        assert (await s.post("/v1/chain/get_account", ALICE))[0] == 200

    limits = http_limits(max_response_s=0.3)
    _serve(tmp_path, limits, check)


async def _drip(port: int, head: bytes, drip: bytes, every_s: float, limit_s: float) -> bytes:
    """Send ``head``, then ``drip`` a byte every ``every_s`` until the server closes the
    connection (returns all it sent back) or ``limit_s`` passes (raises)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = asyncio.create_task(reader.read())  # to EOF: the server closing
    try:
        writer.write(head)
        deadline = time.monotonic() + limit_s
        for byte in drip:
            if answer.done():
                break
            assert time.monotonic() < deadline, "the slow sender was not cut off"
            try:
                writer.write(bytes([byte]))
                await writer.drain()
            except ConnectionError:
                break
            await pace(every_s)
        return await asyncio.wait_for(answer, limit_s)
    finally:
        writer.close()


def test_slow_drip_senders_are_cut_off(tmp_path: Path) -> None:
    """A header sent a byte at a time, an idle connection, and a body sent a byte at a time
    are each disconnected within the read timeout (the body one after a 408 JSON answer);
    an honest client on a kept-alive connection is served meanwhile."""

    limits = http_limits(read_timeout_s=0.5)
    # A drip of 1,000 bytes at 0.05 s takes 50 s: cut within a few read timeouts, it was the
    # timeout that cut it (``_drip`` raises past ``cut``).
    cut = 6 * limits.read_timeout_s * SLOWDOWN

    async def check(s: Served) -> None:
        header = b"POST /v1/node/health HTTP/1.1\r\nHost: x\r\nX-Slow: "
        assert await _drip(s.port, b"", header + b"a" * 1000, 0.05, cut) == b""
        started = time.monotonic()
        assert await _drip(s.port, b"", b"", 0, cut) == b""  # idle: never sends
        assert time.monotonic() - started >= 0.8 * limits.read_timeout_s, "not before it"
        head = b"POST /v1/node/health HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
        answer = await _drip(s.port, head, b"{" + b" " * 999, 0.05, cut)
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b'"name":"timeout"' in answer and b"application/json" in answer
        for _ in range(3):  # one kept-alive session
            assert (await s.post("/v1/node/health"))[0] == 200

    _serve(tmp_path, limits, check)


def test_a_405_allows_exactly_the_documented_methods(tmp_path: Path) -> None:
    """For every path of both listeners, each method the OpenAPI document does not list is
    answered 405 with an Allow header naming exactly the documented ones."""

    async def check(s: Served) -> None:
        for base in (s.url, s.admin_url):
            async with s.http.get(base + "/openapi.json") as response:
                doc = await response.json()
            for path, item in doc["paths"].items():
                documented = {method.upper() for method in item}
                for method in {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"}:
                    if method in documented:
                        continue
                    async with s.http.request(method, base + path) as response:
                        assert response.status == 405, (method, path)
                        allow = {m.strip() for m in response.headers["Allow"].split(",")}
                        assert allow == documented, (method, path)

    _serve(tmp_path, http_limits(), check)


def test_admin_routes_are_served_only_by_the_admin_listener(tmp_path: Path) -> None:
    """The public listener answers 404 for /v1/net/connect and /v1/net/disconnect and dials
    nothing; the admin listener serves them, and serves no public route."""

    async def check(s: Served) -> None:
        address = {"address": "127.0.0.1:9876"}
        status, answer = await s.post("/v1/net/connect", address)
        assert (status, answer["error"]["name"]) == (404, "not_found")
        assert (await s.post("/v1/net/disconnect", {"peer": "p1"}))[0] == 404
        assert s.network.dialled == []
        async with s.http.post(s.admin_url + "/v1/net/connect", json=address) as response:
            assert response.status == 200
        assert s.network.dialled == [("127.0.0.1", 9876)]
        async with s.http.post(s.admin_url + "/v1/chain/get_info", json={}) as response:
            assert response.status == 404

    _serve(tmp_path, http_limits(), check)


def test_the_admin_token_is_required_when_set(tmp_path: Path) -> None:
    """With an admin token, the admin listener answers 401 without it or with a wrong one,
    and serves requests that carry it; its document says so."""

    async def check(s: Served) -> None:
        connect = s.admin_url + "/v1/net/connect"
        body = {"address": "127.0.0.1:9876"}
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "s3cret"}):
            async with s.http.post(connect, json=body, headers=headers) as response:
                assert response.status == 401
                assert (await response.json())["error"]["name"] == "unauthorized"
        assert s.network.dialled == []
        good = {"Authorization": "Bearer s3cret"}
        async with s.http.post(connect, json=body, headers=good) as response:
            assert response.status == 200
        async with s.http.get(s.admin_url + "/openapi.json", headers=good) as response:
            assert (await response.json())["security"] == [{"admin": []}]

    _serve(tmp_path, http_limits(), check, token="s3cret")


def test_cors_headers_only_when_configured(tmp_path: Path) -> None:
    """With an origin configured, answers carry it and OPTIONS preflights are answered (and
    documented); without one, neither."""
    origin = "https://explorer.example"

    async def configured(s: Served) -> None:
        async with s.http.post(s.url + "/v1/chain/get_info", json={}) as response:
            assert response.headers["Access-Control-Allow-Origin"] == origin
        async with s.http.options(s.url + "/v1/chain/get_block") as response:
            assert response.status == 204
            assert response.headers["Access-Control-Allow-Methods"] == "POST"
            assert response.headers["Access-Control-Allow-Origin"] == origin
        async with s.http.get(s.url + "/openapi.json") as response:
            assert "options" in (await response.json())["paths"]["/v1/chain/get_block"]

    async def off(s: Served) -> None:
        async with s.http.post(s.url + "/v1/chain/get_info", json={}) as response:
            assert "Access-Control-Allow-Origin" not in response.headers
        async with s.http.options(s.url + "/v1/chain/get_block") as response:
            assert response.status == 405

    _serve(tmp_path / "on", http_limits(), configured, cors_origin=origin)
    _serve(tmp_path / "off", http_limits(), off)
