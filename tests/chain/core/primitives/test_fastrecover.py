"""The compiled batch recovery and the reference agree on every pair: valid signatures, and
each way one is not (recovery id, high s, zero or out-of-range r and s, flipped bits, short
or long parts, a digest of another length), alone and mixed in one batch."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chain.core.execution import engine
from chain.core.primitives.crypto import LOW_S_MAX, PrivateKey, recover_many
from chain.signatures.sigpool import recover_local

pytestmark = pytest.mark.skipif(not engine.available(), reason="the compiled core is not built")

ORDER = bytes.fromhex("FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141")
KEYS = [PrivateKey(bytes([i + 1]) * 32) for i in range(4)]


def compiled() -> Any:
    batch = engine._available.recover_batch if engine._available else None
    assert batch is not None and batch is not recover_many, "the batch recovery is built"
    return batch


@st.composite
def pairs(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A signature and digest, valid or broken one way."""
    digest = draw(st.binary(min_size=32, max_size=32))
    sig = bytearray(draw(st.sampled_from(KEYS)).sign(digest))
    how = draw(st.sampled_from(["valid", "recid", "high_s", "r", "s", "flip", "size", "digest"]))
    if how == "recid":
        sig[64] = draw(st.integers(0, 255))
    elif how == "high_s":  # the same point's other s: valid but not canonical
        s = int.from_bytes(sig[32:64], "big")
        sig[32:64] = (int.from_bytes(ORDER, "big") - s).to_bytes(32, "big")
    elif how in ("r", "s"):
        at = 0 if how == "r" else 32
        sig[at : at + 32] = draw(st.sampled_from([bytes(32), ORDER, LOW_S_MAX, b"\xff" * 32]))
    elif how == "flip":
        at = draw(st.integers(0, 64))
        sig[at] ^= 1 << draw(st.integers(0, 7))
    elif how == "size":
        sig = sig[: draw(st.integers(0, 64))] + draw(st.binary(max_size=3))
    elif how == "digest":
        digest = digest[: draw(st.integers(0, 31))] or digest + b"\x00"
    return bytes(sig), digest


@settings(max_examples=300, deadline=None)
@given(st.lists(pairs(), max_size=12))
def test_a_batch_recovers_what_the_reference_recovers(items: list[tuple[bytes, bytes]]) -> None:
    assert compiled()(items) == recover_many(items)


def test_valid_signatures_give_their_keys() -> None:
    digests = [bytes([i]) * 32 for i in range(8)]
    items = [(KEYS[i % 4].sign(d), d) for i, d in enumerate(digests)]
    assert compiled()(items) == [KEYS[i % 4].public_key for i in range(8)]


def outcome(recover: Any, items: list[Any]) -> Any:
    try:
        return recover(items)
    except (TypeError, ValueError) as err:
        return type(err)


def test_pairs_of_other_types_go_to_the_reference() -> None:
    """What is not two bytes objects is answered by the reference: its keys or its error."""
    digest = b"\x05" * 32
    sig = KEYS[0].sign(digest)
    odd = [
        (bytearray(sig), digest),
        (memoryview(sig), digest),
        (sig, "d" * 32),
        (sig, "d"),
        (sig,),
        7,
    ]
    for item in odd:
        items = [(sig, digest), item]
        assert outcome(compiled(), items) == outcome(recover_many, items)
    assert outcome(recover_many, [(sig, "d")]) == [None]
    assert outcome(recover_many, [(bytearray(sig), digest)]) is TypeError


def test_recover_local_follows_the_engine() -> None:
    """BOR_NATIVE=0 recovers through the reference alone; the compiled batch otherwise."""
    digest = b"\x06" * 32
    items = [(KEYS[1].sign(digest), digest)]
    was = engine.name() == engine.NATIVE
    try:
        engine.select(False)
        assert engine.recover_batch() is None
        assert recover_local(items) == [KEYS[1].public_key]
        engine.select(True)
        assert engine.recover_batch() is compiled()
        assert recover_local(items) == [KEYS[1].public_key]
    finally:
        engine.select(was)
