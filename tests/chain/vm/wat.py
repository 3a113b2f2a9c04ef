"""WAT contracts for the runtime's tests: every host function imported by name, an ``apply``
body given by the test, deployed straight into a state (setcode's own checks are the
transition's, tested with it)."""

from __future__ import annotations

import wasmtime

from chain.core.execution.contracts import ContractCall, TxTrace, name_to_u64
from chain.core.execution.state import StateView
from chain.core.primitives import schema
from chain.core.primitives.encoding import pack
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName
from chain.vm import ContractRuntime
from chain.vm.validate import HOST_SIGNATURES


def imports() -> str:
    lines = []
    for name, (params, results) in HOST_SIGNATURES.items():
        p = " ".join(str(t) for t in params)
        r = " ".join(str(t) for t in results)
        lines.append(
            f'(import "env" "{name}" (func ${name}'
            + (f" (param {p})" if p else "")
            + (f" (result {r})" if r else "")
            + "))"
        )
    return "\n".join(lines)


def contract(body: str, *, data: str = "", funcs: str = "", pages: int = 1) -> bytes:
    """A module whose ``apply(receiver, code, action)`` runs ``body``."""
    return bytes(
        wasmtime.wat2wasm(
            f"""(module
        {imports()}
        (memory (export "memory") {pages})
        {data}
        {funcs}
        (func (export "apply") (param $receiver i64) (param $code i64) (param $action i64)
          {body}))"""
        )
    )


def le(value: int) -> str:
    """A u64 as a WAT data string, little-endian."""
    return "".join(f"\\{b:02x}" for b in value.to_bytes(8, "little"))


ACTIVE = le(name_to_u64("active"))  # the permission of an inline action's permission level


def deploy(view: StateView, runtime: ContractRuntime, account: str, code: bytes) -> None:
    digest = runtime.validate(code, ChainParams())
    view.put_raw(schema.code_key(account), pack([digest, ""]))
    view.put_raw(schema.wasm_key(account), code)


def run(
    runtime: ContractRuntime,
    view: StateView,
    contract: str,
    action: str = "go",
    *,
    auth: tuple[str, ...] = ("alice",),
    data: bytes = b"",
    params: ChainParams | None = None,
    fuel: int = 20_000_000,
) -> TxTrace:
    trace = TxTrace()
    runtime.run(
        view,
        ContractCall(AccountName(contract), action, tuple(map(AccountName, auth)), data),
        trace,
        params=params or ChainParams(),
        block_time_s=1_700_000_000,
        block_num=42,
        fuel_left=fuel,
    )
    return trace
