"""``bor-contract build`` with the real pinned AssemblyScript compiler."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import wasmtime

from chain.vm import structure
from chain.vm.validate import HOST_SIGNATURES
from contract_tools.build import CONTRACTS_DIR, Built
from contract_tools.cli import main
from tests.contract_tools.conftest import require_toolchain


@pytest.mark.parametrize("example", ["token", "registry"])
def test_examples_build_to_modules_the_node_accepts(
    example: str, request: pytest.FixtureRequest
) -> None:
    """Each example builds to a module that imports only host functions of the allow-list,
    exports apply and memory, has no start section, and comes with its ABI."""
    built: Built = request.getfixturevalue(example)
    code = built.wasm.read_bytes()
    module = wasmtime.Module(wasmtime.Engine(), code)
    imports = {(i.module, i.name) for i in module.imports}
    assert imports, "a contract calls the host"
    assert all(m == "env" and n in HOST_SIGNATURES for m, n in imports)
    assert {e.name for e in module.exports} == {"apply", "memory"}
    assert built.abi.read_text().startswith('{"version":"bor::abi/1"')


def test_build_is_reproducible(token: Built, tmp_path: Path) -> None:
    """The same source builds to the same bytes: the flags are fixed, not per machine."""
    again = tmp_path / "token"
    shutil.copytree(token.wasm.parent.parent, again, ignore=shutil.ignore_patterns("build"))
    assert main(["build", str(again)]) == 0
    assert (again / "build" / "token.wasm").read_bytes() == token.wasm.read_bytes()


def test_broken_source_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A source that does not compile exits non-zero with one line naming the error and where."""
    require_toolchain()
    broken = tmp_path / "broken"
    shutil.copytree(
        CONTRACTS_DIR / "examples" / "token", broken, ignore=shutil.ignore_patterns("build")
    )
    (broken / "token.ts").rename(broken / "broken.ts")
    source = broken / "broken.ts"
    source.write_text(source.read_text().replace("requireAuth(from);", "requireAuthh(from);"))
    assert main(["build", str(broken)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "requireAuthh" in err and "broken.ts(" in err


def test_forbidden_import_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A contract importing a host function the node does not have fails the build, naming it."""
    require_toolchain()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "bad.ts").write_text(
        '@external("env", "get_secret") declare function get_secret(): i64;\n'
        "export function apply(r: u64, c: u64, a: u64): void { get_secret(); }\n"
    )
    (bad / "abi.json").write_text('{"version": "bor::abi/1", "structs": [], "actions": []}')
    assert main(["build", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "would be refused by setcode" in err and "env.get_secret" in err


def test_missing_toolchain_says_how_to_get_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without node on PATH the build says to run scripts/bootstrap.sh, in one line."""
    monkeypatch.setenv("PATH", str(tmp_path))
    shutil.copytree(
        CONTRACTS_DIR / "examples" / "token",
        tmp_path / "token",
        ignore=shutil.ignore_patterns("build"),
    )
    assert main(["build", str(tmp_path / "token")]) == 1
    err = capsys.readouterr().err
    assert (
        err == "bor-contract: npm toolchain missing (no node on PATH): run scripts/bootstrap.sh\n"
    )


def test_init_writes_a_contract_that_builds(tmp_path: Path) -> None:
    """`bor-contract init` gives a contract that `bor-contract build` accepts."""
    require_toolchain()
    assert main(["init", str(tmp_path / "hello")]) == 0
    assert main(["build", str(tmp_path / "hello")]) == 0
    assert (tmp_path / "hello" / "build" / "hello.wasm").is_file()


def test_the_example_contracts_are_far_within_the_compile_limits(
    token: Built, registry: Built
) -> None:
    """A real contract, as the SDK builds it, costs a small share of setcode's compile budget
    and is far inside every structural limit (the limits leave contracts room to grow)."""
    for built in (token, registry):
        s = structure.check_structure(built.wasm.read_bytes())
        assert s.compile_cost * 5 < structure.MAX_COMPILE_COST
        assert s.max_function_control * 4 < structure.MAX_FUNCTION_CONTROL
        assert s.max_nesting * 4 < structure.MAX_NESTING
