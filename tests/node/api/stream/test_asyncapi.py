"""The AsyncAPI document against the frames the stream really sends: every frame of a block of
native actions and of a contract call, on every stream (blocks with and without their
transactions), and every control frame, is valid under its message's payload schema; the
subscribe message's schema names exactly the fields the server reads."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import jsonschema_rs

from chain.abi import parse_abi
from chain.controller import Chain
from chain.core.execution.actions import (
    Action,
    Call,
    RegProducer,
    SetCode,
    Stake,
    Transfer,
    Unstake,
)
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName, BlockId, TxId
from chain.testing import now_ms
from genesis.testing import DevNet
from node.api.stream.abis import StreamAbis
from node.api.stream.asyncapi import asyncapi_document
from node.api.stream.frames import (
    SUBSCRIBE_FIELDS,
    BlockIndex,
    Cursor,
    Subscription,
    error_frame,
    lagged_frame,
    lib_frame,
    subscribed_frame,
    undo_frame,
)
from node.runner import ChainRunner
from tests.node.api import kv_contract

A, B, C = AccountName("alice"), AccountName("bob"), AccountName("carol")
MESSAGES = asyncapi_document("test")["components"]["messages"]
KV = parse_abi(kv_contract.ABI)
ENTRY = {"id": 1, "owner": "bob", "amount": 2}


def _valid(frame: bytes | dict[str, Any]) -> dict[str, Any]:
    """``frame``, checked against the payload of the message its type names."""
    message: dict[str, Any] = json.loads(frame) if isinstance(frame, bytes) else frame
    name = message["type"]
    validator = jsonschema_rs.validator_for(MESSAGES[name]["payload"])
    errors = [e.message for e in validator.iter_errors(message)]
    assert errors == [], (name, message)
    return message


def _indexes(tmp_path: Path) -> list[BlockIndex]:
    """A block of native actions and the kv contract's deploy, then one of a call, indexed
    with their traces and decoded as the hub does."""
    net = DevNet.create(1)

    async def build() -> list[BlockIndex]:
        runner = ChainRunner(net.open(tmp_path / "chain"))
        try:
            indexes = []
            batches = [
                (
                    Transfer(A, B, 20_000, "rent"),
                    Stake(C, 5),
                    RegProducer(B, PrivateKey.generate().public_key, "https://b.example"),
                    SetCode(A, kv_contract.wasm(), kv_contract.ABI),
                ),
                (Unstake(C, 2), Call(A, "put", (B,), KV.encode_action("put", ENTRY))),
            ]
            for actions in batches:
                for action in actions:

                    def admit(chain: Chain, action: Action = action) -> None:
                        chain.admit_transaction(net.tx(chain, action), now_ms())

                    await runner.call(admit)
                block = await runner.call(net.produce)
                traces = await runner.call(Chain.traces, block.num)
                traced = tuple((TxId(t), tr) for t, tr in traces)
                index = BlockIndex(block, traced, params=runner.view.params)
                await StreamAbis().decode(index, runner)
                indexes.append(index)
            return indexes
        finally:
            runner.close()

    return asyncio.run(build())


def test_every_block_frame_is_valid_under_its_message(tmp_path: Path) -> None:
    """Blocks (with and without transactions), transactions and actions frames of both
    blocks are valid; the actions frames hold native actions and a decoded contract action."""
    seen: list[dict[str, Any]] = []
    for index in _indexes(tmp_path):
        for sub in (
            Subscription("blocks"),
            Subscription("blocks", transactions=True),
            Subscription("transactions"),
            Subscription("actions"),
        ):
            for irreversible in (False, True):
                frame = index.frame(sub, irreversible)
                assert frame is not None
                seen.append(_valid(frame))
    actions = [a for f in seen if f["type"] == "actions" for a in f["actions"]]
    assert {a["name"] for a in actions} >= {"transfer", "stake", "unstake", "regproducer", "put"}
    put = next(a for a in actions if a["name"] == "put")
    assert put["data"] == ENTRY and put["events"][0]["data"] == ENTRY
    with_txs = [f for f in seen if f["type"] == "block" and "transactions" in f["block"]]
    assert len(with_txs) == 4


def test_a_frame_off_the_document_is_caught() -> None:
    """The check can fail: an amount as an integer, a contract action without its data
    field, and a block frame with a stray type each fail their schema."""
    validator = jsonschema_rs.validator_for(MESSAGES["actions"]["payload"])
    cursor = {"num": 1, "id": "00000001" + "00" * 28}
    frame = {"type": "actions", "cursor": cursor, "irreversible": False, "block": cursor}
    native = {"tx_id": "00" * 32, "index": 0, "account": None, "name": "stake"}
    native |= {"authorization": ["alice"], "data": {"account": "alice", "amount": 5}}
    assert not validator.is_valid(frame | {"actions": [native]})
    native["data"] = {"account": "alice", "amount": "0.0005 BOR"}
    assert validator.is_valid(frame | {"actions": [native]})
    contract = native | {"account": "alice", "name": "put", "hex": "00", "depth": 0}
    contract |= {"receiver": "alice"}
    contract |= {"console": "", "events": []}
    del contract["data"]
    assert not validator.is_valid(frame | {"actions": [contract]})
    assert validator.is_valid(frame | {"actions": [contract | {"data": None}]})


def test_every_control_frame_is_valid_under_its_message() -> None:
    """subscribed, undo, lib, lagged and error frames, as the server makes them, are valid."""
    head = Cursor(7, BlockId(bytes.fromhex("00000007" + "ab" * 28)))
    parent = Cursor(6, BlockId(bytes.fromhex("00000006" + "cd" * 28)))
    _valid(subscribed_frame(head, parent, 8))
    _valid(undo_frame(head.num, head.id, parent))
    _valid(lib_frame(parent))
    _valid(lagged_frame(parent, "more than 4096 messages waited"))
    _valid(error_frame("the node is stopping"))


def test_the_subscribe_schema_names_the_fields_the_server_reads() -> None:
    """The subscribe message's properties are exactly the fields parse_subscribe takes, and a
    blocks subscription asking for transactions is valid while a non-boolean is not."""
    payload = MESSAGES["subscribe"]["payload"]
    assert set(payload["properties"]) == SUBSCRIBE_FIELDS
    validator = jsonschema_rs.validator_for(payload)
    assert validator.is_valid({"type": "subscribe", "stream": "blocks", "transactions": True})
    assert not validator.is_valid({"type": "subscribe", "stream": "blocks", "transactions": 1})
