"""The ABI codec: Antelope's binary layout, JSON round trips, and errors naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chain.abi import MAX_ASSET_AMOUNT, Abi, parse_abi
from chain.core.execution.contracts import u64_to_name
from chain.core.primitives.errors import EncodingError


def abi_of(structs: list[dict[str, Any]], **rest: Any) -> Abi:
    return parse_abi(json.dumps({"version": "bor::abi/1", "structs": structs, **rest}))


def struct(name: str, **fields: str) -> dict[str, Any]:
    return {"name": name, "fields": [{"name": k, "type": v} for k, v in fields.items()]}


TOKEN = abi_of(
    [
        struct("transfer", **{"from": "name", "to": "name", "quantity": "asset", "memo": "string"}),
        struct("account", balance="asset"),
        struct("many", to="name[]", note="string?", sym="symbol", h="checksum256", raw="bytes"),
    ],
    actions=[{"name": "transfer", "type": "transfer"}, {"name": "many", "type": "many"}],
    tables=[
        {
            "name": "accounts",
            "type": "account",
            "index_type": "i64",
            "secondary": [{"name": "byowner", "table": "accounts.o", "type": "u64"}],
        }
    ],
    events=[{"name": "transfer", "type": "transfer"}],
)


def test_transfer_encodes_as_antelope_does() -> None:
    """A transfer is from, to as u64 LE names, amount i64 LE + symbol (precision, letters), memo."""
    data = TOKEN.encode_action(
        "transfer", {"from": "alice", "to": "bob", "quantity": "1.0000 TOK", "memo": "hi"}
    )
    assert data.hex() == (
        "0000000000855c34"  # alice
        "0000000000000e3d"  # bob
        "1027000000000000"  # 10000
        "04544f4b00000000"  # 4,TOK
        "026869"  # "hi"
    )
    assert TOKEN.decode_action("transfer", data)["quantity"] == "1.0000 TOK"
    assert TOKEN.decode_event("transfer", data)["to"] == "bob"


def test_table_row_decodes_by_its_table_type() -> None:
    """decode_table_row uses the table's row type, and the secondary index is parsed."""
    row = TOKEN.encode("account", {"balance": "-0.0005 TOK"}, "account")
    assert TOKEN.decode_table_row("accounts", row) == {"balance": "-0.0005 TOK"}
    assert TOKEN.tables["accounts"].secondary[0].table == "accounts.o"


NAMES = st.from_regex(r"[a-z1-5]{1,12}", fullmatch=True)
SYMBOLS = st.tuples(st.integers(0, 18), st.from_regex(r"[A-Z]{1,7}", fullmatch=True))


@st.composite
def assets(draw: st.DrawFn) -> str:
    precision, code = draw(SYMBOLS)
    amount = draw(st.integers(-MAX_ASSET_AMOUNT, MAX_ASSET_AMOUNT))
    digits = str(abs(amount)).rjust(precision + 1, "0")
    number = f"{digits[:-precision]}.{digits[-precision:]}" if precision else digits
    return f"{'-' if amount < 0 else ''}{number} {code}"


MANY = st.fixed_dictionaries(
    {
        "to": st.lists(NAMES, max_size=5),
        "note": st.none() | st.text(max_size=20),
        "sym": SYMBOLS.map(lambda s: f"{s[0]},{s[1]}"),
        "h": st.binary(min_size=32, max_size=32).map(bytes.hex),
        "raw": st.binary(max_size=300).map(bytes.hex),
    }
)


@given(MANY)
def test_round_trip_of_composite_values(value: dict[str, Any]) -> None:
    """Lists, optionals, symbols, checksums and bytes decode to the JSON they were encoded from."""
    assert TOKEN.decode_action("many", TOKEN.encode_action("many", value)) == value


@given(assets())
def test_round_trip_of_assets(text: str) -> None:
    """Every asset in range and precision survives encoding, with its precision's digits."""
    data = TOKEN.encode("asset", text, "q")
    assert len(data) == 16
    assert TOKEN.decode("asset", data, "q") == text


INT_TYPES = {
    "u8": (0, 2**8 - 1),
    "u16": (0, 2**16 - 1),
    "u32": (0, 2**32 - 1),
    "u64": (0, 2**64 - 1),
    "i8": (-(2**7), 2**7 - 1),
    "i16": (-(2**15), 2**15 - 1),
    "i32": (-(2**31), 2**31 - 1),
    "i64": (-(2**63), 2**63 - 1),
}


@given(
    st.sampled_from(sorted(INT_TYPES)).flatmap(
        lambda t: st.tuples(st.just(t), st.integers(*INT_TYPES[t]))
    )
)
def test_round_trip_of_integers(case: tuple[str, int]) -> None:
    """Every integer type takes its whole range, little-endian, and nothing outside it."""
    type_, value = case
    data = TOKEN.encode(type_, value, "n")
    assert int.from_bytes(data, "little", signed=type_.startswith("i")) == value
    assert TOKEN.decode(type_, data, "n") == value
    lo, hi = INT_TYPES[type_]
    with pytest.raises(EncodingError, match=f"out of range for {type_}"):
        TOKEN.encode(type_, hi + 1, "n")
    with pytest.raises(EncodingError, match=f"out of range for {type_}"):
        TOKEN.encode(type_, lo - 1, "n")
    assert TOKEN.encode(type_, str(value), "n") == data  # 64-bit values may come as strings


@given(st.binary(max_size=64))
def test_decoding_arbitrary_bytes_fails_only_with_encoding_error(data: bytes) -> None:
    """Any bytes either decode or raise EncodingError: never another exception."""
    try:
        value = TOKEN.decode_action("many", data)
    except EncodingError:
        return
    assert TOKEN.encode_action("many", value) == data  # what decodes is canonical


@given(st.integers(0, 2**64 - 1))
def test_every_u64_name_round_trips(value: int) -> None:
    """A name field decodes any u64: a valid name as text, anything else as the number."""
    data = value.to_bytes(8, "little")
    decoded = TOKEN.decode("name", data, "n")
    assert TOKEN.encode("name", decoded, "n") == data
    if value and u64_to_name(value) is not None:
        assert isinstance(decoded, str)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"from": "alice", "to": "bob", "quantity": "1 TOK"}, r"transfer\.memo: missing"),
        (
            {"from": "alice", "to": "bob", "quantity": "1.0 tok", "memo": ""},
            r"transfer\.quantity: expected an asset like '1\.0000 TOK'",
        ),
        (
            {"from": "Alice", "to": "bob", "quantity": "1 TOK", "memo": ""},
            r"transfer\.from: 'Alice' is not a valid name",
        ),
        (
            {"from": "alice", "to": "bob", "quantity": "1 TOK", "memo": "", "x": 1},
            r"transfer: unknown field 'x'",
        ),
        ([1], r"transfer: expected an object"),
    ],
)
def test_bad_json_names_the_field(value: Any, message: str) -> None:
    """Bad input for an action is an EncodingError whose message starts with the field's path."""
    with pytest.raises(EncodingError, match=message):
        TOKEN.encode_action("transfer", value)


def test_list_errors_name_the_element() -> None:
    """An error inside a list names the element's index."""
    value = {"to": ["bob", True], "note": None, "sym": "4,TOK", "h": "00" * 32, "raw": ""}
    with pytest.raises(EncodingError, match=r"many\.to\[1\]: expected a name"):
        TOKEN.encode_action("many", value)


def test_decoding_refuses_bad_bytes() -> None:
    """Short data, trailing bytes, a bad bool, an overlong length and bad UTF-8 are refused."""
    good = TOKEN.encode("string", "hi", "s")
    with pytest.raises(EncodingError, match="left over"):
        TOKEN.decode("string", good + b"\x00", "s")
    with pytest.raises(EncodingError, match="needs 2 bytes"):
        TOKEN.decode("string", good[:-1], "s")
    with pytest.raises(EncodingError, match="bool byte 2"):
        TOKEN.decode("bool", b"\x02", "b")
    with pytest.raises(EncodingError, match="minimally"):
        TOKEN.decode("bytes", b"\x80\x00", "b")
    with pytest.raises(EncodingError, match="UTF-8"):
        TOKEN.decode("string", b"\x01\xff", "s")
    with pytest.raises(EncodingError, match="symbol"):
        TOKEN.decode("symbol", b"\x04tok\x00\x00\x00\x00", "s")


def test_unknown_action_table_event() -> None:
    """Names missing from the ABI say which kind of name was not found."""
    with pytest.raises(EncodingError, match="'burn' is not an action"):
        TOKEN.encode_action("burn", {})
    with pytest.raises(EncodingError, match="'stat' is not a table"):
        TOKEN.decode_table_row("stat", b"")
    with pytest.raises(EncodingError, match="'mint' is not an event"):
        TOKEN.decode_event("mint", b"")


@pytest.mark.parametrize(
    ("abi", "message"),
    [
        ("{", "not JSON"),
        ('{"version": "eosio::abi/1.1"}', r"abi\.version: expected 'bor::abi/1'"),
        ('{"version": "bor::abi/1", "extra": 1}', "unknown key 'extra'"),
        (
            json.dumps({"version": "bor::abi/1", "structs": [struct("a", x="float32")]}),
            "unknown type 'float32'",
        ),
        (
            json.dumps(
                {"version": "bor::abi/1", "structs": [struct("a", b="b"), struct("b", a="a?")]}
            ),
            "contains itself",
        ),
        (
            json.dumps({"version": "bor::abi/1", "structs": [struct("e"), struct("a", x="e[]")]}),
            "list of values of no bytes",
        ),
        (
            json.dumps({"version": "bor::abi/1", "actions": [{"name": "Transfer", "type": "u8"}]}),
            r"abi\.actions\[0\]\.name: 'Transfer' is not a valid name",
        ),
        (
            json.dumps(
                {
                    "version": "bor::abi/1",
                    "tables": [{"name": "t", "type": "u8", "index_type": "str"}],
                }
            ),
            "only 'i64'",
        ),
        (
            json.dumps({"version": "bor::abi/1", "structs": [struct("a", x="u8"), struct("a")]}),
            "defined twice",
        ),
    ],
)
def test_parse_abi_refuses_bad_abis(abi: str, message: str) -> None:
    """parse_abi refuses malformed JSON, unknown types, recursion and bad names, saying where."""
    with pytest.raises(EncodingError, match=message):
        parse_abi(abi)


def test_parse_abi_bounds_decoding_work() -> None:
    """An ABI whose structs fan out exponentially is refused rather than decoded slowly."""
    structs = [struct("s0", v="u8")]
    for i in range(1, 20):
        structs.append(struct(f"s{i}", a=f"s{i - 1}", b=f"s{i - 1}"))
    with pytest.raises(EncodingError, match="more than 4096 values"):
        abi_of(structs)
