"""Notifications and read-only actions through the RPC and the stream, on a real chain with
the real runtime: a notified account in push traces and in account-filtered frames, and a
pushed read-only action refused with its own error name."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import wasmtime

from chain.core.execution.actions import Call, SetCode
from chain.core.execution.contracts import name_to_u64
from chain.core.primitives.types import AccountName, TxId
from node.api.stream.abis import StreamAbis
from node.api.stream.frames import BlockIndex, Subscription
from tests.node.api import kv_contract
from tests.node.api.test_rpc import Rig, _body, _run

A, B = AccountName("alice"), AccountName("bob")

# Notifies the account named by its data's first 8 bytes (a name, u64 LE), whatever the
# action; when it runs as a notification (receiver != code), prints "pinged" and emits the
# event "pinged" of the notifying contract's name.
NOTIFIER = """
(module
  (import "env" "read_action_data" (func $read (param i32 i32) (result i32)))
  (import "env" "require_recipient" (func $notify (param i64)))
  (import "env" "prints_l" (func $print (param i32 i32)))
  (import "env" "emit_event" (func $emit (param i64 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "pinged")
  (func (export "apply") (param $recv i64) (param $code i64) (param $action i64)
    (if (i64.ne (local.get $recv) (local.get $code))
      (then
        (call $print (i32.const 16) (i32.const 6))
        (i64.store (i32.const 32) (local.get $code))
        (call $emit (i64.const PINGED) (i32.const 32) (i32.const 8))
        (return)))
    (drop (call $read (i32.const 0) (i32.const 8)))
    (call $notify (i64.load (i32.const 0)))))
""".replace("PINGED", str(name_to_u64("pinged") - (1 << 64)))
NOTIFIER_ABI = {
    "version": "bor::abi/1",
    "structs": [{"name": "ping", "fields": [{"name": "to", "type": "name"}]}],
    "actions": [{"name": "ping", "type": "ping"}],
}
# bob's ABI alone declares the event its handler emits, and what it listens to.
LISTENER_ABI = NOTIFIER_ABI | {
    "structs": [
        *NOTIFIER_ABI["structs"],
        {"name": "pinged", "fields": [{"name": "by", "type": "name"}]},
    ],
    "events": [{"name": "pinged", "type": "pinged"}],
    "notify": [{"contract": "*", "action": "ping"}],
}


def _ping(to: str) -> bytes:
    return struct.pack("<Q", name_to_u64(to))


async def _push(rig: Rig, *actions: Call | SetCode) -> tuple[int, dict[str, object]]:
    stx = await rig.tx(*actions)
    status, got = await rig.post("/v1/chain/push_transaction", _body(stx))
    return status, got


def test_a_notification_is_in_the_push_trace_and_in_the_notified_accounts_frames(
    tmp_path: Path,
) -> None:
    """alice's contract notifies carol (no contract) and bob (the same code): the push's
    trace shows both notifications with their receivers, bob's handler ran with code =
    alice and its event is decoded by bob's ABI, and an actions subscription to carol, named
    nowhere in the action, selects it."""
    code = bytes(wasmtime.wat2wasm(NOTIFIER))

    async def scenario(rig: Rig) -> None:
        for account, abi in ((A, NOTIFIER_ABI), (B, LISTENER_ABI)):
            status, got = await _push(rig, SetCode(account, code, json.dumps(abi)))
            assert status == 200, got
        await rig.produce()
        status, got = await _push(rig, Call(A, "ping", (A,), _ping("carol")))
        assert status == 200, got
        status, got = await _push(rig, Call(A, "ping", (A,), _ping("bob")))
        assert status == 200, got
        trace = got["trace"]
        assert isinstance(trace, dict)
        shown = [(a["contract"], a["receiver"], a["depth"], a["console"]) for a in trace["actions"]]
        assert shown == [("alice", "alice", 0, ""), ("alice", "bob", 1, "pinged")]
        assert trace["actions"][1]["data"] == {"to": "bob"}
        assert trace["actions"][1]["events"] == [{"name": "pinged", "data": {"by": "alice"}}]
        await rig.produce()

        block, traces = await rig.runner.call(
            lambda c: (c.block_by_num(c.head.num), c.traces(c.head.num))
        )
        traced = tuple((TxId(t), tr) for t, tr in traces)
        index = BlockIndex(block, traced, params=rig.runner.view.params)
        await StreamAbis().decode(index, rig.runner)
        frame = index.frame(Subscription("actions", frozenset({"carol"})), False)
        assert frame is not None
        (action,) = json.loads(frame)["actions"]
        assert (action["account"], action["receiver"], action["name"]) == ("alice", "carol", "ping")
        assert action["data"] == {"to": "carol"} and action["depth"] == 1
        everything = json.loads(index.frame(Subscription("actions"), False) or b"{}")["actions"]
        assert [a["receiver"] for a in everything] == ["alice", "carol", "alice", "bob"]
        assert everything[3]["events"][0]["data"] == {"by": "alice"}

    _run(tmp_path, scenario)


def test_a_pushed_read_only_action_is_a_422_and_call_still_runs_it(tmp_path: Path) -> None:
    """An action the contract's ABI marks read_only is refused in push_transaction with
    read_only_action (422) and included in no block; /v1/chain/call runs it."""
    abi = json.loads(kv_contract.ABI)
    abi["actions"] = [
        {"name": "put", "type": "entry"},
        {"name": "get", "type": "get", "read_only": True},
    ]

    async def scenario(rig: Rig) -> None:
        status, got = await _push(rig, SetCode(A, kv_contract.wasm(), json.dumps(abi)))
        assert status == 200, got
        await rig.produce()
        entry = {"id": 1, "owner": "bob", "amount": 5}
        put = struct.pack("<QQQ", 1, name_to_u64("bob"), 5)
        assert (await _push(rig, Call(A, "put", (B,), put)))[0] == 200
        status, got = await _push(rig, Call(A, "get", (B,), struct.pack("<Q", 1)))
        assert status == 422, got
        error = got["error"]
        assert isinstance(error, dict) and error["name"] == "read_only_action"
        assert "alice::get: a read-only action" in str(got["message"])
        await rig.produce()
        status, got = await rig.post(
            "/v1/chain/call", {"contract": "alice", "action": "get", "data": {"id": 1}}
        )
        assert status == 200 and got["return_value"] == entry, got

    _run(tmp_path, scenario)
