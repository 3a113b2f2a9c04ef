"""The frames of ``/v1/chain/stream`` (its AsyncAPI document, /v1/asyncapi.json), typed.

A frame's fixed parts are fields (its cursor, whether it is irreversible); what a block, a
transaction or an action carries stays a dict, since those grow (decoded action data beside
the hex, a block's transactions) without the frame changing. A frame of a type this client
does not know yet arrives as ``Other`` rather than failing the stream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bor_client.errors import MalformedResponse

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Cursor:
    """The last block a consumer has fully processed: where a stream resumes."""

    num: int
    id: str

    def json(self) -> Json:
        return {"num": self.num, "id": self.id}

    @classmethod
    def from_json(cls, value: Any) -> Cursor:
        if (
            not isinstance(value, dict)
            or type(value.get("num")) is not int
            or not isinstance(value.get("id"), str)
        ):
            raise MalformedResponse(200, f"not a cursor {{num, id}}: {value!r}")
        return cls(value["num"], value["id"])


@dataclass(frozen=True, slots=True)
class Subscribed:
    """The first answer: where the chain stands, and the first block the stream will send."""

    head: Cursor
    lib: Cursor
    resume_from: int


@dataclass(frozen=True, slots=True)
class BlockFrame:
    """A block joined the chain (stream ``blocks``); ``block``: its header fields, and its
    ``transactions`` when the subscription asked for them."""

    cursor: Cursor
    irreversible: bool
    block: Json


@dataclass(frozen=True, slots=True)
class TransactionsFrame:
    """A block's transactions that match the filters."""

    cursor: Cursor
    irreversible: bool
    block: Json
    transactions: tuple[Json, ...]


@dataclass(frozen=True, slots=True)
class ActionsFrame:
    """A block's actions that match the filters (a contract's with its events)."""

    cursor: Cursor
    irreversible: bool
    block: Json
    actions: tuple[Json, ...]


@dataclass(frozen=True, slots=True)
class Undo:
    """A block left the chain (a fork switch): undo what it did. ``cursor`` is its parent."""

    cursor: Cursor
    block: Json


@dataclass(frozen=True, slots=True)
class Lib:
    """The last irreversible block moved to ``num``."""

    num: int
    id: str


@dataclass(frozen=True, slots=True)
class Lagged:
    """The consumer fell behind and the node closed the stream; it resumes from ``cursor``."""

    cursor: Cursor
    reason: str


@dataclass(frozen=True, slots=True)
class ErrorFrame:
    """The node refused or ended the subscription."""

    reason: str


@dataclass(frozen=True, slots=True)
class Other:
    """A frame of a type this client does not know (a newer node's)."""

    type: str
    raw: Json


Frame = (
    Subscribed
    | BlockFrame
    | TransactionsFrame
    | ActionsFrame
    | Undo
    | Lib
    | Lagged
    | ErrorFrame
    | Other
)
# The frames that move the consumer along the chain: their cursor is stored once processed.
Moving = BlockFrame | TransactionsFrame | ActionsFrame | Undo


def _items(value: Any, what: str) -> tuple[Json, ...]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise MalformedResponse(200, f"a frame's {what} is not a list of objects")
    return tuple(value)


def _object(value: Any, what: str) -> Json:
    if not isinstance(value, dict):
        raise MalformedResponse(200, f"a frame's {what} is not an object")
    return value


def parse_frame(text: str | bytes) -> Frame:
    """One websocket message as its frame; ``MalformedResponse`` if it is not one."""
    try:
        raw = json.loads(text)
        kind = raw["type"]
    except (ValueError, KeyError, TypeError) as err:
        raise MalformedResponse(200, "a stream message is not a frame") from err
    try:
        return _parse(kind, raw)
    except (KeyError, TypeError) as err:
        raise MalformedResponse(200, f"a {kind!r} frame lacks {err}") from err


def _parse(kind: Any, raw: Json) -> Frame:
    if kind == "subscribed":
        head, lib = Cursor.from_json(raw["head"]), Cursor.from_json(raw["lib"])
        return Subscribed(head, lib, int(raw["resume_from"]))
    if kind in ("block", "transactions", "actions"):
        cursor, final = Cursor.from_json(raw["cursor"]), bool(raw["irreversible"])
        block = _object(raw["block"], "block")
        if kind == "block":
            return BlockFrame(cursor, final, block)
        if kind == "transactions":
            return TransactionsFrame(
                cursor, final, block, _items(raw["transactions"], "transactions")
            )
        return ActionsFrame(cursor, final, block, _items(raw["actions"], "actions"))
    if kind == "undo":
        return Undo(Cursor.from_json(raw["cursor"]), _object(raw["block"], "block"))
    if kind == "lib":
        return Lib(int(raw["num"]), str(raw["id"]))
    if kind == "lagged":
        return Lagged(Cursor.from_json(raw["cursor"]), str(raw["reason"]))
    if kind == "error":
        return ErrorFrame(str(raw["reason"]))
    return Other(str(kind), raw)
