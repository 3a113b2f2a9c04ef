"""The ABI's 128-bit integers, doubles, time types and typed secondary indexes."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from chain.abi import parse_abi
from chain.abi_types import format_time_us, parse_time_us
from chain.core.primitives.errors import EncodingError


def abi(fields: dict[str, str], secondary: list[dict[str, Any]] | None = None) -> str:
    return json.dumps(
        {
            "version": "bor::abi/1",
            "structs": [
                {"name": "row", "fields": [{"name": k, "type": v} for k, v in fields.items()]}
            ],
            "tables": [{"name": "rows", "type": "row", "secondary": secondary or []}],
        }
    )


@pytest.mark.parametrize(
    ("type_", "value", "data", "back"),
    [
        ("u128", "340282366920938463463374607431768211455", b"\xff" * 16, None),
        ("u128", 5, (5).to_bytes(16, "little"), "5"),
        ("i128", "-1", b"\xff" * 16, None),
        ("f64", 2.5, struct.pack("<d", 2.5), None),
        ("float64", "-inf", struct.pack("<d", float("-inf")), None),
        ("time_point", "2024-05-01T12:00:00.500", struct.pack("<q", 1714564800500000), None),
        ("time_point", "1970-01-01T00:00:00.000001", struct.pack("<q", 1), None),
        ("time_point_sec", "2024-05-01T12:00:00", struct.pack("<I", 1714564800), None),
        ("block_timestamp_type", "2000-01-01T00:00:01.500", struct.pack("<I", 3), None),
    ],
)
def test_new_builtins_round_trip_in_antelopes_forms(
    type_: str, value: Any, data: bytes, back: Any
) -> None:
    """Each new built-in type encodes to Antelope's bytes and decodes to its JSON form."""
    parsed = parse_abi(abi({"x": type_}))
    assert parsed.encode(type_, value, "x") == data
    assert parsed.decode(type_, data, "x") == (value if back is None else back)


@pytest.mark.parametrize(
    ("type_", "value", "message"),
    [
        ("u128", "-1", "out of range for u128"),
        ("u128", "0x10", "decimal string"),
        ("i128", str(2**127), "out of range"),
        ("f64", "1.5", "expected a number"),
        ("f64", True, "expected a number"),
        ("time_point", "2024-02-30T00:00:00", "not a valid date"),
        ("time_point", "yesterday", "expected a time"),
        ("time_point_sec", "2024-05-01T12:00:00.5", "no fraction"),
        ("time_point_sec", "1969-12-31T23:59:59", "out of range"),
        ("block_timestamp_type", "2024-05-01T12:00:00.250", "half-second"),
    ],
)
def test_new_builtins_refuse_bad_values(type_: str, value: Any, message: str) -> None:
    """A value outside a type's range or form is refused at its path."""
    with pytest.raises(EncodingError, match=message):
        parse_abi(abi({"x": type_})).encode(type_, value, "x")


def test_time_text_is_antelopes() -> None:
    """Times print with milliseconds (microseconds when they are not whole ms) and parse
    back to the same microseconds."""
    assert format_time_us(1714564800500000) == "2024-05-01T12:00:00.500"
    assert format_time_us(1714564800500001) == "2024-05-01T12:00:00.500001"
    assert parse_time_us("2024-05-01T12:00:00.500001", "t") == 1714564800500001


def test_secondary_indexes_of_every_key_type_name_their_fields() -> None:
    """A table declares up to 16 indexes of u64, u128, checksum256 and double keys, each
    on a field of a type that key can hold; old ABIs without "field" stay valid."""
    fields = {"id": "u64", "owner": "name", "big": "u128", "hash": "checksum256", "score": "f64"}
    secondary = [
        {"name": "byowner", "table": "byowner", "type": "u64", "field": "owner"},
        {"name": "bybig", "table": "bybig", "type": "u128", "field": "big"},
        {"name": "byhash", "table": "byhash", "type": "checksum256", "field": "hash"},
        {"name": "byscore", "table": "byscore", "type": "double", "field": "score"},
        {"name": "old", "table": "old"},
    ]
    table = parse_abi(abi(fields, secondary)).tables["rows"]
    assert [(s.type, s.field) for s in table.secondary] == [
        ("u64", "owner"),
        ("u128", "big"),
        ("checksum256", "hash"),
        ("double", "score"),
        ("u64", ""),
    ]


@pytest.mark.parametrize(
    ("secondary", "message"),
    [
        ([{"name": "b", "table": "b", "type": "string"}], "not an index key type"),
        ([{"name": "b", "table": "b", "type": "double", "field": "owner"}], "no field 'owner'"),
        ([{"name": "b", "table": "b", "type": "u64", "field": "nope"}], "no field 'nope'"),
        ([{"name": f"i{i}", "table": f"i{i}"} for i in range(17)], "more than 16"),
        ([{"name": "a", "table": "t"}, {"name": "b", "table": "t"}], "share an index table"),
    ],
)
def test_bad_secondary_indexes_are_refused(secondary: list[dict[str, Any]], message: str) -> None:
    """An unknown key type, a field that is missing or of another type, more than 16
    indexes, or two indexes on one index table are refused."""
    with pytest.raises(EncodingError, match=message):
        parse_abi(abi({"id": "u64", "owner": "name"}, secondary))
