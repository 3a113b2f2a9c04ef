"""The ABI's entries about how a contract's actions run, rather than how they are encoded:
read-only actions (an action entry's ``"read_only": true``) and the notifications the contract
listens to (the top level's ``"notify"``, informational: what its ``apply`` handles when
another contract's action names it with ``require_recipient``).

``chain.abi.parse_abi`` calls these; the chain itself reads ``read_only`` from the stored ABI
(``chain.core.execution.contracts.read_only_actions``) to refuse such an action in a
transaction.
"""

from __future__ import annotations

from typing import Any

from chain.core.execution.contracts import name_to_u64
from chain.core.primitives.errors import EncodingError

MAX_NOTIFY = 64  # notification handlers one ABI may declare


def split_read_only(entry: Any, where: str) -> tuple[Any, bool]:
    """An action entry without its ``read_only``, and that flag (false when absent)."""
    if not isinstance(entry, dict) or "read_only" not in entry:
        return entry, False
    value = entry["read_only"]
    if not isinstance(value, bool):
        raise EncodingError(f"{where}.read_only", f"expected true or false, got {value!r:.40}")
    return {k: v for k, v in entry.items() if k != "read_only"}, value


def parse_notify(value: Any) -> list[tuple[str, str]]:
    """``[{"contract": name or "*", "action": name}, ...]`` as (contract, action) pairs."""
    if not isinstance(value, list):
        raise EncodingError("abi.notify", "expected a list")
    if len(value) > MAX_NOTIFY:
        raise EncodingError("abi.notify", f"more than {MAX_NOTIFY} handlers")
    pairs: list[tuple[str, str]] = []
    for i, item in enumerate(value):
        where = f"abi.notify[{i}]"
        if not isinstance(item, dict) or set(item) != {"contract", "action"}:
            raise EncodingError(where, 'expected {"contract": ..., "action": ...}')
        contract, action = item["contract"], item["action"]
        pair = (_name(contract, f"{where}.contract", star=True), _name(action, f"{where}.action"))
        if pair in pairs:
            raise EncodingError(where, f"{contract}::{action} is declared twice")
        pairs.append(pair)
    return pairs


def _name(value: Any, where: str, *, star: bool = False) -> str:
    if star and value == "*":
        return "*"
    if not isinstance(value, str):
        raise EncodingError(where, "expected a name")
    try:
        name_to_u64(value)
    except EncodingError:
        raise EncodingError(where, f"{value!r:.40} is not a valid name") from None
    return value
