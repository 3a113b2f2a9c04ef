"""A node started with its addresses as flags says where it listens in its data dir's
node.json, so that ``bor-node status`` and the "a node is running" hint find it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from scripts.make_history import make_history
from tests.integration.conftest import BIN, Nodes
from tests.support.wait import SLOWDOWN


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "bor-node"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=30 * SLOWDOWN,
    )


def test_status_and_the_in_use_hint_find_a_node_started_with_flags(
    nodes: Nodes, tmp_path: Path
) -> None:
    """With the RPC and admin addresses given as flags (config.ini names none), status
    --data-dir asks the node's real RPC, from node.json; export names the admin URL to
    curl; a clean stop removes node.json."""
    data = tmp_path / "history"
    make_history(data, txs=50, per_block=5, accounts=10)
    node = nodes.run(data).start()  # fresh ports as flags
    written = json.loads((data / "node.json").read_text())
    assert (written["rpc"], written["admin"]) == (node.url, node.admin_url)
    assert written["chain_id"] == node.info()["chain_id"]

    done = _cli("status", "--data-dir", data, "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert (status["url"], status["address_from"]) == (node.url, str(data / "node.json"))

    refused = _cli("export", "--data-dir", data, "--to", tmp_path / "h.log")
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith(
        f"stop it or use its admin API: curl -X POST {node.admin_url}/v1/node/export_history"
    ), refused.stderr

    assert node.stop() == 0
    assert not (data / "node.json").exists()


def test_the_devnet_banner_activates_the_venv_before_the_wallet_lines(nodes: Nodes) -> None:
    """Run from a virtual environment (as scripts/devnet.sh runs it), the devnet's hint
    sources its activate script before the bor-wallet lines, and transfers the README's
    amount."""
    running = nodes.devnet(producers=1).start()
    activate = Path(sys.prefix) / "bin" / "activate"
    shown = activate.relative_to(Path.cwd()) if activate.is_relative_to(Path.cwd()) else activate
    hint = running.log.read_text()
    assert f"  . {shown}\n" in hint, hint
    assert hint.index(f". {shown}") < hint.index("bor-wallet import")
    assert "bor-wallet transfer alice bob 10.5 --memo hello" in hint
