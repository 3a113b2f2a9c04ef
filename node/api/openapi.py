"""The OpenAPI 3.1 document of a listener, made from the routes it serves.

Every operation lists exactly the methods the HTTP shell registers for its path (POST, and
GET for routes without fields), its body's schema from the route's fields, its answer's
schema and every error status it may answer, each with the one error object's schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from node.api.fields import object_schema
from node.api.routes import Route
from node.api.views import ERROR_SCHEMA

# Why each error status may be answered.
REASONS = {
    400: "The body is not JSON of the route's shape, or a field is missing or does not match"
    " its schema",
    401: "A signature is wrong or missing, or the admin token is",
    402: "The account cannot pay for the transaction",
    403: "The actor may not perform this action, or (admin) another site's page sent it",
    404: "No such block, account, transaction or peer",
    408: "The request body did not arrive within http-read-timeout-ms",
    409: "The transaction was seen already",
    413: "The body or the transaction is too large",
    415: "(admin) The body is not sent as Content-Type: application/json",
    422: "The body matches the schema but the chain refuses its content",
    429: "The mempool is full",
    500: "An internal error (a fault of the node: reported in its log)",
    503: "Busy: too many requests in flight or reads waiting; retry later",
    504: "The answer took longer than http-max-response-time-ms",
}
# Statuses any request may get: the limits of the HTTP shell and the node's own faults.
ANY_REQUEST = (500, 503, 504)
# Statuses any request with a body may get besides.
WITH_BODY = (400, 408, 413)


@dataclass(frozen=True, slots=True)
class Document:
    """A path served outside the route table (/metrics, /openapi.json): GET only."""

    summary: str
    media_type: str
    schema: dict[str, Any]


def served_methods(route: Route) -> tuple[str, ...]:
    """The methods a route is served with: GET too when it takes no fields and changes
    nothing (a GET is what an <img> on any web page sends)."""
    bodiless = not route.fields and route.body is None
    return ("GET", "POST") if bodiless and not route.admin else ("POST",)


def _error(status: int) -> dict[str, Any]:
    return {
        "description": REASONS[status],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _answers(result: dict[str, Any], media_type: str, statuses: Sequence[int]) -> dict[str, Any]:
    answers: dict[str, Any] = {
        "200": {"description": "OK", "content": {media_type: {"schema": result}}}
    }
    for status in sorted(set(statuses)):
        answers[str(status)] = _error(status)
    return answers


def _operation_id(method: str, path: str) -> str:
    return method + path.replace("/", "_").replace(".", "_")


def openapi_document(
    routes: Mapping[str, Route],
    documents: Mapping[str, Document],
    *,
    title: str,
    version: str,
    cors: bool = False,
    token: bool = False,
    same_site: bool = False,
    description: str = "",
) -> dict[str, Any]:
    """The document of a listener serving ``routes`` and ``documents``; ``cors``: OPTIONS
    preflights are answered; ``token``: every route needs the bearer token; ``same_site``:
    requests from another site's page are refused (the admin listener); ``description``:
    what the listener serves besides its operations (a websocket, which OpenAPI cannot
    describe)."""
    guarded = ((401,) if token else ()) + ((403, 415) if same_site else ())
    paths: dict[str, Any] = {}
    for path, route in routes.items():
        item: dict[str, Any] = {}
        for method in served_methods(route):
            operation: dict[str, Any] = {
                "operationId": _operation_id(method.lower(), path),
                "summary": route.summary,
            }
            statuses = (*route.statuses, *ANY_REQUEST, *guarded)
            if method == "POST":
                schema = object_schema(route.fields) if route.body is None else route.body.schema()
                operation["requestBody"] = {
                    "required": route.body is not None or any(f.required for f in route.fields),
                    "content": {"application/json": {"schema": schema}},
                }
                statuses += WITH_BODY
            operation["responses"] = _answers(route.result, "application/json", statuses)
            item[method.lower()] = operation
        paths[path] = item
    for path, doc in documents.items():
        paths[path] = {
            "get": {
                "operationId": _operation_id("get", path),
                "summary": doc.summary,
                "responses": _answers(doc.schema, doc.media_type, ANY_REQUEST),
            }
        }
    if cors:
        for path, item in paths.items():
            item["options"] = {
                "operationId": _operation_id("options", path),
                "summary": "CORS preflight",
                "responses": {"204": {"description": "The methods and headers allowed"}},
            }
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version}
        | ({"description": description} if description else {}),
        "paths": paths,
        "components": {"schemas": {"Error": ERROR_SCHEMA}},
    }
    if token:
        document["components"]["securitySchemes"] = {"admin": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"admin": []}]
    return document
