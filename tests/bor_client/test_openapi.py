"""The SDK cannot drift from the node: every public route of the OpenAPI document the node
serves has a method on both clients, and each method's result type matches the route's
answer schema (member names, which are required, their types, all the way down)."""

from __future__ import annotations

import asyncio
import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from bor_client.aio import AsyncClient
from bor_client.client import Client
from bor_client.errors import RpcError
from bor_client.model import EXTRA, hints_of
from genesis.testing import DevNet
from node.admission import Admitter
from node.api.http import make_app
from node.api.rpc import Api
from node.api.stream.hub import StreamHub
from node.metrics import NodeMetrics
from node.runner import ChainRunner, InclusionWatch
from tests.node.api.limits import CALL_FUEL, http_limits, stream_limits

# Served beside the routes, not routes of the RPC: documents, and the websocket (its own
# AsyncAPI document; ``AsyncClient.stream``).
DOCUMENTS = {"/openapi.json", "/metrics", "/v1/asyncapi.json"}
ERROR_MEMBERS = {"code", "name", "what"}  # an answer's error, as RpcError(status, name, what)
# Written against Antelope's get_table_rows (the contract B: each row the decoded
# object itself), which branch wt-antelope2 brings; until it is merged the node still
# answers BoR's {key, payer, data} rows. Empty once it is.
PENDING: list[str] = []
SCALARS = {"integer": int, "number": float, "string": str, "boolean": bool}


def _public_document(tmp_path: Path) -> dict[str, Any]:
    async def fetch() -> dict[str, Any]:
        runner = ChainRunner(DevNet.create(1).open(tmp_path))
        metrics = NodeMetrics()
        api = Api(runner, metrics, InclusionWatch(), Admitter(runner, metrics), call_fuel=CALL_FUEL)
        app = make_app(
            api, metrics, http_limits(), stream=StreamHub(runner, stream_limits(), metrics)
        )
        client: TestClient[Any, Any] = TestClient(TestServer(app))
        await client.start_server()
        try:
            document: dict[str, Any] = await (await client.get("/openapi.json")).json()
            return document
        finally:
            await client.close()
            runner.close()

    return asyncio.run(fetch())


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _public_document(tmp_path_factory.mktemp("openapi"))


def _routes(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each route's path and its 200 answer's schema."""
    return {
        path: item["post"]["responses"]["200"]["content"]["application/json"]["schema"]
        for path, item in document["paths"].items()
        if path not in DOCUMENTS
    }


def _optional(hint: Any) -> Any | None:
    """X of ``X | None``; None when ``hint`` is not optional."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if type(None) in args:
            rest = [a for a in args if a is not type(None)]
            return rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]  # noqa: UP007
    return None


def _merged(options: list[dict[str, Any]]) -> dict[str, Any]:
    """anyOf several object shapes as one: every member of any, required where all require;
    a member whose schema differs between shapes (a native action's data) is any object."""
    properties: dict[str, Any] = {}
    for option in options:
        for name, member in option["properties"].items():
            if name in properties and properties[name] != member:
                member = _either(properties[name], member)
            properties[name] = member
    required = set.intersection(*(set(o["required"]) for o in options))
    return {"type": "object", "properties": properties, "required": sorted(required)}


def _either(one: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """What a member holds when two shapes give it different schemas: text when both are
    text (names, consts), any object when both are objects, else any JSON."""
    kinds = {_kind_of(one), _kind_of(other)}
    return {"type": kinds.pop()} if len(kinds) == 1 and None not in kinds else {}


def _kind_of(schema: dict[str, Any]) -> str | None:
    if "const" in schema or "enum" in schema:
        return (
            "string"
            if all(isinstance(v, str) for v in schema.get("enum", [schema.get("const")]))
            else None
        )
    kind = schema.get("type")
    return kind if kind in ("string", "object") else None


def mismatches(hint: Any, schema: dict[str, Any], where: str) -> list[str]:
    """How the type ``hint`` differs from the JSON ``schema`` (none: it matches)."""
    options = schema.get("anyOf", schema.get("oneOf"))
    if options is not None:
        nulls = [o for o in options if o.get("type") == "null"]
        rest = [o for o in options if o.get("type") != "null"]
        inner = _optional(hint)
        if nulls and inner is None:
            return [f"{where}: may be null, but {hint} is not optional"]
        members = typing.get_args(hint) if typing.get_origin(hint) is types.UnionType else ()
        if not nulls and len(rest) > 1 and len(members) == len(rest):  # one type per shape
            return [m for h, o in zip(members, rest, strict=True) for m in mismatches(h, o, where)]
        one = rest[0] if len(rest) == 1 else _merged(rest)
        return mismatches(inner if nulls else hint, one, where)
    if isinstance(hint, type) and issubclass(hint, RpcError):
        error = schema.get("properties", {}).get("error", {}).get("properties", {})
        if set(schema.get("properties", {})) != {"error"} or set(error) != ERROR_MEMBERS:
            return [f"{where}: an RpcError stands for {{error: {{code, name, what}}}} only"]
        return []
    kind = schema.get("type")
    if isinstance(kind, list):  # ["integer", "null"]
        inner = _optional(hint)
        if inner is None:
            return [f"{where}: may be null, but {hint} is not optional"]
        return mismatches(inner, {"type": next(k for k in kind if k != "null")}, where)
    if kind is None and ("const" in schema or "enum" in schema):
        kind = "string"
    if kind is None:
        return [] if hint is Any else [f"{where}: any JSON, but typed {hint}"]
    if kind in SCALARS:
        return [] if hint is SCALARS[kind] else [f"{where}: {kind}, but typed {hint}"]
    if kind == "array":
        if typing.get_origin(hint) is not tuple:
            return [f"{where}: an array, but typed {hint}"]
        return mismatches(typing.get_args(hint)[0], schema.get("items", {}), f"{where}[]")
    return _object_mismatches(hint, schema, where)


def _object_mismatches(hint: Any, schema: dict[str, Any], where: str) -> list[str]:
    if "properties" not in schema:
        if typing.get_origin(hint) not in (dict, Mapping):
            return [f"{where}: an object, but typed {hint}"]
        values = schema.get("additionalProperties", {})
        return mismatches(typing.get_args(hint)[1], values, f"{where}.*")
    if not (isinstance(hint, type) and dataclasses.is_dataclass(hint)):
        return [f"{where}: an object with members, but typed {hint}"]
    fields = {f.name: f for f in dataclasses.fields(hint) if f.name != EXTRA}
    properties, required = schema["properties"], set(schema.get("required", ()))
    found = [f"{where}: no field for {n!r}" for n in sorted(set(properties) - set(fields))]
    found += [f"{where}: {n!r} is not in the schema" for n in sorted(set(fields) - set(properties))]
    hints = hints_of(hint)
    for name in sorted(set(fields) & set(properties)):
        field = fields[name]
        has_default = field.default is not dataclasses.MISSING
        if has_default == (name in required):
            say = "required" if name in required else "optional"
            found.append(f"{where}.{name}: {say} in the schema, not in {hint.__name__}")
        field_hint = hints[name]
        if has_default and name not in required:
            field_hint = _optional(field_hint) or field_hint
            if properties[name].get("anyOf") or isinstance(properties[name].get("type"), list):
                field_hint = hints[name]
        found += mismatches(field_hint, properties[name], f"{where}.{name}")
    return found


def _method_name(path: str) -> str:
    return path.rsplit("/", 1)[1]


def test_every_public_route_has_a_method_on_both_clients(document: dict[str, Any]) -> None:
    """Each route the public listener serves is a method of Client and of AsyncClient."""
    routes = _routes(document)
    assert "/v1/chain/get_info" in routes and "/v1/chain/call" in routes
    for cls in (Client, AsyncClient):
        missing = [p for p in routes if not callable(getattr(cls, _method_name(p), None))]
        assert missing == [], cls.__name__


def test_each_methods_result_matches_the_routes_schema(document: dict[str, Any]) -> None:
    """The result type of each route's method matches the route's answer schema, and the
    sync and async methods return the same type."""
    found = []
    for path, schema in _routes(document).items():
        name = _method_name(path)
        sync_hint = typing.get_type_hints(getattr(Client, name))["return"]
        async_hint = typing.get_type_hints(getattr(AsyncClient, name))["return"]
        assert sync_hint == async_hint, name
        found += mismatches(sync_hint, schema, name)
    assert found == PENDING


def test_the_checker_finds_a_drift() -> None:
    """A result class lacking a member, typing one wrongly or disagreeing on whether it is
    required is reported (the check above can fail)."""

    @dataclasses.dataclass(frozen=True)
    class Answer:
        a: int
        b: str | None = None
        extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "integer"}},
        "required": ["a", "b", "c"],
    }
    assert mismatches(Answer, schema, "x") == [
        "x: no field for 'c'",
        "x.a: string, but typed <class 'int'>",
        "x.b: required in the schema, not in Answer",
        "x.b: string, but typed str | None",
    ]
