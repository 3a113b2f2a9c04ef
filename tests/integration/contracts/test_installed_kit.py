"""The contract kit as a user gets it: the project installed (not editable) into a fresh
venv, away from this checkout, gives a ``bor-contract`` that starts a contract, builds it and
the examples (installing the pinned compiler into its cache from the shipped lock), and a
``contract_chain`` fixture that the new contract's own test runs with; docs/contracts.md's
bank (two tables, a secondary index, a notification handler, read-only actions) is built
and tested with them too. One test, run once: it installs the project (pip's cache makes
that seconds, not a download)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.contract_tools.conftest import require_toolchain
from tests.integration.contracts.test_contracts_doc import blocks

ROOT = Path(__file__).resolve().parents[3]
INSTALL_TIMEOUT_S = 600
# The bank's test, as its author would write it with the installed fixture: a deposit is a
# token transfer the bank hears of (its @on_notify handler credits the sender), its balance
# and an author's notes (through the byauthor index) are read-only calls.
BANK_TEST = """
from pathlib import Path

from contract_tools.testing import LocalChain


def test_bank(contract_chain: LocalChain) -> None:
    chain = contract_chain
    chain.deploy("token", Path("token"))
    chain.deploy("bank", Path("bank"))
    chain.push("token", "create", {"issuer": "alice", "maximum_supply": "100.0000 TOK"}, "token")
    chain.push("token", "issue", {"to": "alice", "quantity": "10.0000 TOK", "memo": ""}, "alice")
    sent = {"from": "alice", "to": "bank", "quantity": "2.5000 TOK", "memo": "deposit"}
    result = chain.push("token", "transfer", sent, auth="alice")
    assert ("credited", {"owner": "alice", "amount": "2.5000 TOK"}) in result.events
    assert chain.rows("bank", "bank", "balances") == [{"owner": "alice", "amount": "2.5000 TOK"}]
    assert chain.call("bank", "balanceof", {"owner": "alice"}) == "2.5000 TOK"
    for id_, author in ((7, "bob"), (3, "bob"), (5, "carol")):
        chain.push("bank", "note", {"id": id_, "author": author, "text": "hi"}, auth=author)
    assert chain.call("bank", "notesby", {"author": "bob"}) == [3, 7]
"""


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=INSTALL_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{cmd}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done.stdout


def test_an_installed_kit_inits_builds_and_tests_contracts(tmp_path: Path) -> None:
    """pip install (no -e) of the project; bor-contract init prints the next commands; the
    new contract and both examples build with the SDK shipped in the package (its npm
    packages installed once into BOR_CONTRACT_CACHE); the new contract's test passes with
    the installed fixture."""
    require_toolchain()
    if shutil.which("npm") is None:
        pytest.skip("npm is needed to install the compiler")
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["BOR_CONTRACT_CACHE"] = str(tmp_path / "cache")
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path, env=env)
    python = venv / "bin" / "python"
    quiet = ["--quiet", "--disable-pip-version-check"]
    _run(python, "-m", "pip", "install", *quiet, ROOT, "pytest", cwd=tmp_path, env=env)
    tool = venv / "bin" / "bor-contract"

    said = _run(tool, "init", "hello", cwd=tmp_path, env=env)
    assert said.splitlines()[:3] == ["wrote hello/hello.ts", "wrote hello/test_hello.py", "next:"]
    assert "  bor-contract build hello" in said and "bor-wallet set code hello" in said
    _run(tool, "build", "hello", cwd=tmp_path, env=env)
    for example in ("token", "registry"):
        shutil.copytree(ROOT / "contracts" / "examples" / example, tmp_path / example)
        built = _run(tool, "build", example, cwd=tmp_path, env=env)
        assert f"{example}/build/{example}.wasm (" in built
    assert [p.name for p in (tmp_path / "cache").iterdir()] != []
    assert not (tmp_path / "hello" / "abi.json").exists()
    tested = _run(python, "-m", "pytest", "-q", "hello", cwd=tmp_path, env=env)
    assert "1 passed" in tested

    (tmp_path / "bank").mkdir()
    (tmp_path / "bank" / "bank.ts").write_text(blocks("ts")[0])  # the document's contract
    _run(tool, "build", "bank", cwd=tmp_path, env=env)
    (tmp_path / "test_bank.py").write_text(BANK_TEST)
    tested = _run(python, "-m", "pytest", "-q", "test_bank.py", cwd=tmp_path, env=env)
    assert "1 passed" in tested
