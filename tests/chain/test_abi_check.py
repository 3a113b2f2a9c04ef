"""setcode's ABI checks beyond parsing: actions, events and tables name structs, and each
secondary index names a field of its row and a table of its own."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest

from chain.abi import MAX_TYPE_DEPTH, parse_abi
from chain.abi_check import check_abi
from chain.core.primitives.errors import EncodingError

ROW = {"name": "row", "fields": [{"name": "id", "type": "u64"}, {"name": "owner", "type": "name"}]}


def abi(**rest: Any) -> str:
    return json.dumps({"version": "bor::abi/1", "structs": [ROW], **rest})


def table(*secondary: dict[str, str]) -> dict[str, Any]:
    return {"name": "rows", "type": "row", "index_type": "i64", "secondary": list(secondary)}


def test_a_sound_abi_passes_with_read_only_actions_notify_and_index_fields() -> None:
    """The entries the SDK's transform writes (read_only, notify, an index's field) parse
    and pass, and parse_abi keeps what they say."""
    text = abi(
        actions=[{"name": "get", "type": "row", "read_only": True}, {"name": "put", "type": "row"}],
        tables=[table({"name": "byowner", "table": "rows.owner", "type": "u64", "field": "owner"})],
        notify=[{"contract": "*", "action": "transfer"}, {"contract": "token", "action": "issue"}],
    )
    parsed = check_abi(text)
    assert parsed.read_only == {"get"}
    assert parsed.notify == [("*", "transfer"), ("token", "issue")]
    assert parsed.tables["rows"].secondary[0].field == "owner"


@pytest.mark.parametrize(
    ("rest", "where"),
    [
        ({"actions": [{"name": "put", "type": "u64"}]}, r"abi\.actions\[0\]\.type: put: 'u64'"),
        ({"events": [{"name": "put", "type": "row[]"}]}, r"abi\.events\[0\]\.type"),
        ({"tables": [{"name": "rows", "type": "u64"}]}, r"abi\.tables\[0\]\.type"),
        ({"tables": [table({"name": "x", "table": "rows", "type": "u64"})]},
         r"abi\.tables\[0\]\.secondary\[0\]\.table: 'rows' is another table's name"),
    ],
)  # fmt: skip
def test_a_bad_abi_is_refused_naming_the_fault(rest: dict[str, Any], where: str) -> None:
    """Each fault is an EncodingError whose text starts with the path of the entry at fault,
    while parse_abi (which reads ABIs deployed before these checks) still accepts it."""
    text = abi(**rest)
    parse_abi(text)
    with pytest.raises(EncodingError, match=where):
        check_abi(text)


@pytest.mark.parametrize(
    ("rest", "where"),
    [
        ({"actions": [{"name": "get", "type": "row", "read_only": 1}]}, r"read_only: expected"),
        ({"notify": [{"contract": "*", "action": "Bad"}]}, r"abi\.notify\[0\]\.action"),
        ({"notify": [{"contract": "a", "action": "b"}] * 2}, r"a::b is declared twice"),
    ],
)  # fmt: skip
def test_read_only_and_notify_entries_are_checked(rest: dict[str, Any], where: str) -> None:
    """read_only is a boolean; notify entries name a contract (or *) and an action, once."""
    with pytest.raises(EncodingError, match=where):
        parse_abi(abi(**rest))


@pytest.mark.parametrize(
    ("rest", "where"),
    [
        ({"tables": [table({"name": "x", "table": "rows.x", "type": "u64", "field": "nope"})]},
         r"abi\.tables\[0\]\.secondary\[0\]\.field: no field 'nope'"),
        ({"tables": [table(*[{"name": f"i{i}", "table": f"rows.{chr(97 + i)}", "type": "u64"}
                             for i in range(17)])]}, r"abi\.tables\[0\]\.secondary: more than 16"),
    ],
)  # fmt: skip
def test_an_index_on_no_field_or_past_sixteen_is_refused_by_the_parser(
    rest: dict[str, Any], where: str
) -> None:
    """An index naming no field of its key's type, or a 17th index, is refused as the ABI is
    parsed (no ABI stored before these entries existed had either), so setcode refuses it."""
    with pytest.raises(EncodingError, match=where):
        check_abi(abi(**rest))


def _chain(prefix: str, levels: int, last: str) -> list[dict[str, Any]]:
    """Structs ``prefix0`` .. ``prefix<levels-1>``, each holding the next, the last ``last``."""
    names = [f"{prefix}{i}" for i in range(levels)] + [last]
    return [{"name": n, "fields": [{"name": "a", "type": t}]} for n, t in pairwise(names)]


@pytest.mark.parametrize("levels", [1_200, 40])
def test_types_nested_past_the_limit_are_refused_not_a_recursion_error(levels: int) -> None:
    """An ABI nesting structs deeper than MAX_TYPE_DEPTH (up to 64 KiB allows ~1,200) is an
    EncodingError saying so, alike on every node, never Python's RecursionError."""
    structs = _chain("s", levels, "u8")
    text = json.dumps({"version": "bor::abi/1", "structs": structs}, separators=(",", ":"))
    with pytest.raises(EncodingError, match=f"nest more than {MAX_TYPE_DEPTH} deep"):
        check_abi(text)


def test_a_struct_checked_shallow_first_is_refused_when_reached_deeper() -> None:
    """A struct whose levels fit where it was first checked, reached again below more levels
    (the check remembers each struct), still counts its levels there."""
    short = _chain("b", 20, "u8")
    deep = _chain("a", 20, "b0")
    assert len(short) + len(deep) > MAX_TYPE_DEPTH
    text = json.dumps({"version": "bor::abi/1", "structs": short + deep})
    with pytest.raises(EncodingError, match="nest more than"):
        parse_abi(text)
    parse_abi(json.dumps({"version": "bor::abi/1", "structs": short}))
