"""A redeploy that adds a secondary index to a table holding rows is refused, never left
with an index that silently misses the rows written before it."""

from __future__ import annotations

import json

import pytest

from chain.core.execution import indexes
from chain.core.execution.actions import SetCode
from chain.core.execution.contracts import name_to_u64
from chain.core.execution.state import Account, StateView
from chain.core.execution.transition import Context, apply_action
from chain.core.primitives import schema
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.errors import ContractError, ResourceExceeded
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName
from chain.testing import MemoryKV
from tests.chain.contract_fakes import ScriptedHost

REG = AccountName("registry")


def abi(*index_tables: str, key: str = "u64") -> str:
    secondary = [{"name": t, "table": t, "type": key, "field": "author"} for t in index_tables]
    return json.dumps(
        {
            "version": "bor::abi/1",
            "structs": [{"name": "post", "fields": [{"name": "author", "type": "name"}]}],
            "tables": [{"name": "posts", "type": "post", "secondary": secondary}],
        }
    )


def put_row(view: StateView, scope: str, table: str, primary: int) -> None:
    key = schema.row_key(name_to_u64(REG), name_to_u64(scope), name_to_u64(table), primary)
    view.put_raw(key, bytes(8) + b"row")


def test_the_issues_redeploy_is_refused_with_what_to_do() -> None:
    """registry holds post 2 by bob; a setcode whose ABI adds byauthor is refused, naming
    the table and the index, and the old code and ABI stay."""
    view = StateView(MemoryKV())
    view.put_account(Account(REG, PrivateKey(b"\x01" * 32).public_key))
    ctx = Context(ChainParams(), 1_000_000, ScriptedHost(), 7)
    apply_action(view, SetCode(REG, b"\0asm" + bytes(10), abi()), ctx)
    put_row(view, "registry", "posts", 2)
    with pytest.raises(ContractError, match=r"table posts of registry holds rows .* byauthor"):
        apply_action(view, SetCode(REG, b"\0asm" + bytes(11), abi("byauthor")), ctx)
    # Declared from the first deploy, the index is complete: a redeploy keeping it passes.
    fresh = AccountName("fresh")
    view.put_account(Account(fresh, PrivateKey(b"\x02" * 32).public_key))
    apply_action(view, SetCode(fresh, b"\0asm" + bytes(10), abi("byauthor")), ctx)
    apply_action(view, SetCode(fresh, b"\0asm" + bytes(12), abi("byauthor")), ctx)


@pytest.mark.parametrize(
    ("rows", "old", "new", "refused"),
    [
        ([], abi(), abi("byauthor"), False),  # an empty table may gain an index
        ([("alice", "posts")], abi("byauthor"), abi("byauthor"), False),  # nothing added
        ([("alice", "posts")], abi("byauthor"), abi("byauthor", key="double"), True),
        ([("zed", "posts")], "", abi("byauthor"), True),  # rows under any scope count
        ([("alice", "likes"), ("bob", "zzz")], abi(), abi("byauthor"), False),  # other tables
        ([("alice", "likes"), ("carol", "posts")], abi(), abi("byauthor"), True),
        ([("alice", "posts")], abi(), "not json", False),  # no ABI: the ABI check's to refuse
    ],
)
def test_only_an_added_index_on_a_table_with_rows_is_refused(
    rows: list[tuple[str, str]], old: str, new: str, refused: bool
) -> None:
    """The check looks at the index tables (and key types) the new ABI adds, and at rows of
    that table in every scope, skipping other tables."""
    view = StateView(MemoryKV())
    for scope, table in rows:
        put_row(view, scope, table, 1)
    if refused:
        with pytest.raises(ContractError, match="holds rows"):
            indexes.check_new_indexes(view, REG, old, new)
    else:
        indexes.check_new_indexes(view, REG, old, new)


def test_the_walk_of_scopes_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_SCOPES_CHECKED scopes the setcode is refused rather than walking on."""
    monkeypatch.setattr(indexes, "MAX_SCOPES_CHECKED", 3)
    view = StateView(MemoryKV())
    for scope in ("a", "b", "c", "d"):
        put_row(view, scope, "likes", 1)
    with pytest.raises(ResourceExceeded, match="more than 3 scopes"):
        indexes.check_new_indexes(view, REG, abi(), abi("byauthor"))
