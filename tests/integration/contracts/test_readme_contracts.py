"""The README's contract walkthrough, taken from the README itself, runs as written against a
real devnet: build, create the account, deploy, create, issue, transfer, read the tables."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import BIN, Nodes

ROOT = Path(__file__).resolve().parents[3]


def _readme_steps() -> list[str]:
    """The commands of the README's first ```sh block under "## Contracts"."""
    section = (ROOT / "README.md").read_text().split("\n## Contracts\n", 1)[1]
    block = re.search(r"^```sh\n(.*?)^```", section, re.M | re.S)
    assert block is not None, "the Contracts section has no sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


@pytest.mark.skipif(shutil.which("npm") is None, reason="no npm: scripts/bootstrap.sh installs it")
def test_the_readmes_token_walkthrough_runs_as_written(nodes: Nodes, tmp_path: Path) -> None:
    """Every README step exits 0 (the account's key is the one `create` printed), and the
    tables then show bob's 25.5 TOK and the token's supply."""
    node = nodes.devnet().start(wait_head=1)
    env = os.environ | {
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        "BOR_URL": node.url,
        "BOR_WALLET": str(tmp_path / "readme.wallet"),
        "BOR_WALLET_PASSWORD": "dev",
    }
    keys = str(node.data_dir / "keys.json")
    imported = subprocess.run(
        [str(BIN / "bor-wallet"), "import", "--from-dev-keys", keys],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    outputs: list[str] = []
    key = ""
    for step in _readme_steps():
        command = step.replace("PUB_K1_...", key)
        done = subprocess.run(
            ["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{command}: {done.stderr}"
        assert "Traceback" not in done.stderr
        if " create " in f" {command} " and "--label" in command:
            key = done.stdout.strip().splitlines()[-1]
            assert key.startswith("PUB_K1_")
        outputs.append(done.stdout)
    bob = json.loads(outputs[-2])["rows"]
    assert [row["balance"] for row in bob] == ["25.5000 TOK"]
    stat = json.loads(outputs[-1])["rows"][0]
    assert (stat["supply"], stat["issuer"]) == ("1000.0000 TOK", "alice")
    assert "event transfer" in outputs[-3]
