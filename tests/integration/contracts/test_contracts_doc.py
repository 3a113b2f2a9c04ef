"""docs/contracts.md's examples, taken from the document: every AssemblyScript snippet
compiles with bor-contract build (its ABI checked as setcode checks it), and the Python test
it shows passes with the contract_chain fixture."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from contract_tools.build import build
from scripts.sdk_reference import BEGIN, END
from tests.contract_tools.conftest import require_toolchain

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "contracts.md"


def blocks(language: str) -> list[str]:
    """The document's ``language`` blocks, but the SDK reference's (a list of signatures,
    checked against the sources by tests/scripts/test_sdk_reference.py)."""
    text = re.sub(f"{BEGIN}.*?{END}", "", DOC.read_text(), flags=re.S)
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)


@pytest.mark.parametrize("index", range(len(blocks("ts"))))
def test_every_assemblyscript_snippet_builds(tmp_path: Path, index: int) -> None:
    """Each ```ts block of the document is a contract that builds, module and ABI."""
    require_toolchain()
    directory = tmp_path / f"snippet{index}"
    directory.mkdir()
    (directory / f"snippet{index}.ts").write_text(blocks("ts")[index])
    built = build(directory)
    assert built.size > 0 and built.abi.is_file()


def test_the_documented_contract_test_passes(tmp_path: Path) -> None:
    """The document's ```python test runs as written (from the repository's root) and passes."""
    require_toolchain()
    (source,) = blocks("python")
    test = tmp_path / "test_doc_token.py"
    test.write_text(source)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:bor_contract",
         "-p", "contract_tools.testing", str(test)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
