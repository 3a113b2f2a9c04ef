"""The checks a module passes at ``setcode``, before it is stored in the state.

A module is refused unless every node could run it the same way within the chain's limits:
it validates under our engine's features, keeps the structural limits that bound its
compilation (``chain.vm.structure``), has no start function (code that would run before
``apply``, at instantiation, outside any action), and, once compiled, imports only host
functions of the allow-list with exactly our signatures, exports ``apply`` and ``memory``,
declares no more memory than ``max_memory_pages`` and fits the engine's fixed limits (one
table of at most ``MAX_TABLE_ELEMENTS``). The runtime then instantiates it once
(``ContractRuntime.validate``), so that segments which do not fit are refused here too.
"""

from __future__ import annotations

import hashlib

import wasmtime

from chain.core.primitives.errors import ContractError
from chain.core.primitives.params import ChainParams
from chain.vm import host, host_crypto, host_tables
from chain.vm.hostapi import I64, HostFunction, Signature, merge
from chain.vm.structure import check_structure

# The host API: every function the host modules register, grouped as Antelope groups them
# (``chain.vm.hostapi``). setcode's allow-list, the runtime's linker and the SDK's env.ts
# are all made from this one table.
HOST_API: dict[str, HostFunction] = merge(host.API, host_tables.API, host_crypto.API)

# name -> (params, results): the allow-list of imports, with each one's exact wasm types.
HOST_SIGNATURES: dict[str, Signature] = {name: fn.wasm for name, fn in HOST_API.items()}

APPLY_TYPE = ((I64, I64, I64), ())


def code_hash(code: bytes) -> bytes:
    return hashlib.sha256(code).digest()


def _signature(ty: wasmtime.FuncType) -> tuple[tuple[wasmtime.ValType, ...], ...]:
    return tuple(ty.params), tuple(ty.results)


def _show(sig: tuple[tuple[wasmtime.ValType, ...], ...]) -> str:
    params, results = sig
    return f"({', '.join(map(str, params))}) -> ({', '.join(map(str, results))})"


def check_bytes(engine: wasmtime.Engine, code: bytes, params: ChainParams) -> None:
    """ContractError saying why ``code`` cannot be deployed, from its bytes alone: what
    must hold before anything spends time compiling it."""
    if not 0 < len(code) <= params.max_code_bytes:
        raise ContractError(
            f"module of {len(code)} bytes: must be 1..{params.max_code_bytes} (max_code_bytes)"
        )
    try:
        wasmtime.Module.validate(engine, code)
    except wasmtime.WasmtimeError as err:
        raise ContractError(f"invalid WebAssembly module: {_first_line(err)}") from err
    if check_structure(code).has_start:
        raise ContractError("module has a start function (code outside any action)")


def compile_module(engine: wasmtime.Engine, code: bytes) -> wasmtime.Module:
    """``code`` compiled; ContractError if the engine's fixed limits refuse it."""
    try:
        return wasmtime.Module(engine, code)
    except wasmtime.WasmtimeError as err:
        # Valid WebAssembly that the engine's fixed limits refuse (a table past the pool's
        # slot, a second table): the same on every node, as the limits are.
        raise ContractError(f"module does not fit the runtime: {_last_line(err)}") from err


def check_links(module: wasmtime.Module) -> None:
    """ContractError unless the compiled module imports host functions only, with our
    signatures, and exports ``apply`` and ``memory``."""
    for imp in module.imports:
        where = f"{imp.module}.{imp.name}"
        ty = imp.type
        if imp.module != "env" or not isinstance(ty, wasmtime.FuncType):
            raise ContractError(f"import {where}: only functions of module env may be imported")
        expected = HOST_SIGNATURES.get(imp.name or "")
        if expected is None:
            raise ContractError(f"import {where}: no such host function")
        if _signature(ty) != expected:
            raise ContractError(
                f"import {where}: signature {_show(_signature(ty))}, expected {_show(expected)}"
            )
    exports = {exp.name: exp.type for exp in module.exports}
    apply = exports.get("apply")
    if not isinstance(apply, wasmtime.FuncType) or _signature(apply) != APPLY_TYPE:
        raise ContractError("module must export a function apply (i64, i64, i64) -> ()")
    if not isinstance(exports.get("memory"), wasmtime.MemoryType):
        raise ContractError("module must export its memory as memory")


def check_interface(module: wasmtime.Module, params: ChainParams) -> None:
    """ContractError unless the compiled module imports and exports what a contract must,
    within the chain's memory limit."""
    check_links(module)
    memory = next(e.type for e in module.exports if e.name == "memory")
    assert isinstance(memory, wasmtime.MemoryType), "check_links saw to it"
    if memory.limits.min > params.max_memory_pages:
        raise ContractError(
            f"memory of {memory.limits.min} pages declared, past max_memory_pages "
            f"{params.max_memory_pages}"
        )


def check_module(engine: wasmtime.Engine, code: bytes, params: ChainParams) -> wasmtime.Module:
    """The compiled module, or ContractError saying why ``code`` cannot be deployed."""
    check_bytes(engine, code, params)
    module = compile_module(engine, code)
    check_interface(module, params)
    return module


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0][:300]


def _last_line(err: Exception) -> str:
    return str(err).strip().splitlines()[-1].strip()[:300]
