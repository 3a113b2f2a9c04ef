"""``Client`` against a real aiohttp server on loopback: every way a call can fail ends as
an ``RpcError`` (the node answered; its class by status) or ``NodeUnreachable`` (it did not),
with the fields a user needs."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from bor_client.aio import AsyncClient
from bor_client.client import Client
from bor_client.errors import BadUrl, MalformedResponse, NodeUnreachable, NotFound, RpcError


async def _json_error(request: web.Request) -> web.Response:
    body = {
        "code": 404,
        "message": "no block 9",
        "error": {"name": "not_found", "what": "no block 9"},
    }
    return web.json_response(body, status=404)


async def _text_500(request: web.Request) -> web.Response:
    return web.Response(status=500, text="<html>oops</html>", content_type="text/html")


async def _no_error_field(request: web.Request) -> web.Response:
    return web.json_response({"message": "nope"}, status=400)


async def _not_json_200(request: web.Request) -> web.Response:
    return web.Response(status=200, text="hello")


# Set by the test once the client has given up: until then ``/slow`` does not answer.
_ANSWER_SLOW = threading.Event()


async def _slow(request: web.Request) -> web.Response:
    await asyncio.to_thread(_ANSWER_SLOW.wait, 10)
    return web.json_response({})


async def _echo(request: web.Request) -> web.Response:
    return web.json_response({"got": await request.json()})


async def _chunked(request: web.Request) -> web.StreamResponse:
    """A 400 KB JSON answer written in 40 pieces, with pauses between them."""
    body = json.dumps({"rows": ["x" * 1000] * 400}).encode()
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    for i in range(0, len(body), 10_000):
        await response.write(body[i : i + 10_000])
        await asyncio.sleep(0)  # let the server send each piece on its own
    await response.write_eof()
    return response


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """A real HTTP server on a loopback port, run by a thread of its own."""
    app = web.Application()
    for path, handler in [
        ("/json_error", _json_error),
        ("/text_500", _text_500),
        ("/no_error_field", _no_error_field),
        ("/not_json", _not_json_200),
        ("/slow", _slow),
        ("/echo", _echo),
        ("/chunked", _chunked),
    ]:
        app.router.add_post(path, handler)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_an_answer_is_parsed(url: str) -> None:
    """A 200 JSON answer is returned as data, and the body was sent as JSON."""
    assert Client(url).request("/echo", {"a": 1}) == {"got": {"a": 1}}


def test_a_json_error_keeps_the_nodes_name_and_text(url: str) -> None:
    """A JSON error body becomes the status's class (NotFound for 404) with the node's status,
    error name and text."""
    with pytest.raises(NotFound) as caught:
        Client(url).request("/json_error")
    assert (caught.value.status, caught.value.name, caught.value.what) == (
        404,
        "not_found",
        "no block 9",
    )


def test_a_non_json_500_is_an_http_error(url: str) -> None:
    """A non-JSON 500 becomes RpcError named http_error with the HTTP reason."""
    with pytest.raises(RpcError) as caught:
        Client(url).request("/text_500")
    assert (caught.value.status, caught.value.name) == (500, "http_error")
    assert caught.value.what == "Internal Server Error"


def test_an_error_body_without_error_is_an_http_error(url: str) -> None:
    """A JSON body lacking ``error`` becomes RpcError named http_error."""
    with pytest.raises(RpcError) as caught:
        Client(url).request("/no_error_field")
    assert (caught.value.status, caught.value.name, caught.value.what) == (
        400,
        "http_error",
        "Bad Request",
    )


def test_a_200_that_is_not_json_is_a_malformed_response(url: str) -> None:
    """A 200 whose body is not JSON becomes MalformedResponse, not a ValueError."""
    with pytest.raises(MalformedResponse) as caught:
        Client(url).request("/not_json")
    assert (caught.value.status, caught.value.name) == (200, "malformed_response")


def test_a_refused_connection_is_unreachable() -> None:
    """Nothing listening on the port: NodeUnreachable naming the node's address."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the call: nobody listens there
    with pytest.raises(NodeUnreachable, match=f"127.0.0.1:{port}"):
        Client(f"http://127.0.0.1:{port}").request("/v1/chain/get_info")


def test_a_timeout_is_unreachable(url: str) -> None:
    """A node that does not answer within the timeout: NodeUnreachable saying it timed out."""
    _ANSWER_SLOW.clear()
    try:
        with pytest.raises(NodeUnreachable, match="timed out"):
            Client(url, timeout=0.2).request("/slow")
    finally:
        _ANSWER_SLOW.set()


@pytest.mark.parametrize(
    "bad", ["foo", "http://127.0.0.1:notaport", "http://h:0", "http://h:65536", "http://[::1"]
)
def test_a_url_urllib_cannot_call_is_refused_at_construction(bad: str) -> None:
    """No scheme, no host or a port that is not 1..65535: BadUrl naming it, before any call."""
    with pytest.raises(BadUrl, match="node URL"):
        Client(bad)


def test_the_async_client_reads_a_large_answer_whole(url: str) -> None:
    """An answer that arrives in many pieces is read to its end, not to its first pieces."""

    async def go() -> Any:
        async with AsyncClient(url) as client:
            return await client.request("/chunked")

    assert asyncio.run(go())["rows"] == ["x" * 1000] * 400
