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
from chain.vm.structure import check_structure

I32 = wasmtime.ValType.i32()
I64 = wasmtime.ValType.i64()

# name -> (params, results): the host API (``chain.vm.host``), Antelope's names.
HOST_SIGNATURES: dict[str, tuple[tuple[wasmtime.ValType, ...], tuple[wasmtime.ValType, ...]]] = {
    "action_data_size": ((), (I32,)),
    "read_action_data": ((I32, I32), (I32,)),
    "current_receiver": ((), (I64,)),
    "require_auth": ((I64,), ()),
    "has_auth": ((I64,), (I32,)),
    "is_account": ((I64,), (I32,)),
    "eosio_assert": ((I32, I32, I32), ()),
    "eosio_assert_code": ((I32, I64), ()),
    "prints_l": ((I32, I32), ()),
    "current_time": ((), (I64,)),
    "get_block_num": ((), (I32,)),
    "sha256": ((I32, I32, I32), ()),
    "set_action_return_value": ((I32, I32), ()),
    "emit_event": ((I64, I32, I32), ()),
    "send_inline": ((I32, I32), ()),
    "require_recipient": ((I64,), ()),
    "db_store_i64": ((I64, I64, I64, I64, I32, I32), (I32,)),
    "db_find_i64": ((I64, I64, I64, I64), (I32,)),
    "db_get_i64": ((I32, I32, I32), (I32,)),
    "db_update_i64": ((I32, I64, I32, I32), ()),
    "db_remove_i64": ((I32,), ()),
    "db_next_i64": ((I32, I32), (I32,)),
    "db_lowerbound_i64": ((I64, I64, I64, I64), (I32,)),
    "db_end_i64": ((I64, I64, I64), (I32,)),
    "db_idx64_store": ((I64, I64, I64, I64, I32), (I32,)),
    "db_idx64_update": ((I32, I64, I32), ()),
    "db_idx64_remove": ((I32,), ()),
    "db_idx64_find_secondary": ((I64, I64, I64, I32, I32), (I32,)),
    "db_idx64_find_primary": ((I64, I64, I64, I32, I64), (I32,)),
    "db_idx64_lowerbound": ((I64, I64, I64, I32, I32), (I32,)),
    "db_idx64_next": ((I32, I32), (I32,)),
}

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
