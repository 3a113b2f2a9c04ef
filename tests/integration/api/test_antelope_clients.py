"""Antelope's own JavaScript clients, the pinned ``@wharfkit/antelope`` and ``eosjs`` of
tests/integration/antelope, against a running devnet node with a contract and its rows:
every Antelope route BoR serves decodes in both, and a failure to decode fails the test."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from chain.abi import parse_abi
from chain.core.execution.actions import Action, Call, SetCode
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.types import AccountName, BlockId
from tests.integration.api.stream_clients import dev_keys
from tests.integration.conftest import NodeProcess, Nodes
from tests.node.api import kv_contract
from tests.support.wait import SLOWDOWN

CLIENTS = Path(__file__).parents[1] / "antelope"
ACCOUNT = "bob"  # a devnet user
CONTRACT = "alice"  # holds the kv contract of tests/node/api/kv_contract.py
ROWS = [(n * n, "carol" if n % 2 else "bob", 10 * n) for n in range(1, 6)]  # more than a page
# What each client must decode, every route of Antelope's that BoR serves.
CALLS = (
    "get_info",
    "get_block",
    "get_account",
    "get_abi",
    "get_code",
    "get_table_rows",
    "get_table_rows_hex",
    "get_currency_balance",
    "get_currency_stats",
    "get_producers",
)


def _install() -> None:
    """``npm ci`` of the pinned clients (once: node_modules is kept between runs)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed to run Antelope's JavaScript clients")
    if (CLIENTS / "node_modules" / ".package-lock.json").exists():
        return
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"],
        cwd=CLIENTS,
        capture_output=True,
        text=True,
        timeout=300 * SLOWDOWN,
    )
    if done.returncode != 0:
        pytest.skip(f"npm ci of Antelope's clients failed (no registry?): {done.stderr[-500:]}")


def _push(node: NodeProcess, stx: SignedTransaction) -> dict[str, Any]:
    body = {"packed_trx": stx.packed.hex(), "signatures": [s.hex() for s in stx.signatures]}
    answer: dict[str, Any] = node.rpc("/v1/chain/push_transaction", body | {"mode": "commit"})
    assert answer["status"] == "included", answer
    return answer


def _deploy(node: NodeProcess) -> int:
    """The kv contract at CONTRACT with ROWS (bob pays); the block of the last row."""
    keys = dev_keys(node.data_dir)
    chain_id = bytes.fromhex(node.info()["chain_id"])

    def signed(action: Action, signer: str) -> SignedTransaction:
        ref = tapos_of(BlockId(bytes.fromhex(node.info()["head_block_id"])))
        tx = Transaction(int(time.time()) + 120, ref[0], ref[1], (action,))
        return SignedTransaction.sign(tx, chain_id, [keys[signer]])

    _push(
        node, signed(SetCode(AccountName(CONTRACT), kv_contract.wasm(), kv_contract.ABI), CONTRACT)
    )
    abi = parse_abi(kv_contract.ABI)
    answer: dict[str, Any] = {}
    for id_, owner, amount in ROWS:
        data = abi.encode_action("put", {"id": id_, "owner": owner, "amount": amount})
        call = Call(AccountName(CONTRACT), "put", (AccountName(ACCOUNT),), data)
        answer = _push(node, signed(call, ACCOUNT))
    return int(answer["block_num"])


def _text(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{k: str(v) for k, v in row.items()} for row in rows]


def _run_clients(node: NodeProcess, block_num: int) -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        ["node", "clients.js", node.url, ACCOUNT, CONTRACT, str(block_num)],
        cwd=CLIENTS,
        capture_output=True,
        text=True,
        timeout=60 * SLOWDOWN,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return result


def test_wharfkit_and_eosjs_decode_every_antelope_route_bor_serves(nodes: Nodes) -> None:
    """WharfKit and eosjs each decode get_info, get_block (a block with a transaction),
    get_account, get_abi, get_code, get_table_rows (paged by next_key; the rows' bytes
    decoded by each client's serializer with the ABI the node gave), the native token's
    balance and supply and get_producers, with BoR's values in Antelope's fields."""
    _install()
    node = nodes.devnet().start(wait_head=1)
    block_num = _deploy(node)
    answers = _run_clients(node, block_num)
    for client in ("wharfkit", "eosjs"):
        for call in CALLS:
            assert answers[client][call]["ok"], (client, call, answers[client][call])
    got = {client: {c: a["value"] for c, a in calls.items()} for client, calls in answers.items()}
    wharfkit, eosjs = got["wharfkit"], got["eosjs"]
    block = node.rpc("/v1/chain/get_block", {"block_num_or_id": block_num})
    account = node.rpc("/v1/chain/get_account", {"account_name": ACCOUNT})
    producers = node.rpc("/v1/chain/get_producers", {})
    rows = [{"id": i, "owner": o, "amount": a} for i, o, a in ROWS]
    for decoded in (wharfkit, eosjs):
        assert decoded["get_block"]["producer_signature"] == block["producer_signature"]
        assert decoded["get_currency_balance"] == [account["core_liquid_balance"]]
        assert decoded["get_currency_stats"]["BOR"]["supply"].endswith(" BOR")
        assert _text(decoded["get_table_rows_hex"]) == _text(rows)  # JS writes u64s as text
    assert _text(wharfkit["get_table_rows"]) == _text(rows) and eosjs["get_table_rows"] == rows
    last = block["transactions"][-1]["id"]
    assert wharfkit["get_block"]["transactions"][-1] == {"id": last, "status": "executed"}
    assert eosjs["get_block"]["transactions"][-1]["trx"]["id"] == last
    assert wharfkit["get_account"]["core_liquid_balance"] == account["core_liquid_balance"]
    assert wharfkit["get_account"]["permissions"][1]["perm_name"] == "active"
    assert wharfkit["get_abi"]["structs"] == eosjs["get_abi"]["abi"]["structs"]
    assert wharfkit["get_code"]["code_hash"] == eosjs["get_code"]["code_hash"]
    assert wharfkit["get_code"]["wasm"] == kv_contract.wasm().hex()
    owners = [r["owner"] for r in producers["rows"]]
    assert [r["owner"] for r in wharfkit["get_producers"]["rows"]] == owners
    assert [r["owner"] for r in eosjs["get_producers"]["rows"]] == owners
    assert (
        wharfkit["get_producers"]["rows"][0]["producer_key"] == producers["rows"][0]["producer_key"]
    )
