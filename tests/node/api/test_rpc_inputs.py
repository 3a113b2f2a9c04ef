"""Hostile and malformed request bodies get a 4xx JSON error naming the problem, never a 500,
from the RPC served by aiohttp on loopback over a real chain (the inputs that once raised
RecursionError, ValueError and OverflowError included)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genesis.testing import DevNet
from node.api.fields import Kind
from tests.node.api.test_rpc import FakeNetwork, Rig, _run

# A valid value of every field of every route, so that a test can spoil one field at a time.
VALID = {
    "block_num_or_id": 0,
    "account_name": "alice",
    "id": "00" * 32,
    "packed_trx": "00",
    "signatures": ["00" * 65],
    "mode": "sync",
    "timeout_ms": 1000,
    "address": "127.0.0.1:9",
    "peer": "p1",
    "account": "alice",
    "code": "alice",
    "scope": "alice",
    "table": "kv",
    "lower_bound": "",  # valid for get_table_rows and get_producers alike
    "upper_bound": "bob",
    "limit": 10,
    "index_position": "primary",
    "json": True,
    "key_type": "i64",
    "encode_type": "dec",
    "reverse": False,
    "show_payer": False,
    "contract": "alice",
    "action": "get",
    "data": {},
    "authorization": ["bob"],
    "symbol": "TOK",
}
# One value of each JSON type.
OF_TYPE: dict[str, Any] = {
    "null": None,
    "boolean": True,
    "integer": 7,
    "number": 1.5,
    "string": "x",
    "array": ["x"],
    "object": {"x": 1},
}


def _types(kind: Kind) -> set[str]:
    """The JSON types a field's schema admits."""
    schema = kind.schema()
    options = schema.get("anyOf", [schema])
    types = {option["type"] for option in options}
    return types | ({"number"} if "integer" in types else set())  # 2.0 is an integer


async def _refused(rig: Rig, path: str, body: Any, raw: bytes | None = None) -> dict[str, Any]:
    """Post ``body`` (or the ``raw`` bytes) to ``path``; assert a 400 JSON error, return it."""
    client = rig.admin if rig.api.routes[path].admin else rig.client
    response = await (client.post(path, json=body) if raw is None else client.post(path, data=raw))
    assert response.status == 400, (path, str(body)[:80], await response.text())
    assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    error: dict[str, Any] = (await response.json())["error"]
    assert error["what"]
    return error


def test_the_inputs_that_once_crashed_the_rpc_get_400(tmp_path: Path) -> None:
    """Deep nesting, a 5,000-digit integer, block numbers -1 and 2**64, superscript and
    Arabic-Indic digits, and a 5,000-digit port each get 400 with the field named."""

    async def scenario(rig: Rig) -> None:
        deep = b"[" * 30_000 + b"]" * 30_000  # json.loads: RecursionError; within 64 KiB
        error = await _refused(rig, "/v1/chain/get_info", None, deep)
        assert error["name"] == "malformed_json"
        nested = b'{"block_num_or_id": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"
        error = await _refused(rig, "/v1/chain/get_block", None, nested)
        assert error["name"] == "malformed_json"
        huge = b'{"block_num_or_id": ' + b"7" * 5_000 + b"}"
        error = await _refused(rig, "/v1/chain/get_block", None, huge)
        assert error["name"] == "malformed_json"
        for key in (-1, 2**64, 2**32, "²", "١٢٣", "7" * 5_000, "1.5", " 1", "1\n", ""):
            error = await _refused(rig, "/v1/chain/get_block", {"block_num_or_id": key})
            assert error["name"] == "bad_field" and "block_num_or_id" in error["what"]
        port = "127.0.0.1:" + "9" * 5_000
        for address in (port, "127.0.0.1:²", "127.0.0.1:١٢٣", "127.0.0.1:0", "h:65536", ":80"):
            error = await _refused(rig, "/v1/net/connect", {"address": address})
            assert error["name"] == "bad_field" and "address" in error["what"]
        assert rig.api.network is not None and rig.api.network.dialled == []  # type: ignore[attr-defined]

    _run(tmp_path, scenario, network=FakeNetwork())


def test_every_field_of_every_route_refuses_every_wrong_type(tmp_path: Path) -> None:
    """Each field of each route, given a value of each JSON type its schema does not admit
    (the other fields valid), gets 400 bad_field naming that field."""

    async def scenario(rig: Rig) -> None:
        fields = {f.name for route in rig.api.routes.values() for f in route.fields}
        assert fields == set(VALID), "every field needs a valid sample here"
        tried = 0
        for path, route in rig.api.routes.items():
            valid = {f.name: VALID[f.name] for f in route.fields}
            for field in route.fields:
                for json_type, value in OF_TYPE.items():
                    if json_type in _types(field.kind):
                        continue
                    error = await _refused(rig, path, valid | {field.name: value})
                    assert error["name"] == "bad_field", (path, field.name, json_type)
                    assert repr(field.name) in error["what"]
                    tried += 1
        assert tried > 40

    _run(tmp_path, scenario, network=FakeNetwork())


def test_bodies_that_are_not_a_json_object_get_400(tmp_path: Path) -> None:
    """A body that is not UTF-8, not JSON, only whitespace, or JSON but not an object gets
    400 malformed_json; a missing required field gets 400 missing_field."""

    async def scenario(rig: Rig) -> None:
        for raw in (b"\xff\xfe", b"{nope", b" ", b"\x0b", b"[]", b'"text"', b"1", b"null"):
            error = await _refused(rig, "/v1/chain/get_info", None, raw)
            assert error["name"] == "malformed_json", raw
        for path, route in rig.api.routes.items():
            for field in route.fields:
                if field.required:
                    body = {f.name: VALID[f.name] for f in route.fields if f is not field}
                    error = await _refused(rig, path, body)
                    assert error["name"] == "missing_field" and field.name in error["what"]

    _run(tmp_path, scenario, network=FakeNetwork())


def test_schema_valid_but_unknown_or_refused_values_get_404_or_422(tmp_path: Path) -> None:
    """A block number beyond the head (as a number or as digits), an unknown account, id or
    peer get 404; a well-formed push whose bytes are not a transaction gets 422."""

    async def scenario(rig: Rig) -> None:
        for key in (2**32 - 1, "9999999999", "00" * 32):
            status, answer = await rig.post("/v1/chain/get_block", {"block_num_or_id": key})
            assert (status, answer["error"]["name"]) == (404, "not_found")
        status, _ = await rig.post("/v1/chain/get_account", {"account_name": "nobody"})
        assert status == 404
        status, _ = await rig.post("/v1/chain/get_transaction", {"id": "00" * 32})
        assert status == 404
        status, _ = await rig.post("/v1/net/disconnect", {"peer": "²"})
        assert status == 404
        push = {"packed_trx": "00", "signatures": ["00" * 65]}
        status, answer = await rig.post("/v1/chain/push_transaction", push)
        assert (status, answer["error"]["name"]) == (422, "malformed_transaction")

    _run(tmp_path, scenario, network=FakeNetwork())


def test_an_oversized_transaction_is_refused_with_its_size(tmp_path: Path) -> None:
    """A push whose packed_trx is well-formed hex over the largest transaction the chain
    admits (max_tx_bytes + max_code_bytes, a setcode's) gets 400 saying it is too large,
    with its size and the limit, not a rule about hex."""

    async def scenario(rig: Rig) -> None:
        params = rig.api.runner.view.params
        limit = params.max_tx_bytes + params.max_code_bytes
        push = {"packed_trx": "00" * (limit + 1858), "signatures": ["00" * 65]}
        error = await _refused(rig, "/v1/chain/push_transaction", push)
        assert error["what"] == f"'packed_trx' is too large: {limit + 1858} bytes, at most {limit}"

    # Small code, so that the largest transaction fits the rig's 64 KiB request bodies.
    net = DevNet.create(1, max_code_bytes=4096)
    _run(tmp_path, scenario, net=net, network=FakeNetwork())
