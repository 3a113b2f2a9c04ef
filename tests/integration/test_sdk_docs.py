"""docs/sdk.md and the README's SDK example, taken from the documents themselves, run as
written against a real devnet with the example token deployed: every snippet completes and
does what its comments say (a transfer included, one refusal in a batch, bob's 25.5 TOK, the
stream's blocks and a cursor file)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bor_client import Client, Signer
from chain.core.execution.actions import NewAccount, SetCode
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import account_name
from tests.integration.conftest import BIN, NodeProcess, Nodes

ROOT = Path(__file__).resolve().parents[2]
URL = "http://127.0.0.1:8888"


def python_blocks(doc: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)


def _localized(code: str, node: NodeProcess, cursor: Path) -> str:
    """``code`` pointed at ``node`` (its URL, its keys.json) and a cursor file of the test's."""
    code = code.replace(URL, node.url)
    code = code.replace('"devnet-data/keys.json"', repr(str(node.data_dir / "keys.json")))
    return code.replace('"cursor.json"', repr(str(cursor)))


def _deploy_token(node: NodeProcess, tmp_path: Path) -> PrivateKey:
    """The README's example token, built by ``bor-contract`` and deployed at ``token`` with a
    new key (returned), through the SDK."""
    source = tmp_path / "token"
    shutil.copytree(
        ROOT / "contracts/examples/token", source, ignore=shutil.ignore_patterns("build")
    )
    built = subprocess.run(
        [str(BIN / "bor-contract"), "build", str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    key = PrivateKey.generate()
    keys = json.loads((node.data_dir / "keys.json").read_text())
    client = Client(node.url, Signer([*keys.values(), key]))
    token = account_name("token")
    client.push([NewAccount(account_name("bor.gov"), token, key.public_key)])
    wasm, abi = (source / "build/token.wasm").read_bytes(), (source / "build/token.abi.json")
    client.push([SetCode(token, wasm, abi.read_text())])
    return key


@pytest.fixture
def devnet(nodes: Nodes, tmp_path: Path) -> tuple[NodeProcess, PrivateKey]:
    if shutil.which("npm") is None:
        pytest.skip("no npm: scripts/bootstrap.sh installs it (the token is built with it)")
    node = nodes.devnet().start(wait_head=1)
    return node, _deploy_token(node, tmp_path)


def _run(code: str, namespace: dict[str, Any]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs", "exec"), namespace)
    return out.getvalue()


def test_every_sdk_doc_example_runs_against_a_devnet(
    devnet: tuple[NodeProcess, PrivateKey], tmp_path: Path
) -> None:
    """Each docs/sdk.md example, in order in one namespace, runs and prints what it says."""
    node, token_key = devnet
    cursor = tmp_path / "cursor.json"
    blocks = [_localized(b, node, cursor) for b in python_blocks(ROOT / "docs/sdk.md")]
    namespace: dict[str, Any] = {}
    outputs = [_run(blocks[0], namespace)]
    namespace["client"].builder.signer.add(token_key)  # "with the token's key in the signer"
    outputs += [_run(block, namespace) for block in blocks[1:]]
    connect, transfer, batch, contract, table, call, follow, pays, errors = outputs
    assert "BOR" in connect and "included" in transfer
    assert batch.splitlines()[0] == "1 refused" and "404" in batch.splitlines()[1]
    assert "transfer" in contract  # the trace's event
    assert "('25.5000 TOK',)" in table and "overdrawn balance" in call
    assert [line.split()[0] for line in follow.splitlines()][-3:] == ["block"] * 3
    assert json.loads(cursor.read_text())["num"] >= 3
    assert pays.count("accepted") == 20
    assert errors.splitlines()[0].startswith("404 ") and "CannotPay" in errors


def test_the_readmes_sdk_example_runs_against_a_devnet(
    devnet: tuple[NodeProcess, PrivateKey], tmp_path: Path
) -> None:
    """The README's SDK example pushes a transfer, reads bob's token rows, and follows the
    stream (the test stops it after a few frames)."""
    node, token_key = devnet
    keys = json.loads((node.data_dir / "keys.json").read_text())
    token = Client(node.url, Signer([*keys.values(), token_key])).contract("token")
    token.push("create", {"issuer": "alice", "maximum_supply": "100.0000 TOK"}, "token")
    token.push("issue", {"to": "alice", "quantity": "7.0000 TOK", "memo": ""}, "alice")
    token.push(
        "transfer", {"from": "alice", "to": "bob", "quantity": "7.0000 TOK", "memo": ""}, "alice"
    )
    (code,) = [b for b in python_blocks(ROOT / "README.md") if "bor_client" in b]
    lines = [line for line in code.splitlines() if not line.startswith("asyncio.run(")]
    namespace: dict[str, Any] = {}
    cursor = tmp_path / "cursor.json"
    printed = _run(_localized("\n".join(lines), node, cursor), namespace)
    assert printed.splitlines()[0] == "included" and "7.0000 TOK" in printed

    async def watch_a_while() -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(namespace["watch"](node.url), 3)

    followed = io.StringIO()
    with contextlib.redirect_stdout(followed):
        asyncio.run(watch_a_while())
    assert "BlockFrame" in followed.getvalue()
