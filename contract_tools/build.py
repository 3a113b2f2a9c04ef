"""Build one contract directory into ``build/<name>.wasm`` and ``build/<name>.abi.json``.

The compiler is the AssemblyScript pinned in ``contracts/sdk/package-lock.json`` and the
flags are fixed here, not per contract: the same source gives the same module on every
machine, and every module fits what the node runs (no SIMD, the never-freeing ``stub``
runtime, aborts routed to ``eosio_assert``, no start function). The result is checked with
the node's own ``setcode`` validation and the ABI with the node's own parser.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from chain.abi_check import check_abi
from chain.core.primitives.errors import ContractError, EncodingError
from chain.core.primitives.params import ChainParams
from chain.vm.engine import engine
from chain.vm.validate import check_module, code_hash
from contract_tools.toolchain import SHIPPED_SDK, ToolchainError, find_sdk

CONTRACTS_DIR = Path(__file__).resolve().parent.parent / "contracts"  # in a checkout
SDK_DIR = SHIPPED_SDK
# asc parses, optimizes and emits in one process; a contract of a few thousand lines takes
# seconds. The bound only stops a wedged compiler from hanging the command.
COMPILE_TIMEOUT_S = 300
BOOTSTRAP_HINT = "run scripts/bootstrap.sh"


class BuildError(Exception):
    """A contract could not be built; ``reason`` is one line for the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Built:
    """What a build wrote."""

    wasm: Path
    abi: Path
    code_hash: bytes
    size: int


def asc_flags(sdk: Path) -> list[str]:
    """The compiler flags every contract is built with."""
    return [
        "--runtime", "stub",  # bump allocator, never frees: each action is a fresh instance
        "-O3",
        # The features the node's engine enables; SIMD and reference types are off by default.
        "--disable", "simd",
        "--use", "abort=__bor_abort",  # failed asserts reach the node with their message
        "--exportStart", "__bor_start",  # ... and transform/start.js makes apply call it
        # The annotations (ABI, serializers, apply) first, then apply calls the start code.
        "--transform", str(sdk / "transform" / "contract.js"),
        "--transform", str(sdk / "transform" / "start.js"),
        "--path", str(sdk.parent),  # `import { ... } from "sdk"`
        "--noColors",
    ]  # fmt: skip


def pinned_version(sdk: Path) -> str:
    lock = json.loads((sdk / "package-lock.json").read_text())
    version: str = lock["packages"]["node_modules/assemblyscript"]["version"]
    return version


def find_asc(sdk: Path) -> tuple[str, Path]:
    """The node binary and the pinned asc script, or BuildError saying how to get them."""
    node = shutil.which("node")
    if node is None:
        raise BuildError(f"npm toolchain missing (no node on PATH): {BOOTSTRAP_HINT}")
    package = sdk / "node_modules" / "assemblyscript"
    asc = package / "bin" / "asc.js"
    if not asc.is_file():
        raise BuildError(f"npm toolchain missing (no {asc.relative_to(sdk)}): {BOOTSTRAP_HINT}")
    installed = json.loads((package / "package.json").read_text())["version"]
    wanted = pinned_version(sdk)
    if installed != wanted:
        raise BuildError(f"assemblyscript {installed} installed, {wanted} pinned: {BOOTSTRAP_HINT}")
    return node, asc


def find_source(directory: Path) -> tuple[str, Path]:
    """The contract's name (its directory's) and its entry file, ``<name>.ts``."""
    name = directory.resolve().name
    source = directory / f"{name}.ts"
    if not source.is_file():
        raise BuildError(
            f"{directory}: no {name}.ts (a contract's entry file is named after its directory)"
        )
    return name, source


def first_error(output: str) -> str:
    """asc's first diagnostic as one line: ``ERROR TS2304: Cannot find name 'x'. (a.ts(3,5))``."""
    lines = [line.strip() for line in output.splitlines()]
    for i, line in enumerate(lines):
        if line.startswith("ERROR") or line.startswith("FAILURE"):
            where = next((ln for ln in lines[i + 1 : i + 8] if ln.startswith("└─ in ")), "")
            return f"{line} ({where[len('└─ in ') :]})" if where else line
    tail = [line for line in lines if line]
    return tail[-1] if tail else "asc failed without a message"


def compile_module(source: Path, out: Path, sdk: Path, abi_out: Path) -> None:
    """Compile ``source`` to ``out``; the transform writes the ABI its annotations declare
    to ``abi_out`` (nothing for a source without annotations)."""
    node, asc = find_asc(sdk)
    abort = sdk / "assembly" / "abort.ts"  # the handler --use names, in every contract
    cmd = [node, str(asc), str(source), str(abort), "-o", str(out), *asc_flags(sdk)]
    env = {**os.environ, "NODE_NO_WARNINGS": "1", "BOR_ABI_OUT": str(abi_out)}
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False, env=env
        )
    except subprocess.TimeoutExpired as err:
        raise BuildError(f"asc did not finish in {COMPILE_TIMEOUT_S} s") from err
    if proc.returncode != 0 or not out.is_file():
        raise BuildError(f"{source.name}: {first_error(proc.stderr + proc.stdout)}")


def build(directory: Path, *, sdk: Path | None = None, params: ChainParams | None = None) -> Built:
    """Compile ``directory/<name>.ts`` and write its ABI (the one its annotations declare, or
    for a source without any, ``abi.json`` beside it), both checked as a node checks them at
    ``setcode`` (with ``params``, the default chain's when None)."""
    if not directory.is_dir():
        raise BuildError(f"{directory}: not a directory")
    name, source = find_source(directory)
    hand_written = directory / "abi.json"
    abi = checked_abi(hand_written) if hand_written.is_file() else None  # before a long compile
    try:
        sdk = sdk or find_sdk()
    except ToolchainError as err:
        raise BuildError(err.reason) from err
    out_dir = directory / "build"
    out_dir.mkdir(exist_ok=True)
    wasm = out_dir / f"{name}.wasm"
    partial = out_dir / f"{name}.wasm.partial"
    generated = out_dir / f"{name}.abi.json.partial"
    try:
        for stale in (partial, generated):
            stale.unlink(missing_ok=True)
        compile_module(source, partial, sdk, generated)
        abi = one_abi(directory, abi, generated)
        code = partial.read_bytes()
        try:
            check_module(engine(), code, params or ChainParams())
        except ContractError as err:
            raise BuildError(f"{name}.wasm would be refused by setcode: {err.reason}") from err
        partial.replace(wasm)
    finally:
        partial.unlink(missing_ok=True)
        generated.unlink(missing_ok=True)
    abi_out = out_dir / f"{name}.abi.json"
    abi_out.write_text(abi, encoding="utf-8")
    return Built(wasm, abi_out, code_hash(code), len(code))


def one_abi(directory: Path, hand_written: str | None, generated: Path) -> str:
    """The generated ABI, or ``abi.json``'s for a source without annotations; never both
    (two sources of one fact would drift)."""
    if generated.is_file():
        if hand_written is not None:
            raise BuildError(
                f"{directory / 'abi.json'}: the source declares its ABI (@contract): remove it"
            )
        return checked_abi(generated, "the ABI of the annotations")
    if hand_written is None:
        raise BuildError(
            f"{directory}: no ABI: annotate the source (@contract, @action, @table; "
            "docs/contracts.md) or write abi.json"
        )
    return hand_written


def checked_abi(path: Path, what: str | None = None) -> str:
    """The ABI at ``path`` as compact JSON, checked as ``setcode`` checks it."""
    try:
        abi = json.dumps(
            json.loads(path.read_text(encoding="utf-8")), separators=(",", ":"), ensure_ascii=False
        )
        check_abi(abi)
    except (ValueError, EncodingError) as err:
        raise BuildError(f"{what or path.name}: {err}") from err
    return abi
