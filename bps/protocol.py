"""The frames between a BPS client and a sidecar: msgpack maps over one websocket.

The sidecar speaks first (``challenge``: a fresh nonce and its broker's name); the client
answers ``hello`` with its account and a signature of that nonce by the account's key; after
that every request carries an ``id`` that its answer repeats, so a client may keep many in
flight. Every field is checked here, with a bound on every list and byte string, before a
handler sees it: a request that breaks a rule is refused with ``bad_request``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import msgpack

from bps.errors import Refused

MAX_FRAME = 16 * 1024 * 1024
MAX_MESSAGE = 1024 * 1024
MAX_BATCH = 1000
MAX_WAIT_MS = 10_000
MAX_NAME = 13
MAX_ID = 128


def auth_digest(broker: str, nonce: bytes) -> bytes:
    """What a client signs to prove its account to ``broker``'s sidecar for one session."""
    return hashlib.sha256(b"bps-auth\x00" + broker.encode() + b"\x00" + nonce).digest()


def pack(frame: dict[str, Any]) -> bytes:
    return msgpack.packb(frame, use_bin_type=True)  # type: ignore[no-any-return]


def unpack(data: bytes) -> dict[str, Any]:
    if len(data) > MAX_FRAME:
        raise Refused("bad_request", f"a frame over {MAX_FRAME} bytes")
    try:
        frame = msgpack.unpackb(data, raw=False, max_bin_len=MAX_FRAME, strict_map_key=True)
    except (ValueError, msgpack.UnpackException) as err:
        raise Refused("bad_request", f"not a msgpack frame: {err}") from None
    if not isinstance(frame, dict):
        raise Refused("bad_request", "a frame is a map")
    return frame


def text(frame: dict[str, Any], key: str, limit: int = MAX_NAME) -> str:
    value = frame.get(key)
    if not isinstance(value, str) or not 0 < len(value) <= limit:
        raise Refused("bad_request", f"{key}: a text of 1 to {limit} characters")
    return value


def number(frame: dict[str, Any], key: str, low: int = 0, high: int = 2**63 - 1) -> int:
    value = frame.get(key)
    if type(value) is not int or not low <= value <= high:
        raise Refused("bad_request", f"{key}: an integer from {low} to {high}")
    return value


def blob(frame: dict[str, Any], key: str, limit: int) -> bytes:
    value = frame.get(key)
    if not isinstance(value, bytes) or len(value) > limit:
        raise Refused("bad_request", f"{key}: bytes, at most {limit}")
    return value


@dataclass(frozen=True, slots=True)
class Place:
    """A partition of a tenant's topic, as a request names it."""

    tenant: str
    topic: str
    partition: int

    @classmethod
    def of(cls, frame: dict[str, Any]) -> Place:
        return cls(text(frame, "tenant"), text(frame, "topic"), number(frame, "partition", 0, 63))


@dataclass(frozen=True, slots=True)
class Produce:
    place: Place
    messages: tuple[tuple[str, bytes], ...]  # (producer's message id, payload)

    @classmethod
    def of(cls, frame: dict[str, Any]) -> Produce:
        listed = frame.get("messages")
        if not isinstance(listed, list) or not 0 < len(listed) <= MAX_BATCH:
            raise Refused("bad_request", f"messages: a list of 1 to {MAX_BATCH}")
        out = []
        for item in listed:
            if (
                not isinstance(item, list)
                or len(item) != 2
                or not isinstance(item[0], str)
                or not 0 < len(item[0]) <= MAX_ID
                or not isinstance(item[1], bytes)
                or len(item[1]) > MAX_MESSAGE
            ):
                shape = f"[id (1 to {MAX_ID} characters), payload (<= {MAX_MESSAGE} bytes)]"
                raise Refused("bad_request", f"a message is {shape}")
            out.append((item[0], item[1]))
        return cls(Place.of(frame), tuple(out))


@dataclass(frozen=True, slots=True)
class Fetch:
    place: Place
    start: int
    max: int
    wait_ms: int

    @classmethod
    def of(cls, frame: dict[str, Any]) -> Fetch:
        return cls(
            Place.of(frame),
            number(frame, "from", 1),
            number(frame, "max", 1, MAX_BATCH),
            number(frame, "wait_ms", 0, MAX_WAIT_MS),
        )


@dataclass(frozen=True, slots=True)
class Commit:
    place: Place
    group: str
    offset: int

    @classmethod
    def of(cls, frame: dict[str, Any]) -> Commit:
        group = text(frame, "group", 32)
        if not all(c.isalnum() or c in "-_" for c in group):
            raise Refused("bad_request", "group: letters, digits, - and _")
        return cls(Place.of(frame), group, number(frame, "offset", 0))


@dataclass(frozen=True, slots=True)
class ProofRequest:
    place: Place
    offset: int

    @classmethod
    def of(cls, frame: dict[str, Any]) -> ProofRequest:
        return cls(Place.of(frame), number(frame, "offset", 1))
