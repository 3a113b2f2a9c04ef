"""Codec fuzzing: random and mutated frames either decode to a message or raise MalformedMessage."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from p2p.codec import decode_frame, encode_frame
from p2p.errors import MalformedMessage
from p2p.messages import SyncRequest
from tests.p2p.test_channel_contract import sample_messages

FRAMES = [encode_frame(m) for m in sample_messages()]


@given(st.binary(max_size=2000))
def test_random_bytes(data: bytes) -> None:
    with contextlib.suppress(MalformedMessage):
        decode_frame(data)


@given(st.integers(0, 255), st.binary(max_size=400))
def test_random_payload_of_every_type(kind: int, payload: bytes) -> None:
    frame = (len(payload) + 1).to_bytes(4, "big") + bytes([kind]) + payload
    with contextlib.suppress(MalformedMessage):
        decode_frame(frame)


@given(st.sampled_from(FRAMES), st.data())
@settings(max_examples=500)
def test_mutated_frames(frame: bytes, data: st.DataObject) -> None:
    mutated = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(5, len(mutated) - 1))
        mutated[index] = data.draw(st.integers(0, 255))
    try:
        message = decode_frame(bytes(mutated))
    except MalformedMessage:
        return
    assert encode_frame(message) == bytes(mutated), "what decodes re-encodes to the same bytes"


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_sync_request_round_trip_or_refusal(start: int, end: int) -> None:
    frame = encode_frame(SyncRequest(start, end))
    if end < start:
        try:
            decode_frame(frame)
        except MalformedMessage:
            return
        raise AssertionError("a backwards range was accepted")
    assert decode_frame(frame) == SyncRequest(start, end)
