"""The sidecar's frames: a well-formed request parses to its typed form, and each broken
rule (a field's type, a bound on a list, an id or a payload, an unknown shape) is refused as
``bad_request`` naming the field, before any handler runs."""

from __future__ import annotations

from typing import Any

import pytest

from bps import protocol
from bps.errors import Refused

PLACE = {"tenant": "acme", "topic": "orders", "partition": 1}


def test_a_produce_request_parses() -> None:
    frame = protocol.unpack(protocol.pack(PLACE | {"messages": [["id1", b"hello"]]}))
    produce = protocol.Produce.of(frame)
    assert produce.place == protocol.Place("acme", "orders", 1)
    assert produce.messages == (("id1", b"hello"),)


@pytest.mark.parametrize(
    ("make", "frame", "field"),
    [
        (protocol.Produce.of, PLACE | {"messages": []}, "messages"),
        (protocol.Produce.of, PLACE | {"messages": [["", b"x"]]}, "a message"),
        (protocol.Produce.of, PLACE | {"messages": [["i", "text"]]}, "a message"),
        (protocol.Produce.of, PLACE | {"messages": [["i", b"x" * (2**20 + 1)]]}, "a message"),
        (protocol.Produce.of, PLACE | {"messages": [["i", b"x"]] * 1001}, "messages"),
        (protocol.Produce.of, {**PLACE, "partition": 64, "messages": [["i", b""]]}, "partition"),
        (protocol.Produce.of, {**PLACE, "tenant": "x" * 14, "messages": [["i", b""]]}, "tenant"),
        (protocol.Fetch.of, PLACE | {"from": 0, "max": 1, "wait_ms": 0}, "from"),
        (protocol.Fetch.of, PLACE | {"from": 1, "max": 1001, "wait_ms": 0}, "max"),
        (protocol.Fetch.of, PLACE | {"from": 1, "max": 1, "wait_ms": 10_001}, "wait_ms"),
        (protocol.Fetch.of, PLACE | {"from": True, "max": 1, "wait_ms": 0}, "from"),
        (protocol.Commit.of, PLACE | {"group": "a.b", "offset": 1}, "group"),
        (protocol.Commit.of, PLACE | {"group": "g", "offset": -1}, "offset"),
        (protocol.ProofRequest.of, PLACE | {"offset": 0}, "offset"),
    ],
)
def test_broken_requests_are_refused(make: Any, frame: dict[str, Any], field: str) -> None:
    with pytest.raises(Refused) as refused:
        make(frame)
    assert refused.value.code == "bad_request" and field in refused.value.what


@pytest.mark.parametrize("data", [b"\xc1", protocol.pack({"x": 1})[:-1], b"\x93\x01\x02\x03"])
def test_frames_that_are_not_maps_are_refused(data: bytes) -> None:
    with pytest.raises(Refused) as refused:
        protocol.unpack(data)
    assert refused.value.code == "bad_request"


def test_the_auth_digest_names_the_broker() -> None:
    nonce = b"\x05" * 32
    assert protocol.auth_digest("brokera", nonce) != protocol.auth_digest("brokerb", nonce)
