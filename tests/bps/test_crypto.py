"""BPS's end-to-end encryption: wrapped topic keys and sealed payloads round trip, and open
only with the right key and unchanged bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bps import crypto
from bps.errors import CannotOpen
from chain.core.primitives.crypto import PrivateKey

ALICE = PrivateKey(b"\x0a" * 32)
BOB = PrivateKey(b"\x0b" * 32)


def test_a_wrapped_key_opens_for_its_recipient_only() -> None:
    """Bob's wrap is 93 bytes (fits the contract's 128), fresh each time, opens with bob's
    key, not alice's, and not after any one byte changed."""
    key = crypto.new_key()
    wrapped = crypto.wrap(bytes(BOB.public_key), key)
    assert len(wrapped) == crypto.WRAP_BYTES == 93
    assert crypto.wrap(bytes(BOB.public_key), key) != wrapped
    assert crypto.unwrap(BOB, wrapped) == key
    with pytest.raises(CannotOpen):
        crypto.unwrap(ALICE, wrapped)
    for i in range(len(wrapped)):
        changed = bytearray(wrapped)
        changed[i] ^= 0x01
        with pytest.raises(CannotOpen):
            crypto.unwrap(BOB, bytes(changed))
    with pytest.raises(CannotOpen, match="93 bytes"):
        crypto.unwrap(BOB, wrapped[:-1])


def test_wrap_refuses_a_bad_public_key_or_key_size() -> None:
    with pytest.raises(ValueError, match="public key"):
        crypto.wrap(b"\x02" + b"\xff" * 32, crypto.new_key())
    with pytest.raises(ValueError, match="32 bytes"):
        crypto.wrap(bytes(BOB.public_key), b"short")


def test_a_sealed_payload_names_its_version_and_hides_the_plaintext() -> None:
    key = crypto.new_key()
    sealed = crypto.seal(key, 7, b"the plaintext")
    assert sealed[:8] == b"BPSE\x07\x00\x00\x00" and b"plaintext" not in sealed
    assert crypto.sealed_version(sealed) == 7
    assert crypto.sealed_version(b"the plaintext") is None
    assert crypto.sealed_version(b"BPSE") is None
    assert crypto.open_sealed(key, sealed) == b"the plaintext"
    with pytest.raises(CannotOpen, match="not a sealed payload"):
        crypto.open_sealed(key, b"plain")


def test_a_sealed_payload_refuses_another_key_or_version() -> None:
    """The header is authenticated: relabelling the version breaks the seal as much as a
    wrong key does."""
    key = crypto.new_key()
    sealed = crypto.seal(key, 1, b"x" * 40)
    with pytest.raises(CannotOpen):
        crypto.open_sealed(crypto.new_key(), sealed)
    relabelled = sealed[:4] + b"\x02\x00\x00\x00" + sealed[8:]
    with pytest.raises(CannotOpen):
        crypto.open_sealed(key, relabelled)


@settings(max_examples=60, deadline=None)
@given(
    plaintext=st.binary(max_size=2000),
    version=st.integers(0, 2**32 - 1),
    flip=st.integers(0, 10_000),
    bit=st.integers(0, 7),
)
def test_any_payload_round_trips_and_any_flipped_bit_is_refused(
    plaintext: bytes, version: int, flip: int, bit: int
) -> None:
    key = crypto.new_key()
    sealed = crypto.seal(key, version, plaintext)
    assert crypto.sealed_version(sealed) == version
    assert crypto.open_sealed(key, sealed) == plaintext
    changed = bytearray(sealed)
    changed[flip % len(sealed)] ^= 1 << bit
    with pytest.raises(CannotOpen):
        crypto.open_sealed(key, bytes(changed))
