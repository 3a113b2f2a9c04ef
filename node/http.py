"""The aiohttp shell around ``Api``: JSON in and out, limits, /metrics and /openapi.json.

Two listeners share the one ``Api``: the public RPC (reads, pushes, /metrics) and the admin
listener, which alone serves the routes that change the node (``Route.admin``). Every answer
is JSON, errors included: aiohttp's own (no such path, method not allowed, body too large)
are turned into the error object here, and nothing a client sends reaches a handler
unchecked (``node.fields``).

Limits, after nodeos's ``http-max-*``: a body size; requests in flight (beyond it, 503 at
once); a time per request (504); and slow senders are cut off: a connection must deliver a
request's header within ``read_timeout_s`` of connecting or of its last answer (aiohttp's
keep-alive timer, which runs from the connection's start and is not pushed back by the bytes
that trickle in) and its body within ``read_timeout_s`` of the header (408, then closed).
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from node.errors import NodeError
from node.fields import parse_fields
from node.metrics import NodeMetrics
from node.openapi import Document, openapi_document, served_methods
from node.routes import Route
from node.rpc import SERVER_VERSION, Api, EncodedJson, RpcError, error_response, log
from node.views import dumps

# Rendering /metrics costs ~1 ms (five times any other read), and a scrape every second is
# already more than Prometheus does: scrapes closer together than this share one rendering.
METRICS_TTL_S = 1.0


RequestHandler = Callable[[web.Request], Awaitable[web.Response]]


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """What one listener accepts (0 turns a limit off)."""

    max_body_bytes: int = 1 << 20
    # Each request in flight holds its body (up to max_body_bytes) and a handler: 256 bounds
    # that to 256 MiB at the default body size, and is as many reads as may queue for the
    # chain thread (node.reads.MAX_WAITING), so a burst that fits one fits the other.
    max_in_flight: int = 256
    # A commit-mode push waits for its block within this time; any other answer takes
    # milliseconds unless the node is overloaded.
    max_response_s: float = 30.0
    # Real clients send a header in one packet and a body of a few KiB right after it.
    read_timeout_s: float = 10.0


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


async def _read_body(request: web.Request, timeout_s: float) -> dict[str, Any]:
    if request.method != "POST" or not request.body_exists:
        return {}  # GET serves only routes without fields
    try:
        async with asyncio.timeout(timeout_s or None):
            raw = await request.read()
    except TimeoutError as err:
        raise RpcError(408, "timeout", f"the body did not arrive within {timeout_s} s") from err
    except web.HTTPRequestEntityTooLarge as err:
        raise RpcError(413, "body_too_large", "request body is too large") from err
    if not raw:
        return {}  # no body; one of only whitespace is not JSON, and gets 400 below
    try:
        # orjson, not json: it refuses nesting over 1,024 levels with a JSONDecodeError where
        # json raises RecursionError, and has no 4,300-digit limit on integers to trip over.
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise RpcError(400, "malformed_json", f"request body is not JSON: {err}") from err
    if not isinstance(body, dict):
        raise RpcError(400, "malformed_json", "request body must be a JSON object")
    return body


def _endpoint(route: Route, limits: HttpLimits) -> RequestHandler:
    async def handle(request: web.Request) -> web.Response:
        try:
            body = await _read_body(request, limits.read_timeout_s)
            result = await route.handler(parse_fields(route.fields, body))
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


def _limit(limits: HttpLimits) -> Middleware:
    in_flight = 0

    @web.middleware
    async def limit(request: web.Request, handler: Handler) -> web.StreamResponse:
        """At most ``max_in_flight`` requests at once, each within ``max_response_s``."""
        nonlocal in_flight
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


def _cors(origin: str) -> Middleware:
    @web.middleware
    async def cors(request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await handler(request)
        response.headers["Access-Control-Allow-Origin"] = origin
        if origin != "*":
            response.headers["Vary"] = "Origin"
        return response

    return cors


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
) -> web.Application:
    """An application serving ``routes`` and ``documents`` (path -> description, handler),
    and the OpenAPI document of both at /openapi.json; ``cors_origin``: the
    Access-Control-Allow-Origin of every answer ('' for none); ``token``: a bearer token
    every request must carry ('' for none)."""
    middlewares: list[Middleware] = [_errors_as_json]
    if cors_origin:
        middlewares.insert(0, _cors(cors_origin))
    if token:
        middlewares.append(_bearer(token))
    middlewares.append(_limit(limits))
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
    )

    async def get_openapi(request: web.Request) -> web.Response:
        return _json(200, document)

    getters = {path: get for path, (_, get) in documents.items()} | {"/openapi.json": get_openapi}
    for path, route in routes.items():
        handler = _endpoint(route, limits)
        for method in served_methods(route):
            app.router.add_route(method, path, handler)
    for path, get in getters.items():
        app.router.add_get(path, get, allow_head=False)
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
) -> web.Application:
    """The public RPC: every route but the admin ones, and /metrics. ``observe_network``
    updates the peer layer's gauges before each /metrics scrape (the chain's come from the
    runner's view). A scrape within ``metrics_ttl_s`` of the last one gets the same text.
    ``cors_origin``: sent as Access-Control-Allow-Origin ('' sends none)."""
    rendered = (-1e9, b"")  # time.monotonic() of the last render, its text

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
    return _application(public, documents, limits, "BoR node RPC", cors_origin=cors_origin)


def make_admin_app(api: Api, limits: HttpLimits, token: str = "") -> web.Application:
    """The admin listener: the routes that change the node, and nothing else; with a
    ``token``, only for requests that carry it (``Authorization: Bearer <token>``)."""
    admin = {path: route for path, route in api.routes.items() if route.admin}
    return _application(admin, {}, limits, "BoR node admin RPC", token=token)


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


async def serve(
    app: web.Application, host: str, port: int, limits: HttpLimits, what: str = "RPC"
) -> web.AppRunner:
    """Start serving ``app`` on ``host:port``; the caller cleans the runner up. Raises
    NodeError naming ``what`` when the address cannot be bound."""
    runner = web.AppRunner(app, **runner_options(limits))
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as err:
        await runner.cleanup()
        raise NodeError(f"cannot serve the {what} on {host}:{port}: {err.strerror}") from err
    except BaseException:
        await runner.cleanup()
        raise
    return runner
