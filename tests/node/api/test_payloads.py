"""One shape for every payload: native amounts shown as assets of the chain's token (the core's
canonical JSON untouched), every native action's JSON as the documents describe it, and
contract data decoded by the ABI within its bounds, null otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema_rs
import pytest

from chain.abi import Abi, Field, parse_abi
from chain.core.execution.actions import (
    ACTION_TYPES,
    Action,
    AllowCode,
    ApproveProducer,
    Call,
    NewAccount,
    RegProducer,
    SetCode,
    Stake,
    Transfer,
    UnregProducer,
    Unstake,
    UpdateKey,
    VoteProducer,
)
from chain.core.execution.transaction import SignedTransaction, Transaction
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName
from node.api.payloads import (
    MAX_DECODED_BYTES,
    NATIVE_ACTION_SCHEMA,
    action_data,
    event_data,
    native_action_json,
    transaction_json,
)
from tests.node.api import kv_contract
from tests.node.api.test_rpc import Rig, _body, _run

A, B, C = AccountName("alice"), AccountName("bob"), AccountName("carol")
KEY = PrivateKey.generate()
PARAMS = ChainParams()
KV = parse_abi(kv_contract.ABI)

ONE_OF_EACH: list[Action] = [
    Transfer(A, B, 20_000, "rent"),
    NewAccount(A, B, KEY.public_key),
    UpdateKey(A, KEY.public_key),
    Stake(A, 1),
    Unstake(A, 123_456_789),
    RegProducer(A, KEY.public_key, "https://a.example"),
    ApproveProducer(A, B),
    UnregProducer(A),
    VoteProducer(A, (B, C)),
    SetCode(A, b"\x00asm", kv_contract.ABI),
    Call(A, "put", (B,), b"\x01"),
    AllowCode(A, B, True),
]


def test_the_examples_cover_every_native_action() -> None:
    """Each native action type appears once in ONE_OF_EACH, so the schema test below sees all."""
    assert sorted(type(a).NAME for a in ONE_OF_EACH) == sorted(t.NAME for t in ACTION_TYPES)


@pytest.mark.parametrize("action", ONE_OF_EACH, ids=lambda a: a.NAME)
def test_every_native_action_matches_its_documented_schema(action: Action) -> None:
    """Each native action's JSON is valid under NATIVE_ACTION_SCHEMA (the OpenAPI and AsyncAPI
    documents' schema), and under exactly the one branch of its own name."""
    shown = native_action_json(action, PARAMS)
    assert jsonschema_rs.validator_for(NATIVE_ACTION_SCHEMA).is_valid(shown)
    own = [
        b
        for b in NATIVE_ACTION_SCHEMA["oneOf"]
        if b["properties"]["action"]["const"] == action.NAME
    ]
    assert len(own) == 1 and jsonschema_rs.validator_for(own[0]).is_valid(shown)
    # An integer amount, as the core's JSON has it, is not what the documents promise.
    if "amount" in shown["data"]:
        as_integer = shown | {"data": shown["data"] | {"amount": 20_000}}
        assert not jsonschema_rs.validator_for(NATIVE_ACTION_SCHEMA).is_valid(as_integer)


def test_amounts_are_assets_of_the_chains_token() -> None:
    """Transfer, stake and unstake amounts are shown in the chain's symbol and precision, a
    chain of another token included; other fields are as action_to_json shows them."""
    assert native_action_json(Transfer(A, B, 20_000, "rent"), PARAMS) == {
        "action": "transfer",
        "data": {"sender": "alice", "recipient": "bob", "amount": "2.0000 BOR", "memo": "rent"},
    }
    assert native_action_json(Stake(A, 1), PARAMS)["data"]["amount"] == "0.0001 BOR"
    other = ChainParams(token_symbol="TOK", token_precision=0)
    assert native_action_json(Unstake(A, 42), other)["data"]["amount"] == "42 TOK"


def test_a_transactions_json_shows_assets_and_its_canonical_json_is_untouched() -> None:
    """transaction_json shows the amount as an asset; the core's to_json still has the
    integer, and the transaction's bytes and id are what they were."""
    tx = Transaction(1_000, 1, 2, (Transfer(A, B, 5), Stake(A, 7)))
    stx = SignedTransaction.sign(tx, b"\x00" * 32, [KEY])
    shown = transaction_json(stx, PARAMS)
    assert [a["data"]["amount"] for a in shown["actions"]] == ["0.0005 BOR", "0.0007 BOR"]
    assert [a["data"]["amount"] for a in stx.to_json()["actions"]] == [5, 7]
    assert shown["id"] == stx.id.hex() and stx.packed == tx.pack()


def test_contract_data_decodes_by_the_abi_or_is_none() -> None:
    """An action's arguments and an event decode by the ABI; no ABI, a name the ABI does
    not know, data that does not decode and data past MAX_DECODED_BYTES give None."""
    entry = {"id": 1, "owner": "bob", "amount": 2}
    raw = KV.encode_action("put", entry)
    assert action_data(KV, "put", raw) == entry
    assert event_data(KV, "stored", raw) == entry
    assert action_data(None, "put", raw) is None
    assert action_data(KV, "take", raw) is None and event_data(KV, "taken", raw) is None
    assert action_data(KV, "put", raw[:-1]) is None
    assert event_data(KV, "stored", raw + b"\x00") is None
    memo = parse_abi(
        json.dumps(
            {
                "version": "bor::abi/1",
                "structs": [{"name": "note", "fields": [{"name": "text", "type": "string"}]}],
                "actions": [{"name": "note", "type": "note"}],
            }
        )
    )
    fits = memo.encode_action("note", {"text": "x" * (MAX_DECODED_BYTES - 3)})
    assert len(fits) == MAX_DECODED_BYTES and action_data(memo, "note", fits) is not None
    too_long = memo.encode_action("note", {"text": "x" * (MAX_DECODED_BYTES - 2)})
    assert action_data(memo, "note", too_long) is None


def test_structs_nested_past_the_stack_give_none_not_an_error() -> None:
    """An ABI whose structs nest deeper than Python's stack (setcode stores ABIs unchecked)
    decodes to None rather than raising RecursionError into the caller."""
    depth = 5_000
    structs: dict[str, tuple[Field, ...]] = {
        f"s{i}": (Field("inner", f"s{i + 1}"),) for i in range(depth)
    }
    structs[f"s{depth}"] = (Field("value", "u8"),)
    deep = Abi("", structs, {"deep": "s0"}, {}, {"deep": "s0"}, {})
    assert action_data(deep, "deep", b"\x01") is None
    assert event_data(deep, "deep", b"\x01") is None


def test_get_block_and_get_transaction_show_assets_as_their_schemas_say(tmp_path: Path) -> None:
    """A transfer's amount is "2.0000 BOR" in get_block's and get_transaction's answers, and
    both answers are valid under the schemas the OpenAPI document gives for them."""

    async def scenario(rig: Rig) -> None:
        stx = await rig.tx(Transfer(A, B, 20_000, "rent"))
        status, pushed = await rig.post("/v1/chain/push_transaction", _body(stx))
        assert status == 200, pushed
        block = await rig.produce()
        answers = {
            "/v1/chain/get_block": {"block_num_or_id": block.num},
            "/v1/chain/get_transaction": {"id": stx.id.hex()},
        }
        for path, body in answers.items():
            status, got = await rig.post(path, body)
            assert status == 200, got
            validator = jsonschema_rs.validator_for(rig.api.routes[path].result)
            assert [e.message for e in validator.iter_errors(got)] == [], path
            tx = got["transactions"][0] if "transactions" in got else got
            assert tx["actions"][0]["data"]["amount"] == "2.0000 BOR", path

    _run(tmp_path, scenario)
