"""Compiled contracts kept on disk: what a restarted node reuses instead of compiling again."""

from __future__ import annotations

from pathlib import Path

import pytest
import wasmtime

from chain.core.execution.state import StateView
from chain.core.primitives.errors import ContractError
from chain.core.primitives.params import ChainParams
from chain.testing import MemoryKV
from chain.vm import ContractRuntime
from chain.vm import runtime as runtime_module
from chain.vm.artefacts import ArtefactDir
from chain.vm.engine import engine
from chain.vm.validate import code_hash
from tests.chain.vm.wat import contract, deploy, run

CODE = contract("(drop (call $current_time))")


def no_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any compilation in the runtime fail the test."""

    def refuse(_engine: wasmtime.Engine, _code: bytes) -> wasmtime.Module:
        raise AssertionError("compiled although a compiled module was at hand")

    monkeypatch.setattr(runtime_module, "compile_module", refuse)


def test_a_kept_module_comes_back_without_compiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runtime on the same directory as one that compiled a contract runs it at once, and
    runs it as the first did."""
    first = ContractRuntime(artefacts=ArtefactDir(tmp_path))
    view = StateView(MemoryKV())
    deploy(view, first, "hostile", CODE)
    assert (tmp_path / f"{code_hash(CODE).hex()}.cwasm").exists()
    before = run(first, view, "hostile")
    no_compiling(monkeypatch)
    restarted = ContractRuntime(artefacts=ArtefactDir(tmp_path))
    assert run(restarted, view, "hostile") == before


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign"])
def test_a_damaged_file_is_compiled_anew(tmp_path: Path, damage: str) -> None:
    """A truncated, altered or foreign file is refused (and removed), never deserialized."""
    kept = ArtefactDir(tmp_path)
    digest = code_hash(CODE)
    kept.store(digest, wasmtime.Module(engine(), CODE))
    path = tmp_path / f"{digest.hex()}.cwasm"
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        path.write_bytes(data[:-10] + bytes([data[-10] ^ 1]) + data[-9:])
    else:
        path.write_bytes(b"\x7fELF" + data[4:])
    assert kept.load(engine(), digest) is None
    assert not path.exists()
    # and the runtime compiles it again, keeping a sound file
    runtime = ContractRuntime(artefacts=kept)
    runtime.validate(CODE, ChainParams())
    assert kept.load(engine(), digest) is not None


def test_the_directory_keeps_the_most_recent(tmp_path: Path) -> None:
    """Past its bound, the least recently stored or used files go first."""
    kept = ArtefactDir(tmp_path, max_files=2)
    codes = [contract(f"(drop (i32.const {i}))") for i in range(3)]
    for code in codes:
        kept.store(code_hash(code), wasmtime.Module(engine(), code))
    assert len(list(tmp_path.glob("*.cwasm"))) == 2
    assert kept.load(engine(), code_hash(codes[0])) is None
    assert kept.load(engine(), code_hash(codes[2])) is not None


def test_precompiled_modules_are_not_compiled_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """After precompile (the admission's compiler thread), setcode's validate on the chain
    thread neither reads the bytes again nor compiles."""
    runtime = ContractRuntime()
    runtime.precompile(CODE, ChainParams())
    no_compiling(monkeypatch)

    def no_reading(*_args: object) -> None:
        raise AssertionError("read the module's bytes again")

    monkeypatch.setattr(runtime_module, "check_bytes", no_reading)
    assert runtime.validate(CODE, ChainParams()) == code_hash(CODE)


def test_precompile_leaves_a_bad_module_to_validate() -> None:
    """precompile says nothing of a module setcode refuses; validate still refuses it."""
    runtime = ContractRuntime()
    bad = bytes(wasmtime.wat2wasm('(module (func (export "apply") (param i64 i64 i64)))'))
    runtime.precompile(bad, ChainParams())
    with pytest.raises(ContractError, match="memory"):
        runtime.validate(bad, ChainParams())
