"""The contract actions (setcode, call, allowcode) on the wire and in JSON."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chain.core.execution.actions import (
    MAX_AUTHORIZATION,
    Action,
    AllowCode,
    Call,
    SetCode,
    action_from_json,
    action_to_json,
    decode_action,
    encode_action,
)
from chain.core.primitives.encoding import pack, unpack
from chain.core.primitives.errors import EncodingError
from chain.core.primitives.types import AccountName

A, B = AccountName("alice"), AccountName("bob")
names = st.from_regex(r"[a-z1-5.]{0,11}[a-z1-5]", fullmatch=True).map(AccountName)


@given(
    contract=names,
    action=names,
    auth=st.lists(names, min_size=1, max_size=MAX_AUTHORIZATION, unique=True),
    data=st.binary(max_size=300),
)
def test_a_call_round_trips_on_the_wire_and_in_json(
    contract: AccountName, action: str, auth: list[AccountName], data: bytes
) -> None:
    """Any well-formed call decodes from its msgpack encoding and from its JSON form (data as
    hex) to the same action, and its actors are its authorization."""
    call = Call(contract, action, tuple(auth), data)
    assert decode_action(unpack(pack(encode_action(call)), "action")) == call
    assert action_from_json(action_to_json(call)) == call
    assert call.actors() == tuple(auth)


@pytest.mark.parametrize(
    "action",
    [
        SetCode(A, b"\x00asm\x01\x00\x00\x00", '{"version": "bor::abi/1"}'),
        SetCode(A, b"\x00asm"),
        AllowCode(B, A, True),
        AllowCode(B, A, False),
    ],
)
def test_setcode_and_allowcode_round_trip(action: Action) -> None:
    """setcode (code as hex in JSON, abi optional) and allowcode decode to what was encoded."""
    assert decode_action(unpack(pack(encode_action(action)), "action")) == action
    assert action_from_json(action_to_json(action)) == action


def test_setcode_json_shows_code_as_hex_and_may_leave_out_the_abi() -> None:
    """A setcode's JSON form carries the code as hex; without "abi" the ABI is empty."""
    action = SetCode(A, b"\x00asm")
    assert action_to_json(action) == {
        "action": "setcode",
        "data": {"account": "alice", "code": "0061736d", "abi": ""},
    }
    assert action_from_json({"action": "setcode", "data": {"account": "alice", "code": "00"}}) == (
        SetCode(A, b"\x00")
    )


@pytest.mark.parametrize(
    ("wire", "what"),
    [
        ([11, "token", "transfer", [], b""], "call.authorization"),
        ([11, "token", "transfer", ["alice", "alice"], b""], "call.authorization"),
        ([11, "token", "transfer", [f"a{i}" for i in range(17)], b""], "call.authorization"),
        ([11, "token", "Transfer", ["alice"], b""], "call.action_name"),
        ([11, "token", "transfer", ["alice"], "00"], "call.data"),
        ([10, "alice", b"", ""], "setcode.code"),
        ([10, "alice", b"\x00", "x" * (64 * 1024 + 1)], "setcode.abi"),
        ([12, "gov", "alice", 1], "allowcode.allowed"),
    ],
)
def test_malformed_contract_actions_are_refused_naming_the_field(
    wire: list[Any], what: str
) -> None:
    """A call without or with a repeated or with 17 authorizers, a bad action name, data
    that is not bytes, empty code, an ABI over 64 KiB and a non-bool allowed are malformed,
    and the error names the field."""
    with pytest.raises(EncodingError) as info:
        decode_action(wire)
    assert info.value.what == what


def test_bad_hex_in_json_names_the_field() -> None:
    """A call whose JSON data is not hex is refused naming call.data."""
    obj = {
        "action": "call",
        "data": {"contract": "t", "action_name": "x", "authorization": ["alice"], "data": "zz"},
    }
    with pytest.raises(EncodingError) as info:
        action_from_json(obj)
    assert info.value.what == "call.data"
