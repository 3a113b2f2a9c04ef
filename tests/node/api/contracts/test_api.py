"""The contract routes on a real chain with a real contract runtime (wasmtime) and store."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import wasmtime

from chain.abi import parse_abi
from chain.core.execution.actions import Call, SetCode, Transfer
from chain.core.execution.contracts import name_to_u64
from chain.core.primitives.types import AccountName, TxId
from node.api.stream.abis import StreamAbis
from node.api.stream.frames import BlockIndex, Subscription
from tests.node.api import kv_contract
from tests.node.api.test_rpc import Rig, _body, _run

A, B = AccountName("alice"), AccountName("bob")
KV = parse_abi(kv_contract.ABI)


def _entry(id_: int, owner: str, amount: int) -> bytes:
    return KV.encode_action("put", {"id": id_, "owner": owner, "amount": amount})


async def _deploy(rig: Rig, rows: list[tuple[int, str, int]]) -> None:
    """Deploy the kv contract at alice and store ``rows`` through bob's calls."""
    stx = await rig.tx(SetCode(A, kv_contract.wasm(), kv_contract.ABI))
    status, got = await rig.post("/v1/chain/push_transaction", _body(stx))
    assert status == 200, got
    await rig.produce()
    for row in rows:
        stx = await rig.tx(Call(A, "put", (B,), _entry(*row)))
        status, got = await rig.post("/v1/chain/push_transaction", _body(stx))
        assert status == 200, got
    await rig.produce()


ROWS = [(1, "carol", 10), (2, "bob", 20), (3, "alice", 30), (7, "bob", 70)]
ENTRY_FIELDS = [
    {"name": "id", "type": "uint64"},
    {"name": "owner", "type": "name"},
    {"name": "amount", "type": "uint64"},
]


def test_code_abi_and_rows(tmp_path: Path) -> None:
    """get_code and get_abi show the deployed contract, its ABI in Antelope's form and BoR's;
    get_table_rows answers in Antelope's form: rows decoded by the ABI (hex with json false,
    {data, payer} with show_payer), paged with next_key, bounds as numbers or names, the
    secondary index by position 2 as eosjs sends it."""

    async def scenario(rig: Rig) -> None:
        await _deploy(rig, ROWS)
        status, code = await rig.post("/v1/chain/get_code", {"account": "alice"})
        assert status == 200
        assert code["code_bytes"] == len(kv_contract.wasm())
        assert code["wasm"] == kv_contract.wasm().hex() and code["wast"] == ""
        assert len(code["code_hash"]) == 64 and code["bor_abi"] == json.loads(kv_contract.ABI)
        assert code["abi"]["version"] == "eosio::abi/1.2"
        entry = {"name": "entry", "base": "", "fields": ENTRY_FIELDS}
        assert entry in code["abi"]["structs"]
        assert code["abi"]["tables"] == [
            {"name": "kv", "index_type": "i64", "key_names": [], "key_types": [], "type": "entry"}
        ]
        assert code["abi"]["action_results"] == [{"name": "get", "result_type": "entry"}]
        status, abi = await rig.post("/v1/chain/get_abi", {"account": "alice"})
        assert status == 200 and (abi["abi"], abi["bor_abi"]) == (code["abi"], code["bor_abi"])

        query = {"code": "alice", "scope": "alice", "table": "kv"}
        status, page = await rig.post("/v1/chain/get_table_rows", query | {"limit": 2})
        assert status == 200
        assert page == {
            "rows": [
                {"id": 1, "owner": "carol", "amount": 10},
                {"id": 2, "owner": "bob", "amount": 20},
            ],
            "more": True,
            "next_key": "3",
        }
        status, rest = await rig.post(
            "/v1/chain/get_table_rows", query | {"lower_bound": page["next_key"]}
        )
        assert [r["id"] for r in rest["rows"]] == [3, 7]
        assert rest["more"] is False and rest["next_key"] == ""

        scope_number = {"scope": name_to_u64("alice"), "lower_bound": 2, "upper_bound": "3"}
        status, bounded = await rig.post("/v1/chain/get_table_rows", query | scope_number)
        assert [r["id"] for r in bounded["rows"]] == [2, 3]
        crossed = query | {"lower_bound": 5, "upper_bound": 2}  # an empty range, as in Antelope
        status, empty = await rig.post("/v1/chain/get_table_rows", crossed)
        assert (status, empty["rows"], empty["more"]) == (200, [], False)

        status, raw = await rig.post("/v1/chain/get_table_rows", query | {"json": False})
        assert raw["rows"][0] == _entry(*ROWS[0]).hex()
        status, paid = await rig.post("/v1/chain/get_table_rows", query | {"show_payer": True})
        assert paid["rows"][0] == {
            "data": {"id": 1, "owner": "carol", "amount": 10},
            "payer": "alice",
        }

        by_owner = query | {"index_position": 2, "lower_bound": "bob", "upper_bound": "bob"}
        status, owned = await rig.post("/v1/chain/get_table_rows", by_owner)
        assert status == 200
        assert [r["id"] for r in owned["rows"]] == [2, 7]
        for position in ("secondary", "2"):
            again = await rig.post(
                "/v1/chain/get_table_rows", by_owner | {"index_position": position}
            )
            assert again == (200, owned)

    _run(tmp_path, scenario)


def test_paging_by_next_key_gives_every_row_once_both_ways(tmp_path: Path) -> None:
    """Pages of 3 over 10 rows (keys with gaps), forward by lower_bound and in reverse by
    upper_bound, each from the previous page's next_key, give every row exactly once, in
    order; bounds as WharfKit sends them (key_type name, decimal strings) mean the same."""
    rows = [(n * n, "bob", n) for n in range(1, 11)]

    async def scenario(rig: Rig) -> None:
        await _deploy(rig, rows)
        query = {"code": "alice", "scope": "alice", "table": "kv", "limit": 3, "key_type": "name"}
        for reverse, bound in ((False, "lower_bound"), (True, "upper_bound")):
            seen: list[int] = []
            page = {"more": True, "next_key": ""}
            while page["more"]:
                body = query | {"reverse": reverse}
                if page["next_key"]:
                    body[bound] = page["next_key"]
                status, page = await rig.post("/v1/chain/get_table_rows", body)
                assert status == 200 and len(page["rows"]) <= 3, page
                seen += [r["id"] for r in page["rows"]]
            keys = [r[0] for r in rows]
            assert seen == (keys[::-1] if reverse else keys), reverse

    _run(tmp_path, scenario)


def test_push_answers_with_the_trace(tmp_path: Path) -> None:
    """A push of a contract action answers with what it did: data, event and console decoded
    by the ABI, and the fuel used; a native push answers without a trace."""

    async def scenario(rig: Rig) -> None:
        await _deploy(rig, [])
        stx = await rig.tx(Call(A, "put", (B,), _entry(4, "bob", 40)))
        status, got = await rig.post("/v1/chain/push_transaction", _body(stx))
        assert status == 200, got
        (action,) = got["trace"]["actions"]
        assert action["contract"] == "alice" and action["action"] == "put"
        assert action["data"] == {"id": 4, "owner": "bob", "amount": 40}
        assert action["console"] == "stored"
        assert action["events"] == [{"name": "stored", "data": action["data"]}]
        assert got["trace"]["fuel"] == action["fuel"] > 0
        native = await rig.tx(Transfer(B, A, 1))
        status, got = await rig.post("/v1/chain/push_transaction", _body(native))
        assert status == 200 and "trace" not in got

    _run(tmp_path, scenario)


def test_stream_frame_of_a_contract_action(tmp_path: Path) -> None:
    """In a block's stream frames a call appears as the contract action it ran: the contract
    as account, the action's name (which the actions filter matches), its data and events in
    hex and decoded by the contract's ABI."""

    async def scenario(rig: Rig) -> None:
        await _deploy(rig, [(5, "carol", 50)])
        block, traces = await rig.runner.call(
            lambda c: (c.block_by_num(c.head.num), c.traces(c.head.num))
        )
        traced = tuple((TxId(t), tr) for t, tr in traces)
        index = BlockIndex(block, traced, params=rig.runner.view.params)
        await StreamAbis().decode(index, rig.runner)
        frame = index.frame(Subscription("actions", actions=frozenset({"put"})), False)
        assert frame is not None
        (action,) = json.loads(frame)["actions"]
        assert action["account"] == "alice" and action["name"] == "put"
        assert action["authorization"] == ["bob"] and action["hex"] == _entry(5, "carol", 50).hex()
        entry = {"id": 5, "owner": "carol", "amount": 50}
        assert action["data"] == entry
        assert action["events"] == [{"name": "stored", "hex": action["hex"], "data": entry}]
        assert index.frame(Subscription("actions", frozenset({"carol"})), False) is None
        assert index.frame(Subscription("actions", actions=frozenset({"call"})), False) is None

    _run(tmp_path, scenario)


def test_read_only_call(tmp_path: Path) -> None:
    """/v1/chain/call runs an action read-only: its return value decoded by the ABI's
    action_results and as hex, its fuel; a failing assertion is a 422 naming the contract."""

    async def scenario(rig: Rig) -> None:
        await _deploy(rig, ROWS[:1])
        body = {"contract": "alice", "action": "get", "data": {"id": 1}}
        status, got = await rig.post("/v1/chain/call", body)
        assert status == 200, got
        assert got["return_value"] == {"id": 1, "owner": "carol", "amount": 10}
        assert got["return_value_hex"] == _entry(*ROWS[0]).hex()
        assert got["fuel"] > 0 and got["block_num"] == 2
        hex_body = body | {"data": struct.pack("<Q", 1).hex()}
        assert (await rig.post("/v1/chain/call", hex_body))[1]["return_value"]["id"] == 1

        status, got = await rig.post("/v1/chain/call", body | {"data": {"id": 5}})
        assert status == 422 and got["error"]["name"] == "contract_error"
        assert "no such row" in got["message"]

        # A write in a read-only call is refused, and nothing is stored.
        put = {"contract": "alice", "action": "put", "data": {"id": 9, "owner": "bob", "amount": 1}}
        status, got = await rig.post("/v1/chain/call", put)
        assert status == 422 and "read-only" in got["message"], got
        status, rows = await rig.post(
            "/v1/chain/get_table_rows", {"code": "alice", "scope": "alice", "table": "kv"}
        )
        assert [r["id"] for r in rows["rows"]] == [1]

    _run(tmp_path, scenario)


# Requires carol's authority, whatever it is asked: no ABI, so its calls give hex data.
CAROL = name_to_u64("carol")
CAROLS = f"""
(module
  (import "env" "require_auth" (func $require_auth (param i64)))
  (memory (export "memory") 1)
  (func (export "apply") (param i64 i64 i64)
    (call $require_auth (i64.const {CAROL - (1 << 64) if CAROL >= 1 << 63 else CAROL}))))
"""


def test_a_contracts_missing_authority_is_a_401(tmp_path: Path) -> None:
    """A contract's require_auth of an account that did not authorize the action answers
    401 missing_authority with the contract's reason, as a push and as a read-only call;
    with that authority the call runs."""

    async def scenario(rig: Rig) -> None:
        stx = await rig.tx(SetCode(A, bytes(wasmtime.wat2wasm(CAROLS))))
        status, got = await rig.post("/v1/chain/push_transaction", _body(stx))
        assert status == 200, got
        await rig.produce()
        reason = "alice::go: missing authority of carol"

        stx = await rig.tx(Call(A, "go", (B,), b""))
        status, got = await rig.post("/v1/chain/push_transaction", _body(stx))
        assert (status, got["error"]["name"], got["message"]) == (401, "missing_authority", reason)

        call = {"contract": "alice", "action": "go", "data": "", "authorization": ["bob"]}
        status, got = await rig.post("/v1/chain/call", call)
        assert (status, got["error"]["name"], got["message"]) == (401, "missing_authority", reason)
        status, got = await rig.post("/v1/chain/call", call | {"authorization": ["carol"]})
        assert status == 200, got

    _run(tmp_path, scenario)


BAD: list[tuple[str, dict[str, Any], int, str, str]] = [
    ("/v1/chain/get_code", {"account": "nobody"}, 404, "not_found", "no account 'nobody'"),
    ("/v1/chain/get_code", {"account": "bob"}, 404, "not_found", "'bob' has no contract"),
    ("/v1/chain/get_abi", {"account": "Bob"}, 400, "bad_field", "account"),
    (
        "/v1/chain/get_table_rows",
        {"code": "bob", "scope": "bob", "table": "kv"},
        404,
        "not_found",
        "'bob' has no contract",
    ),
    (
        "/v1/chain/get_table_rows",
        {"code": "alice", "scope": "alice", "table": "nope"},
        422,
        "malformed",
        "has no table 'nope'",
    ),
    (
        "/v1/chain/get_table_rows",
        {"code": "alice", "scope": "alice", "table": "kv", "limit": 1001},
        400,
        "bad_field",
        "limit",
    ),
    (
        "/v1/chain/get_table_rows",
        {"code": "alice", "scope": "alice", "table": "kv", "lower_bound": "99999999999999999999"},
        400,
        "bad_field",
        "lower_bound",
    ),
    (
        "/v1/chain/get_table_rows",
        {"code": "alice", "scope": "alice", "table": "kv", "index_position": 3},
        400,
        "bad_field",
        "index_position",
    ),
    (
        "/v1/chain/get_table_rows",
        {"code": "alice", "scope": "alice", "table": "kv", "key_type": "sha256"},
        400,
        "bad_field",
        "key_type",
    ),
    (
        "/v1/chain/call",
        {"contract": "alice", "action": "get", "data": {"id": "x"}},
        422,
        "malformed",
        "get.id: expected a u64 number",
    ),
    (
        "/v1/chain/call",
        {"contract": "alice", "action": "nope", "data": {}},
        422,
        "malformed",
        "'nope' is not an action",
    ),
    ("/v1/chain/call", {"contract": "bob", "action": "get"}, 404, "not_found", "no contract"),
]


def test_bad_input_is_a_4xx_with_a_reason(tmp_path: Path) -> None:
    """Unknown accounts and contracts, tables missing from the ABI, bad bounds and data that
    does not fit the ABI are answered 4xx with a JSON reason naming what is wrong."""

    async def scenario(rig: Rig) -> None:
        await _deploy(rig, ROWS[:1])
        for path, body, status, name, reason in BAD:
            got_status, got = await rig.post(path, body)
            assert (got_status, got["error"]["name"]) == (status, name), (path, body, got)
            assert reason in got["message"], got

    _run(tmp_path, scenario)


def test_a_bad_abi_is_refused_at_setcode_and_the_chain_is_unchanged(tmp_path: Path) -> None:
    """setcode parses and checks the ABI it carries: text that is no JSON, nests past the
    parser's depth, or names a struct that is not there gets a 422 naming the fault, and the
    account keeps the code and ABI it had."""

    def table_of(type_: str) -> str:
        table = {"name": "kv", "type": type_, "index_type": "i64", "secondary": []}
        return json.dumps(json.loads(kv_contract.ABI) | {"tables": [table]})

    cases = [
        ("not json", "abi: not JSON"),
        ("[" * 5_000, "abi: not JSON"),
        (table_of("nosuch"), "abi.tables[0]: unknown type 'nosuch'"),
        (table_of("u64"), "abi.tables[0].type: kv: 'u64' is no struct"),
    ]

    async def scenario(rig: Rig) -> None:
        await _deploy(rig, [])
        _, before = await rig.post("/v1/chain/get_code", {"account": "alice"})
        for abi_text, reason in cases:
            stx = await rig.tx(SetCode(A, kv_contract.wasm(), abi_text))
            status, got = await rig.post("/v1/chain/push_transaction", _body(stx))
            assert (status, got["error"]["name"]) == (422, "contract_error"), got
            assert "setcode: the ABI is refused" in got["message"], got
            assert reason in got["message"], got
            await rig.produce()
            status, code = await rig.post("/v1/chain/get_code", {"account": "alice"})
            assert status == 200 and code == before

    _run(tmp_path, scenario)
