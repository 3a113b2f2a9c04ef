"""A real devnet process, the real wallet CLI, and a restart that keeps everything."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.integration.conftest import BIN, Nodes


def _wallet(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "bor-wallet"), *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_wallet_moves_tokens_and_state_survives_restart(nodes: Nodes, tmp_path: Path) -> None:
    """bor-wallet creates, imports, lists, transfers and stakes against a node and fails in one
    line; the node keeps state and blocks across a restart."""
    node = nodes.devnet().start(wait_head=1)
    env = os.environ | {
        "BOR_URL": node.url,
        "BOR_WALLET": str(tmp_path / "test.wallet"),
        "BOR_WALLET_PASSWORD": "correct horse",
    }
    created = _wallet(env, "create", "--label", "spare")
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith("PUB_K1_")
    imported = _wallet(env, "import", "--from-dev-keys", str(node.data_dir / "keys.json"))
    assert imported.returncode == 0, imported.stderr
    listed = _wallet(env, "list").stdout
    assert "alice" in listed and "spare" in listed

    before = json.loads(_wallet(env, "get", "account", "bob").stdout)["balance"]
    sent = _wallet(env, "transfer", "alice", "bob", "12.5", "--memo", "integration")
    assert sent.returncode == 0, sent.stderr
    assert " included in block " in sent.stdout
    tx_id = sent.stdout.split()[1]
    block_num = int(sent.stdout.split()[-1])
    bob = json.loads(_wallet(env, "get", "account", "bob").stdout)
    assert bob["balance"] == before + 125_000
    assert bob["balance_text"].endswith(" BOR")
    tx = json.loads(_wallet(env, "get", "tx", tx_id).stdout)
    assert tx["block_num"] == block_num
    assert tx["actions"][0]["data"]["memo"] == "integration"

    staked = _wallet(env, "stake", "carol", "100")
    assert staked.returncode == 0, staked.stderr

    broke = _wallet(env, "transfer", "alice", "bob", "999999999")
    assert broke.returncode != 0
    assert "insufficient_funds" in broke.stderr and "Traceback" not in broke.stderr
    wrong = _wallet(env | {"BOR_WALLET_PASSWORD": "nope"}, "transfer", "alice", "bob", "1")
    assert wrong.returncode != 0
    assert wrong.stderr.strip().count("\n") == 0 and "wrong password" in wrong.stderr

    info = node.rpc("/v1/chain/get_info")
    carol = node.rpc("/v1/chain/get_account", {"account_name": "carol"})
    assert node.stop() == 0
    assert '"event": "node_stopped"' in node.tail()

    node.start(wait_head=1)
    again = node.rpc("/v1/chain/get_info")
    assert again["chain_id"] == info["chain_id"]
    assert again["head_block_num"] >= info["head_block_num"]
    block = node.rpc("/v1/chain/get_block", {"block_num_or_id": info["head_block_num"]})
    assert block["id"] == info["head_block_id"]
    assert node.rpc("/v1/chain/get_account", {"account_name": "bob"})["balance"] == bob["balance"]
    assert node.rpc("/v1/chain/get_account", {"account_name": "carol"})["staked"] == carol["staked"]
    assert json.loads(_wallet(env, "get", "tx", tx_id).stdout)["block_num"] == block_num
    node.wait_for_head(again["head_block_num"] + 2)  # and it keeps producing
