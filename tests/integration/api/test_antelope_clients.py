"""Antelope's own JavaScript clients, the pinned ``@wharfkit/antelope`` and ``eosjs`` of
tests/integration/antelope, against a running devnet node: each call BoR supports decodes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import NodeProcess, Nodes
from tests.support.wait import SLOWDOWN

CLIENTS = Path(__file__).parents[1] / "antelope"
ACCOUNT = "alice"  # a devnet user
# Calls each client decodes into its own types (WharfKit checks every field's type).
DECODED = {
    "wharfkit": ("get_info", "get_account", "get_currency_balance", "get_currency_stats"),
    "eosjs": ("get_info", "get_block", "get_account", "get_currency_balance", "get_currency_stats"),
}
# Calls that reach their handler (an account without a contract: 404, not a 400 for the field).
REACHED = ("get_abi", "get_code")


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


def _run_clients(node: NodeProcess) -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        ["node", "clients.js", node.url, ACCOUNT],
        cwd=CLIENTS,
        capture_output=True,
        text=True,
        timeout=60 * SLOWDOWN,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return result


def test_wharfkit_and_eosjs_decode_what_bor_answers(nodes: Nodes) -> None:
    """WharfKit and eosjs decode get_info, get_account and the native token's balance and
    supply (eosjs get_block too), and reach get_abi and get_code under account_name; the
    one known gap, WharfKit's get_block, still fails on the hex producer signature."""
    _install()
    node = nodes.devnet().start(wait_head=1)
    answers = _run_clients(node)
    for client, calls in DECODED.items():
        for call in calls:
            assert answers[client][call]["ok"], (client, call, answers[client][call])
        for call in REACHED:
            assert answers[client][call]["status"] == 404, (client, call, answers[client][call])
    account = node.rpc("/v1/chain/get_account", {"account_name": ACCOUNT})
    for client in DECODED:
        balances = answers[client]["get_currency_balance"]["value"]
        assert balances == [account["core_liquid_balance"]], client
        assert answers[client]["get_currency_stats"]["value"]["BOR"]["supply"].endswith(" BOR")
    wharfkit_account = answers["wharfkit"]["get_account"]["value"]
    assert wharfkit_account["core_liquid_balance"] == account["core_liquid_balance"]
    assert wharfkit_account["permissions"][1]["perm_name"] == "active"
    # BoR signs with 65 bytes shown as hex; WharfKit reads only SIG_K1_ text (the SDK's turn).
    gap = answers["wharfkit"]["get_block"]
    assert not gap["ok"] and "producer_signature" in gap["error"], gap
