"""Domain types and the rules for account names."""

from __future__ import annotations

import re
from typing import NewType

from chain.core.primitives.errors import InvalidAction

BlockNum = NewType("BlockNum", int)
BlockId = NewType("BlockId", bytes)
TxId = NewType("TxId", bytes)
AccountName = NewType("AccountName", str)
PublicKey = NewType("PublicKey", bytes)

# EOSIO names: up to 12 characters from a-z, 1-5 and '.', not ending with '.'.
_NAME_RE = re.compile(r"[a-z1-5.]{0,11}[a-z1-5]")

MAX_AMOUNT = 2**62  # keeps every sum of two amounts inside a signed 64-bit integer


def is_valid_name(text: str) -> bool:
    """True when ``text`` is a well-formed account name."""
    return _NAME_RE.fullmatch(text) is not None


def account_name(text: str) -> AccountName:
    """Validate and return ``text`` as an account name."""
    if not isinstance(text, str) or not is_valid_name(text):
        raise InvalidAction(f"invalid account name {text!r}: 1-12 characters of a-z, 1-5 and '.'")
    return AccountName(text)


def block_num_of(block_id: bytes) -> BlockNum:
    """Block ids embed their block number in the first four bytes (as EOSIO does)."""
    return BlockNum(int.from_bytes(block_id[:4], "big"))
