"""The ABI's read-only actions and notification handlers: parsed by parse_abi, old ABIs still
valid, a bad entry refused by its path."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chain.abi import parse_abi
from chain.abi_actions import MAX_NOTIFY
from chain.core.primitives.errors import EncodingError


def abi(**top: Any) -> str:
    base: dict[str, Any] = {
        "version": "bor::abi/1",
        "structs": [{"name": "id", "fields": [{"name": "id", "type": "u64"}]}],
        "actions": [
            {"name": "get", "type": "id", "read_only": True},
            {"name": "put", "type": "id"},
        ],
    }
    return json.dumps(base | top)


def test_read_only_and_notify_are_parsed() -> None:
    """read_only marks its action (absent: false) and notify lists (contract or *, action)."""
    parsed = parse_abi(
        abi(
            notify=[
                {"contract": "*", "action": "transfer"},
                {"contract": "token", "action": "issue"},
            ]
        )
    )
    assert parsed.read_only == {"get"}
    assert parsed.actions == {"get": "id", "put": "id"}
    assert parsed.notify == [("*", "transfer"), ("token", "issue")]
    assert parse_abi(abi(actions=[{"name": "put", "type": "id"}])).read_only == set()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            abi(actions=[{"name": "get", "type": "id", "read_only": "yes"}]),
            "abi.actions[0].read_only",
        ),
        (abi(actions=[{"name": "get", "type": "id", "readonly": True}]), "abi.actions[0]"),
        (abi(notify={"contract": "*"}), "abi.notify"),
        (abi(notify=[{"contract": "*"}]), "abi.notify[0]"),
        (abi(notify=[{"contract": "Token", "action": "transfer"}]), "abi.notify[0].contract"),
        (abi(notify=[{"contract": "*", "action": "*"}]), "abi.notify[0].action"),
        (abi(notify=[{"contract": "*", "action": "a"}] * 2), "abi.notify[1]"),
        (
            abi(notify=[{"contract": "*", "action": f"a{i}"} for i in range(MAX_NOTIFY + 1)]),
            "abi.notify",
        ),
    ],
)
def test_a_bad_entry_is_refused_by_its_path(text: str, where: str) -> None:
    """A read_only that is no boolean, an unknown action key, and a malformed notify entry
    (not a list, a key missing, a bad name, a duplicate, too many) each name their path."""
    with pytest.raises(EncodingError) as info:
        parse_abi(text)
    assert info.value.what == where
