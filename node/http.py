"""The aiohttp shell around ``Api``: JSON in and out, /metrics and /openapi.json."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from node.metrics import NodeMetrics
from node.rpc import Api, EncodedJson, Route, RpcError, error_response, log
from node.views import dumps

# Rendering /metrics costs ~1 ms (five times any other read), and a scrape every second is
# already more than Prometheus does: scrapes closer together than this share one rendering.
METRICS_TTL_S = 1.0


def _json(status: int, body: Any) -> web.Response:
    encoded = body.body if isinstance(body, EncodedJson) else dumps(body)
    return web.Response(
        status=status, body=encoded, content_type="application/json", charset="utf-8"
    )


async def _read_body(request: web.Request) -> dict[str, Any]:
    if not request.can_read_body:
        return {}
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge as err:
        raise RpcError(413, "body_too_large", "request body is too large") from err
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RpcError(400, "malformed_json", f"request body is not JSON: {err}") from err
    if not isinstance(body, dict):
        raise RpcError(400, "malformed_json", "request body must be a JSON object")
    return body


def _endpoint(route: Route) -> Any:
    async def handle(request: web.Request) -> web.Response:
        try:
            body = await _read_body(request)
            result = await route.handler(body)
        except Exception as err:
            status, payload = error_response(err)
            if status >= 500:
                log.exception("rpc_failed", path=request.path)
            return _json(status, payload)
        return _json(200, result)

    return handle


def openapi_document(api: Api) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    error = {"description": "JSON error: {code, message, error: {name, what}}"}
    for path, route in api.routes.items():
        properties = {name: {"description": desc} for name, desc in route.params.items()}
        paths[path] = {
            "post": {
                "summary": route.summary,
                "requestBody": {
                    "required": bool(route.params),
                    "content": {
                        "application/json": {"schema": {"type": "object", "properties": properties}}
                    },
                },
                "responses": {"200": {"description": "JSON result"}, "4XX": error},
            }
        }
    paths["/metrics"] = {
        "get": {"summary": "Prometheus metrics", "responses": {"200": {"description": "text"}}}
    }
    paths["/openapi.json"] = {
        "get": {"summary": "This document", "responses": {"200": {"description": "JSON"}}}
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "BoR node RPC", "version": "0.1.0"},
        "paths": paths,
    }


def make_app(
    api: Api,
    metrics: NodeMetrics,
    max_body_bytes: int,
    observe_network: Callable[[], None] = lambda: None,
    metrics_ttl_s: float = METRICS_TTL_S,
) -> web.Application:
    """The RPC application; ``observe_network`` updates the peer layer's gauges before each
    /metrics scrape (the chain's come from the runner's view). A scrape within
    ``metrics_ttl_s`` of the last one gets the same text."""
    app = web.Application(client_max_size=max_body_bytes)
    rendered = (-1e9, b"")  # time.monotonic() of the last render, its text
    for path, route in api.routes.items():
        handler = _endpoint(route)
        app.router.add_post(path, handler)
        app.router.add_get(path, handler)

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

    document = openapi_document(api)

    async def get_openapi(request: web.Request) -> web.Response:
        return _json(200, document)

    app.router.add_get("/metrics", get_metrics)
    app.router.add_get("/openapi.json", get_openapi)
    return app
