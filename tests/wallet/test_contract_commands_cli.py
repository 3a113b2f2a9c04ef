"""The contract commands of the installed `bor-wallet` and `bor-contract`, run as processes:
each kind of bad input is one line on stderr and exit 1, never a traceback, before any node is
asked (the URL below answers nothing)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def _run(tool: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / tool), *args], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("tool", "args", "says"),
    [
        ("bor-wallet", ["set", "code", "alice", "{missing}"], "cannot read the module"),
        ("bor-wallet", ["set", "code", "alice", "{notwasm}"], "not a WebAssembly module"),
        (
            "bor-wallet",
            ["push", "action", "token", "transfer", "{bad", "--auth", "alice"],
            "not JSON",
        ),
        ("bor-wallet", ["get", "table", "token", "alice"], "usage: get table"),
        ("bor-contract", ["build", "{missing}"], "not a directory"),
        ("bor-contract", ["build", "{badabi}"], "abi.version"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    tmp_path: Path, tool: str, args: list[str], says: str
) -> None:
    """A missing or non-wasm module, action data that is not JSON, a short `get table`, a
    missing contract dir and a bad abi.json each name the problem in one line."""
    (tmp_path / "x.wasm").write_bytes(b"not wasm")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "bad.ts").write_text("export function apply(receiver: u64): void {}\n")
    (bad / "abi.json").write_text("{}")
    paths = {"missing": str(tmp_path / "nope"), "notwasm": str(tmp_path / "x.wasm")}
    paths["badabi"] = str(bad)
    env = os.environ | {
        "BOR_URL": "http://127.0.0.1:9",
        "BOR_WALLET": str(tmp_path / "w.wallet"),
        "BOR_WALLET_PASSWORD": "pw",
    }
    argv = [paths.get(a.strip("{}"), a) if a.startswith("{") else a for a in args]
    done = _run(tool, *argv, env=env)
    assert done.returncode == 1, done
    assert says in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr
