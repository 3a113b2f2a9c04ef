"""The host API's one declaration: each host function registered once, on its body.

A host module collects its functions in a ``HostApi`` with ``@api.function(category,
signature)``; ``chain.vm.validate`` merges the modules' collections into ``HOST_API``, from
which setcode's allow-list, the runtime's linking and the SDK's ``env.ts`` are all made (as
Spring registers each host function once, beside its body). The signature is written with
AssemblyScript's types (``ptr: usize, len: i32 -> i32``) because that is what ``env.ts``
declares; the wasm types follow from them. ``python scripts/host_api.py`` writes the
``env.ts`` the SDK must hold (``--check`` says whether the committed one is it).
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import wasmtime

I32 = wasmtime.ValType.i32()
I64 = wasmtime.ValType.i64()
F64 = wasmtime.ValType.f64()

# AssemblyScript's parameter and result types, and the wasm type each is passed as.
_WASM_TYPES: dict[str, wasmtime.ValType] = {
    "i32": I32,
    "u32": I32,
    "usize": I32,
    "i64": I64,
    "u64": I64,
    "f64": F64,
}

Signature = tuple[tuple[wasmtime.ValType, ...], tuple[wasmtime.ValType, ...]]


class Category(enum.Enum):
    """The groups Antelope files its host functions under (``env.ts`` follows this order)."""

    ACTION = "action"
    AUTHORIZATION = "authorization"
    CONSOLE = "console"
    CONTEXT = "context"
    SYSTEM = "system"
    CRYPTO = "crypto"
    TRANSACTION = "transaction"
    DB_PRIMARY = "database: primary"
    DB_IDX64 = "database: idx64"
    DB_IDX128 = "database: idx128"
    DB_IDX256 = "database: idx256"
    DB_IDX_DOUBLE = "database: idx_double"


@dataclass(frozen=True, slots=True)
class HostFunction:
    """One host function: its import name, group, typed parameters and the body that runs it
    (called with the running action first, then the wasm arguments)."""

    name: str
    category: Category
    params: tuple[tuple[str, str], ...]  # (name, AssemblyScript type)
    result: str  # AssemblyScript type, "void" for none
    body: Callable[..., Any]

    @property
    def wasm(self) -> Signature:
        params = tuple(_WASM_TYPES[ty] for _, ty in self.params)
        return params, (() if self.result == "void" else (_WASM_TYPES[self.result],))

    def declaration(self) -> str:
        """The function's line in ``env.ts``."""
        params = ", ".join(f"{name}: {ty}" for name, ty in self.params)
        return (
            f'@external("env", "{self.name}") export declare function '
            f"{self.name}({params}): {self.result};"
        )


F = TypeVar("F", bound=Callable[..., Any])


def parse_signature(text: str) -> tuple[tuple[tuple[str, str], ...], str]:
    """``"ptr: usize, len: i32 -> i32"`` as ((("ptr", "usize"), ("len", "i32")), "i32")."""
    args, arrow, result = text.partition("->")
    assert arrow, f"signature {text!r} has no '-> result'"
    params = []
    for part in filter(None, (p.strip() for p in args.split(","))):
        name, _, ty = (s.strip() for s in part.partition(":"))
        assert ty in _WASM_TYPES, f"signature {text!r}: unknown type {ty!r}"
        params.append((name, ty))
    result = result.strip()
    assert result == "void" or result in _WASM_TYPES, f"signature {text!r}: bad result"
    return tuple(params), result


class HostApi:
    """The host functions one module defines, in the order it defines them."""

    def __init__(self) -> None:
        self.functions: dict[str, HostFunction] = {}

    def function(self, category: Category, signature: str, *, name: str = "") -> Callable[[F], F]:
        """Register the decorated body as host function ``name`` (default: its own name)."""

        def register(body: F) -> F:
            params, result = parse_signature(signature)
            wanted = len(params) + 1  # the running action, then the wasm arguments
            kinds = [p.kind for p in inspect.signature(body).parameters.values()]
            rest = inspect.Parameter.VAR_POSITIONAL in kinds  # (act, ..., *rest)
            got = len(kinds) - rest
            assert got == wanted or (rest and got <= wanted), (
                f"{body.__name__} takes {got} arguments, its signature {wanted}"
            )
            fn_name = name or body.__name__
            assert fn_name not in self.functions, f"host function {fn_name} registered twice"
            self.functions[fn_name] = HostFunction(fn_name, category, params, result, body)
            return body

        return register


def merge(*apis: HostApi) -> dict[str, HostFunction]:
    """Every function of ``apis``, grouped by category in ``Category``'s order (within one,
    in the order of definition); a name defined twice is our bug."""
    table: dict[str, HostFunction] = {}
    for api in apis:
        for fn_name, fn in api.functions.items():
            assert fn_name not in table, f"host function {fn_name} defined twice"
            table[fn_name] = fn
    order = list(Category)
    return dict(sorted(table.items(), key=lambda item: order.index(item[1].category)))


ENV_TS_HEADER = """\
// The host API (module "env"), exactly as the node's runtime links it. GENERATED from the
// node's one declaration of it (chain/vm: each body's @API.function) by
//     python scripts/host_api.py
// Do not edit: a test fails when this file and the node's table differ. Contract code calls
// the wrappers in the other modules.
"""


def env_ts(functions: Iterable[HostFunction]) -> str:
    """The SDK's ``env.ts`` for ``functions``: one section per category."""
    out = [ENV_TS_HEADER]
    category: Category | None = None
    for fn in functions:
        if fn.category is not category:
            category = fn.category
            out.append(f"\n// --- {category.value} ---\n")
        out.append(f"// @ts-ignore: decorator\n{fn.declaration()}\n")
    return "".join(out)
