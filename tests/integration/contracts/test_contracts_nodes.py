"""Contracts on real node processes: the example token built with ``bor-contract``, deployed
and driven with ``bor-wallet`` and the RPC on three producers that must agree block by block,
through a restart with a cold module cache, a hostile contract and a stream subscriber."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import wasmtime

from chain.abi import Abi, parse_abi
from chain.core.execution.actions import Call
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName, BlockId
from node.commands.devnet import prepare
from tests.contract_tools.conftest import require_toolchain
from tests.integration.api.stream_clients import Follower, dev_keys
from tests.integration.conftest import BIN, NodeProcess, Nodes, loopback_plan, wait_for

EXAMPLES = Path(__file__).parents[3] / "contracts" / "examples"
USERS = ("alice", "bob", "carol")
SYMBOL_CODE = "4935508"  # "TOK" as the u64 primary key of an accounts row
# An apply that never returns: only fuel stops it.
LOOP_WAT = """(module (memory (export "memory") 1)
  (func (export "apply") (param i64 i64 i64) (loop $l (br $l))))"""
# Blocks nested one deeper than setcode admits: slow to compile, were it larger.
NESTED_WAT = (
    '(module (memory (export "memory") 1) (func (export "apply") (param i64 i64 i64) '
    + "(block " * 129
    + ")" * 129
    + "))"
)


@pytest.fixture(scope="module")
def token(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The example token built by ``bor-contract build`` (in a copy: the tree stays clean)."""
    require_toolchain()
    directory = tmp_path_factory.mktemp("contracts") / "token"
    shutil.copytree(EXAMPLES / "token", directory, ignore=shutil.ignore_patterns("build"))
    built = subprocess.run(
        [str(BIN / "bor-contract"), "build", str(directory)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    return directory / "build" / "token.wasm", directory / "build" / "token.abi.json"


def three_producers(nodes: Nodes, tmp: Path) -> list[NodeProcess]:
    """Three producer nodes of one dev chain, node i dialing every node before it."""
    plan = loopback_plan(3)
    prepare(tmp, plan)
    for node in plan:
        with (tmp / node.name / "config.ini").open("a") as ini:
            ini.write("signature-workers = 0\n")  # three nodes share two cores
    procs = [
        nodes.run(tmp / n.name, rpc_port=n.rpc[1], admin_port=n.admin and n.admin[1]) for n in plan
    ]
    for proc in procs:
        proc.start(wait_head=1)
    return procs


class Wallet:
    """``bor-wallet`` against one node, holding every dev key."""

    def __init__(self, tmp: Path, url: str) -> None:
        self.env = os.environ | {
            "BOR_URL": url,
            "BOR_WALLET": str(tmp / "test.wallet"),
            "BOR_WALLET_PASSWORD": "correct horse",
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "bor-wallet"), *args],
            env=self.env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    def ok(self, *args: str) -> str:
        done = self.run(*args)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout


def balances(node: NodeProcess) -> dict[str, str]:
    """Each dev user's TOK balance as the node's get_table_rows shows it."""
    out = {}
    for user in USERS:
        rows = node.rpc(
            "/v1/chain/get_table_rows", {"code": "token", "scope": user, "table": "accounts"}
        )["rows"]
        out[user] = rows[0]["balance"] if rows else ""
    return out


def push_token_transfers(
    node: NodeProcess, keys: dict[str, PrivateKey], abi: Abi, count: int
) -> dict[str, int]:
    """Push ``count`` contract transfers round the dev users (each admitted before the next
    is sent, so a refusal shows here; they pile into blocks);
    return each user's expected change, in units of 0.0001 TOK."""
    chain_id = bytes.fromhex(node.info()["chain_id"])
    ref = tapos_of(BlockId(bytes.fromhex(node.info()["head_block_id"])))
    change = dict.fromkeys(USERS, 0)
    for n in range(count):
        sender, recipient = USERS[n % 3], USERS[(n + 1) % 3]
        amount = 1 + n % 7
        data = abi.encode_action(
            "transfer",
            {"from": sender, "to": recipient, "quantity": f"0.{amount:04d} TOK", "memo": str(n)},
        )
        call = Call(AccountName("token"), "transfer", (AccountName(sender),), data)
        tx = Transaction(int(time.time()) + 120, ref[0], ref[1], (call,))
        stx = SignedTransaction.sign(tx, chain_id, [keys[sender]])
        body = {"packed_trx": stx.packed.hex(), "signatures": [stx.signatures[0].hex()]}
        answer = node.rpc("/v1/chain/push_transaction", body | {"mode": "sync"})
        assert answer["status"] == "accepted", answer
        change[sender] -= amount
        change[recipient] += amount
    return change


def tok(units: int) -> str:
    return f"{units // 10_000}.{units % 10_000:04d} TOK"


def agree_at(procs: list[NodeProcess], num: int) -> dict[str, Any]:
    """Block ``num`` (id and state root) as every node has it; they must all have the same."""
    seen = [p.rpc("/v1/chain/get_block", {"block_num_or_id": num}) for p in procs]
    for block in seen[1:]:
        assert (block["id"], block["state_root"]) == (seen[0]["id"], seen[0]["state_root"]), num
    return dict(seen[0])


def _check_hostile_modules_refused(wallet: Wallet, tmp_path: Path) -> None:
    """An endless loop is refused at the door by name (out of fuel), and a module past
    setcode's structural limits before it is compiled, each in words, never a traceback."""
    looping = tmp_path / "loop.wasm"
    looping.write_bytes(wasmtime.wat2wasm(LOOP_WAT))
    wallet.ok("set", "code", "loop", str(looping))
    refused = wallet.run("push", "action", "loop", "run", "00", "--hex", "--auth", "alice")
    assert refused.returncode != 0
    assert "resource_exceeded" in refused.stderr, refused.stderr
    assert "loop::run: out of fuel (max_tx_fuel 20000000)" in refused.stderr
    assert "Traceback" not in refused.stderr
    # A module past setcode's structural limits is refused before it is compiled, by name.
    nested = tmp_path / "nested.wasm"
    nested.write_bytes(wasmtime.wat2wasm(NESTED_WAT))
    refused = wallet.run("set", "code", "loop", str(nested))
    assert refused.returncode != 0
    assert "module has 129 nested blocks, past the limit of 128" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_the_token_runs_alike_on_three_producers_through_a_restart_and_a_hostile_contract(
    nodes: Nodes, tmp_path: Path, token: tuple[Path, Path]
) -> None:
    """The built token deploys and runs on three producers by the wallet and the RPC; every
    node holds the same blocks, state roots and rows; a restarted node (its module cache
    cold, the compiled token on disk) keeps agreeing and applying; an endless loop and a module
    past the structural limits are refused by name while blocks go on; a stream subscriber
    sees the contract's transfer event."""
    procs = three_producers(nodes, tmp_path)
    wait_for(lambda: all(p.info()["peer_count"] == 2 for p in procs), 30, "full mesh")
    wasm, abi_path = token
    abi = parse_abi(abi_path.read_text())
    keys = dev_keys(tmp_path)
    wallet = Wallet(tmp_path, procs[0].url)
    wallet.ok("import", "--from-dev-keys", str(tmp_path / "keys.json"))
    key = wallet.ok("create", "--label", "contracts").strip()
    events = Follower(procs[1].url, {"stream": "actions", "accounts": ["token"]})
    assert events.subscribed, events.frames

    # Deploy, create, issue and spread the token with the wallet, as a user would.
    wallet.ok("newaccount", "bor.gov", "token", key)
    wallet.ok("newaccount", "bor.gov", "loop", key)
    wallet.ok("set", "code", "token", str(wasm), "--abi", str(abi_path))
    code = procs[2].rpc("/v1/chain/get_code", {"account": "token"})
    assert code["code_bytes"] == wasm.stat().st_size
    create = {"issuer": "alice", "maximum_supply": "1000000.0000 TOK"}
    wallet.ok("push", "action", "token", "create", json.dumps(create), "--auth", "token")
    issue = {"to": "alice", "quantity": "900.0000 TOK", "memo": "start"}
    issued = wallet.ok("push", "action", "token", "issue", json.dumps(issue), "--auth", "alice")
    assert 'token::issue event issue: {"to": "alice", "quantity": "900.0000 TOK"' in issued
    for user in ("bob", "carol"):
        spread = {"from": "alice", "to": user, "quantity": "300.0000 TOK", "memo": "share"}
        wallet.ok("push", "action", "token", "transfer", json.dumps(spread), "--auth", "alice")
    start = 300 * 10_000

    # Many transfers through the RPC, then every node has the same outcome.
    change = push_token_transfers(procs[0], keys, abi, 150)
    expected = {user: tok(start + change[user]) for user in USERS}
    for proc in procs:
        wait_for(lambda p=proc: balances(p) == expected, 40, f"the transfers on {proc.url}")  # type: ignore[misc]
    head = min(int(p.info()["head_block_num"]) for p in procs)
    agree_at(procs, head)
    rows = [json.dumps(balances(p)) for p in procs]
    assert rows == [rows[0]] * 3

    # A restarted node takes the token compiled from its data dir, keeps agreeing and
    # applies new blocks.
    digest = code["code_hash"]
    for proc in procs:
        assert (proc.data_dir / "compiled-contracts" / f"{digest}.cwasm").exists()
    assert procs[2].stop() == 0
    procs[2].start(wait_head=head)
    more = push_token_transfers(procs[2], keys, abi, 30)
    expected = {user: tok(start + change[user] + more[user]) for user in USERS}
    for proc in procs:
        wait_for(lambda p=proc: balances(p) == expected, 40, f"more transfers on {proc.url}")  # type: ignore[misc]
    later = min(int(p.info()["head_block_num"]) for p in procs)
    assert later > head
    agree_at(procs, later)

    _check_hostile_modules_refused(wallet, tmp_path)
    after = max(int(p.info()["head_block_num"]) for p in procs)
    for proc in procs:
        proc.wait_for_head(after + 3)
    agree_at(procs, after + 2)

    # The contract's events reached the stream, decoded back to what was sent.
    def streamed() -> list[Any]:
        return [
            abi.decode_event(e["name"], bytes.fromhex(e["hex"]))
            for frame in events.of_type("actions")
            for action in frame["actions"]
            for e in action.get("events", ())  # a native action (setcode) has none
            if e["name"] == "transfer"
        ]

    wait_for(lambda: len(streamed()) >= 182, 20, "every transfer event on the stream")
    events.stop()
    assert {"from": "alice", "to": "bob", "quantity": "300.0000 TOK", "memo": "share"} in streamed()
    assert {"from": "alice", "to": "bob", "quantity": "0.0001 TOK", "memo": "0"} in streamed()
