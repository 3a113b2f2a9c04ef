"""Built example contracts for the tests: compiled once per session with the pinned asc,
in a copy of each example so the tests never write into the source tree."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from contract_tools.build import CONTRACTS_DIR, SDK_DIR, Built, build

NPM_CI_TIMEOUT_S = 300


def require_toolchain() -> None:
    """Skip without node/npm; install the pinned packages when only they are missing (what
    scripts/bootstrap.sh does), so a machine with npm runs these tests."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm not installed: scripts/bootstrap.sh installs them")
    if not (SDK_DIR / "node_modules" / "assemblyscript").is_dir():
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=SDK_DIR, check=True, timeout=NPM_CI_TIMEOUT_S,
        )  # fmt: skip


def build_copy(tmp_root: Path, example: str) -> Built:
    require_toolchain()
    directory = tmp_root / example
    shutil.copytree(
        CONTRACTS_DIR / "examples" / example, directory, ignore=shutil.ignore_patterns("build")
    )
    return build(directory)


@pytest.fixture(scope="session")
def token(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_copy(tmp_path_factory.mktemp("contracts"), "token")


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_copy(tmp_path_factory.mktemp("contracts"), "registry")


TEST_CONTRACTS_DIR = Path(__file__).resolve().parent / "contracts"


@pytest.fixture(scope="session")
def tablekit(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The SDK's table API under test (tests/contract_tools/contracts/tablekit)."""
    require_toolchain()
    directory = tmp_path_factory.mktemp("contracts") / "tablekit"
    shutil.copytree(TEST_CONTRACTS_DIR / "tablekit", directory)
    return build(directory)


@pytest.fixture(scope="session")
def hostkit(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The SDK's inline actions, hashes, key recovery and time types under test."""
    require_toolchain()
    directory = tmp_path_factory.mktemp("contracts") / "hostkit"
    shutil.copytree(TEST_CONTRACTS_DIR / "hostkit", directory)
    return build(directory)
