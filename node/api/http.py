"""The aiohttp shell around ``Api``: JSON in and out, limits, /metrics and /openapi.json.

Two listeners share the one ``Api``: the public RPC (reads, pushes, /metrics) and the admin
listener, which alone serves the routes that change the node (``Route.admin``). Every answer
is JSON, errors included: aiohttp's own (no such path, method not allowed, body too large)
are turned into the error object here, and nothing a client sends reaches a handler
unchecked (``node.api.fields``).

Limits, after nodeos's ``http-max-*``: a body size; requests in flight (beyond it, 503 at
once); a time per request (504); and slow senders are cut off: a connection must deliver a
request's header within ``read_timeout_s`` of connecting or of its last answer (aiohttp's
keep-alive timer, which runs from the connection's start and is not pushed back by the bytes
that trickle in) and its body within ``read_timeout_s`` of the header (408, then closed).
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import ipaddress
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from node.api.fields import parse_fields
from node.api.listener import GuardedSite, HttpLimits
from node.api.openapi import Document, openapi_document, served_methods
from node.api.routes import Route
from node.api.rpc import SERVER_VERSION, Api, EncodedJson, RpcError, error_response, log
from node.api.stream.asyncapi import ASYNCAPI_PATH, asyncapi_document
from node.api.stream.hub import STREAM_PATH, StreamHub
from node.api.views import dumps
from node.errors import NodeError
from node.metrics import NodeMetrics

# Rendering /metrics costs ~1 ms (five times any other read), and a scrape every second is
# already more than Prometheus does: scrapes closer together than this share one rendering.
METRICS_TTL_S = 1.0
# Answers up to this size go out outside the budget of bytes in flight: their memory is
# bounded by the connection caps, and an honest client's get_info is never refused because
# others download blocks.
UNBUDGETED_RESPONSE_BYTES = 64 << 10


RequestHandler = Callable[[web.Request], Awaitable[web.Response]]


def _json(status: int, body: Any, headers: Mapping[str, str] | None = None) -> web.Response:
    encoded = body.body if isinstance(body, EncodedJson) else dumps(body)
    return web.Response(
        status=status,
        body=encoded,
        content_type="application/json",
        charset="utf-8",
        headers=headers,
    )


def _error(
    status: int, name: str, what: str, headers: Mapping[str, str] | None = None
) -> web.Response:
    payload = {"code": status, "message": what, "error": {"name": name, "what": what}}
    return _json(status, payload, headers)


async def _read_body(request: web.Request, timeout_s: float, whole: bool = False) -> Any:
    """The body's JSON object; with ``whole``, whatever JSON it holds (None for no body),
    for a route that checks its own (``Route.body``)."""
    if request.method != "POST" or not request.body_exists:
        return None if whole else {}  # GET serves only routes without fields
    try:
        if request.content.is_eof():  # the whole body is here already: no wait to bound
            raw = await request.read()
        else:
            async with asyncio.timeout(timeout_s or None):
                raw = await request.read()
    except TimeoutError as err:
        raise RpcError(408, "timeout", f"the body did not arrive within {timeout_s} s") from err
    except web.HTTPRequestEntityTooLarge as err:
        raise RpcError(413, "body_too_large", "request body is too large") from err
    if not raw:  # no body; one of only whitespace is not JSON, and gets 400 below
        return None if whole else {}
    try:
        # orjson, not json: it refuses nesting over 1,024 levels with a JSONDecodeError where
        # json raises RecursionError, and has no 4,300-digit limit on integers to trip over.
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise RpcError(400, "malformed_json", f"request body is not JSON: {err}") from err
    if not isinstance(body, dict) and not whole:
        raise RpcError(400, "malformed_json", "request body must be a JSON object")
    return body


# What a listener reports of each answered call: its route, its status and its seconds.
Observe = Callable[[str, int, float], None]


def _endpoint(
    path: str, route: Route, limits: HttpLimits, observe: Observe | None = None
) -> RequestHandler:
    """The handler of ``route``; with ``observe``, told of each answer's status and time."""
    answer = _answer(route, limits)
    if observe is None:
        return answer

    async def handle(request: web.Request) -> web.Response:
        started = time.monotonic()
        response = await answer(request)
        observe(path, response.status, time.monotonic() - started)
        return response

    return handle


def _answer(route: Route, limits: HttpLimits) -> RequestHandler:
    async def handle(request: web.Request) -> web.Response:
        try:
            if route.body is None:
                body = await _read_body(request, limits.read_timeout_s)
                args = parse_fields(route.fields, body)
            else:
                args = route.body.parse(await _read_body(request, limits.read_timeout_s, True))
            result = await route.handler(args)
        except Exception as err:
            status, payload = error_response(err)
            if status == 500:  # a fault of ours; 503 and 504 are the limits working
                log.exception("rpc_failed", path=request.path)
            response = _json(status, payload)
            if status == 408:
                response.force_close()  # the rest of a slow body is not waited for
            return response
        return _json(200, result)

    return handle


@web.middleware
async def _errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own refusals as the RPC's JSON error object."""
    try:
        return await handler(request)
    except web.HTTPException as err:
        if err.status < 400:
            raise
        name = err.reason.lower().replace(" ", "_")
        what = {
            404: "no such path on this listener",
            405: f"{request.method} is not served here",
        }.get(err.status, err.reason)
        allow = {"Allow": err.headers["Allow"]} if "Allow" in err.headers else None
        return _error(err.status, name, what, allow)


def _limit(limits: HttpLimits, sockets: frozenset[str]) -> Middleware:
    in_flight = 0

    @web.middleware
    async def limit(request: web.Request, handler: Handler) -> web.StreamResponse:
        """At most ``max_in_flight`` requests at once, each within ``max_response_s``; a
        websocket (``sockets``, by path) lives outside both, under its own caps."""
        nonlocal in_flight
        if request.path in sockets:
            return await handler(request)
        if limits.max_in_flight and in_flight >= limits.max_in_flight:
            what = f"{in_flight} requests in flight; retry later"
            return _error(503, "busy", what, {"Retry-After": "1"})
        in_flight += 1
        try:
            async with asyncio.timeout(limits.max_response_s or None) as deadline:
                return await handler(request)
        except TimeoutError:
            if not deadline.expired():
                raise
            what = f"no answer within {limits.max_response_s} s"
            return _error(504, "timeout", what)
        finally:
            in_flight -= 1

    return limit


def _budget(most: int) -> Middleware:
    writing = 0  # bytes of the large answers being written

    @web.middleware
    async def budget(request: web.Request, handler: Handler) -> web.StreamResponse:
        """A large answer is written here rather than by aiohttp after the middlewares, so
        that its bytes count against ``most`` until the client has taken them or the
        connection is gone; one that would pass ``most`` while others are written is a 503.
        The outermost middleware: every header is set when it writes."""
        nonlocal writing
        response = await handler(request)
        body = response.body if isinstance(response, web.Response) else None
        size = len(body) if isinstance(body, bytes) else 0
        if size <= UNBUDGETED_RESPONSE_BYTES:
            return response
        if writing and writing + size > most:
            what = f"{writing >> 20} MiB of answers being written; retry later"
            busy = _error(503, "busy", what, {"Retry-After": "1"})
            for name in ("Access-Control-Allow-Origin", "Vary"):
                if name in response.headers:
                    busy.headers[name] = response.headers[name]
            return busy
        writing += size
        try:
            await response.prepare(request)
            await response.write_eof()
        except ConnectionError:
            pass  # the client left or was cut off; aiohttp's own write finds it gone too
        finally:
            writing -= size
        return response

    return budget


def _cors(origin: str) -> Middleware:
    @web.middleware
    async def cors(request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await handler(request)
        response.headers["Access-Control-Allow-Origin"] = origin
        if origin != "*":
            response.headers["Vary"] = "Origin"
        return response

    return cors


def _same_site(token: bool) -> Middleware:
    """The admin listener answers no web page but its own: a page on any site can make the
    operator's browser send a "simple" POST (text/plain or a form, no preflight) to a
    loopback port, so a request with another ``Origin`` is refused (403) and a body must be
    ``application/json`` (415), which no page of another origin can send without CORS. Without
    a token the Host must be a loopback name besides, or a DNS-rebound name would make the
    attacker's page same-origin."""

    @web.middleware
    async def same_site(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            return _error(403, "cross_origin", "the admin RPC answers no other site's page")
        if not token and not _loopback_name(request.url.host or ""):
            what = "without an admin-token, the admin RPC answers only a loopback Host"
            return _error(403, "cross_origin", what)
        served = request.match_info.http_exception is None  # else a 404 or 405 follows
        # A POST with neither body nor type (a route without fields) passes: a page can send
        # one only with its Origin, refused above.
        typed = request.body_exists or "Content-Type" in request.headers
        if served and typed and request.content_type != "application/json":
            what = "the admin RPC takes only Content-Type: application/json"
            return _error(415, "unsupported_media_type", what)
        return await handler(request)

    return same_site


def _loopback_name(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def _bearer(token: str) -> Middleware:
    expected = f"Bearer {token}".encode()

    @web.middleware
    async def bearer(request: web.Request, handler: Handler) -> web.StreamResponse:
        given = request.headers.get("Authorization", "").encode(errors="replace")
        if not hmac.compare_digest(given, expected):
            return _error(401, "unauthorized", "this listener needs its bearer token")
        return await handler(request)

    return bearer


def _application(
    routes: Mapping[str, Route],
    documents: Mapping[str, tuple[Document, RequestHandler]],
    limits: HttpLimits,
    title: str,
    *,
    cors_origin: str = "",
    token: str = "",
    same_site: bool = False,
    sockets: Mapping[str, Handler] | None = None,
    description: str = "",
    observe: Observe | None = None,
) -> web.Application:
    """An application serving ``routes`` and ``documents`` (path -> description, handler),
    and the OpenAPI document of both at /openapi.json; ``sockets``: websockets (path ->
    handler), described by ``description`` rather than as operations; ``cors_origin``: the
    Access-Control-Allow-Origin of every answer ('' for none); ``token``: a bearer token
    every request must carry ('' for none); ``same_site``: refuse requests a page of another
    site may have sent (``_same_site``); ``observe``: told of each call a route answered."""
    middlewares: list[Middleware] = [_errors_as_json]
    if same_site:
        middlewares.append(_same_site(bool(token)))
    if cors_origin:
        middlewares.insert(0, _cors(cors_origin))
    if token:
        middlewares.append(_bearer(token))
    sockets = sockets or {}
    middlewares.append(_limit(limits, frozenset(sockets)))
    if limits.max_response_bytes_in_flight:
        middlewares.insert(0, _budget(limits.max_response_bytes_in_flight))
    app = web.Application(client_max_size=limits.max_body_bytes, middlewares=middlewares)
    this = Document("This document", "application/json", {"type": "object"})
    described = {path: doc for path, (doc, _) in documents.items()} | {"/openapi.json": this}
    document = openapi_document(
        routes,
        described,
        title=title,
        version=SERVER_VERSION,
        cors=bool(cors_origin),
        token=bool(token),
        same_site=same_site,
        description=description,
    )

    async def get_openapi(request: web.Request) -> web.Response:
        return _json(200, document)

    getters = {path: get for path, (_, get) in documents.items()} | {"/openapi.json": get_openapi}
    for path, route in routes.items():
        handler = _endpoint(path, route, limits, observe)
        for method in served_methods(route):
            app.router.add_route(method, path, handler)
    for path, get in getters.items():
        app.router.add_get(path, get, allow_head=False)
    for path, socket_handler in sockets.items():
        app.router.add_get(path, socket_handler, allow_head=False)
    if cors_origin:
        for path, route in routes.items():
            app.router.add_route("OPTIONS", path, _preflight(", ".join(served_methods(route))))
        for path in getters:
            app.router.add_route("OPTIONS", path, _preflight("GET"))
    return app


def _preflight(methods: str) -> RequestHandler:
    async def preflight(request: web.Request) -> web.Response:
        headers = {
            "Access-Control-Allow-Methods": methods,
            "Access-Control-Allow-Headers": "Content-Type, Authorization",
            "Access-Control-Max-Age": "600",
        }
        return web.Response(status=204, headers=headers)

    return preflight


def make_app(
    api: Api,
    metrics: NodeMetrics,
    limits: HttpLimits,
    observe_network: Callable[[], None] = lambda: None,
    metrics_ttl_s: float = METRICS_TTL_S,
    cors_origin: str = "",
    stream: StreamHub | None = None,
) -> web.Application:
    """The public RPC: every route but the admin ones, /metrics, and with a ``stream`` hub
    the websocket /v1/chain/stream and its AsyncAPI document. ``observe_network``
    updates the peer layer's gauges before each /metrics scrape (the chain's come from the
    runner's view). A scrape within ``metrics_ttl_s`` of the last one gets the same text.
    ``cors_origin``: sent as Access-Control-Allow-Origin ('' sends none)."""
    rendered = (-1e9, b"")  # time.monotonic() of the last render, its text
    observe = metrics.observe_rpc

    async def get_metrics(request: web.Request) -> web.Response:
        nonlocal rendered
        try:
            await api.pacer.turn()
        except Exception as err:
            status, payload = error_response(err)
            return _json(status, payload)
        now = time.monotonic()
        if now - rendered[0] >= metrics_ttl_s:
            metrics.observe_chain(api.runner.view)
            observe_network()
            rendered = (now, metrics.render())
        return web.Response(body=rendered[1], content_type="text/plain", charset="utf-8")

    public = {path: route for path, route in api.routes.items() if not route.admin}
    text = Document("Prometheus metrics", "text/plain", {"type": "string"})
    documents = {"/metrics": (text, get_metrics)}
    if stream is None:
        return _application(
            public, documents, limits, "BoR node RPC", cors_origin=cors_origin, observe=observe
        )
    asyncapi = asyncapi_document(SERVER_VERSION)

    async def get_asyncapi(request: web.Request) -> web.Response:
        return _json(200, asyncapi)

    summary = f"The AsyncAPI 3.0 document of the websocket {STREAM_PATH}"
    document = Document(summary, "application/json", {"type": "object"})
    documents[ASYNCAPI_PATH] = (document, get_asyncapi)
    description = (
        f"The websocket {STREAM_PATH} (chain events: blocks, transactions, actions, undo)"
        f" is described by the AsyncAPI document at {ASYNCAPI_PATH}."
    )
    app = _application(
        public,
        documents,
        limits,
        "BoR node RPC",
        cors_origin=cors_origin,
        sockets={STREAM_PATH: stream.handle},
        description=description,
        observe=observe,
    )
    app.on_shutdown.append(stream.shutdown)
    return app


def make_admin_app(api: Api, limits: HttpLimits, token: str = "") -> web.Application:
    """The admin listener: the routes that change the node, and nothing else; with a
    ``token``, only for requests that carry it (``Authorization: Bearer <token>``)."""
    admin = {path: route for path, route in api.routes.items() if route.admin}
    title = "BoR node admin RPC"
    return _application(admin, {}, limits, title, token=token, same_site=True)


def runner_options(limits: HttpLimits) -> dict[str, Any]:
    """aiohttp server settings that enforce ``limits``."""
    return {
        "access_log": None,
        # A client that goes away cancels its handler, which frees its place in flight.
        "handler_cancellation": True,
        # Bounds the wait for a request's header, from the connection's start or the end
        # of the last answer (and the life of an idle keep-alive connection).
        "keepalive_timeout": limits.read_timeout_s or 3630,
        # A body left unread (a refused or a slow one) closes the connection at once rather
        # than being drained for aiohttp's default 10 s.
        "lingering_time": 0,
    }


def bind_error(what: str, where: str, option: str, err: OSError) -> NodeError:
    """Why a listener could not be bound, and, for an address in use (most often a node
    already running), which option picks another."""
    if err.errno == errno.EADDRINUSE:
        reason = f"the address is in use (another node?); choose another with {option}"
    else:
        reason = err.strerror or str(err)
    return NodeError(f"cannot {what} on {where}: {reason}")


async def serve(
    app: web.Application,
    host: str,
    port: int,
    limits: HttpLimits,
    what: str = "RPC",
    option: str = "--http-server-address",
) -> web.AppRunner:
    """Start serving ``app`` on ``host:port``; the caller cleans the runner up. Raises
    NodeError naming ``what`` and the ``option`` that sets the address when it cannot be
    bound."""
    runner = web.AppRunner(app, **runner_options(limits))
    await runner.setup()
    try:
        await GuardedSite(runner, host, port, limits).start()
    except OSError as err:
        await runner.cleanup()
        raise bind_error(f"serve the {what}", f"{host}:{port}", option, err) from err
    except BaseException:
        await runner.cleanup()
        raise
    return runner
