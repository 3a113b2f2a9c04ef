"""The check that keeps a redeploy from adding a secondary index the existing rows lack.

A contract writes its index entries itself, row by row, as it stores and updates rows; an
index its new ABI declares for a table that already holds rows would miss every row written
before it (the issue's example: ``byauthor bob`` finding only the posts written after the
redeploy). Such a ``setcode`` is refused, with the table, the index and what to do instead.

Refusing rather than building the index from the rows: building means decoding every row by
the ABI (``chain.abi``, which the core does not import) inside a native action with no fuel
to meter it, at a cost that grows with the table; the check costs one seek per scope of the
contract, at most ``MAX_SCOPES_CHECKED`` of them. A contract that needs the index on a full
table copies the rows into a new table with its own (fuel-metered) action, or empties the
table first; an index declared from the first deploy is always complete.
"""

from __future__ import annotations

import json
from typing import Any

from chain.core.execution.contracts import name_to_u64
from chain.core.execution.state import StateView
from chain.core.primitives import schema
from chain.core.primitives.errors import ChainError, ContractError, ResourceExceeded

# Scopes of one contract the check may walk (each a seek into the state): past it the
# setcode is refused, as the node cannot say cheaply that the table is empty.
MAX_SCOPES_CHECKED = 10_000
_U64 = (1 << 64) - 1


def declared_indexes(abi_text: str) -> dict[str, set[tuple[str, str]]]:
    """table -> {(index table, key type)} that ``abi_text`` declares; nothing for text that
    is no ABI (whether it is one is setcode's other check)."""
    try:
        tables = json.loads(abi_text).get("tables", [])
    except (ValueError, AttributeError, RecursionError):
        return {}
    out: dict[str, set[tuple[str, str]]] = {}
    for table in tables if isinstance(tables, list) else []:
        if not isinstance(table, dict) or not isinstance(table.get("name"), str):
            continue
        secondary: Any = table.get("secondary", [])
        for index in secondary if isinstance(secondary, list) else []:
            if isinstance(index, dict) and isinstance(index.get("table"), str):
                key_type = str(index.get("type", "u64"))
                out.setdefault(table["name"], set()).add((index["table"], key_type))
    return out


def check_new_indexes(view: StateView, account: str, old_abi: str, new_abi: str) -> None:
    """ContractError if ``new_abi`` declares a secondary index that ``old_abi`` did not (or
    of another key type) on a table of ``account`` that holds rows."""
    old = declared_indexes(old_abi)
    for table, indexes in sorted(declared_indexes(new_abi).items()):
        added = sorted(indexes - old.get(table, set()))
        if not added:
            continue
        try:
            contract, table_u64 = name_to_u64(account), name_to_u64(table)
        except ChainError:
            continue  # not a name: the ABI check refuses it
        if _has_rows(view, contract, table_u64, f"{account}'s table {table}"):
            names = ", ".join(f"{index} ({key})" for index, key in added)
            raise ContractError(
                f"setcode: table {table} of {account} holds rows and the new ABI adds the "
                f"secondary index {names}: the existing rows would be missing from it. "
                "Declare an index when its table is created, or move the rows to a new "
                "table with an action of the contract"
            )


def _has_rows(view: StateView, contract: int, table: int, what: str) -> bool:
    """Whether any scope of ``contract`` holds a row of ``table``: one seek per scope."""
    base = schema.ROW + contract.to_bytes(8, "big")
    stop = base + b"\xff" * 25
    start = base
    for _ in range(MAX_SCOPES_CHECKED):
        found = view.next_raw(start, stop)
        if found is None:
            return False
        scope = int.from_bytes(found[0][len(base) : len(base) + 8], "big")
        found_table = int.from_bytes(found[0][len(base) + 8 : len(base) + 16], "big")
        if found_table == table:
            return True
        if found_table < table:
            start = base + scope.to_bytes(8, "big") + table.to_bytes(8, "big")
        elif scope == _U64:
            return False
        else:
            start = base + (scope + 1).to_bytes(8, "big")
    raise ResourceExceeded(
        f"setcode: {what}: more than {MAX_SCOPES_CHECKED} scopes to check for rows before "
        "adding a secondary index"
    )
