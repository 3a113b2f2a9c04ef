"""Signatures: sign/recover round trips (Hypothesis), malleability and key text forms."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chain.core.primitives.crypto import (
    PrivateKey,
    public_key_from_text,
    public_key_to_text,
    recover,
    recover_many,
    sha256,
)
from chain.core.primitives.errors import BadSignature, InvalidKey

ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
secrets = st.integers(1, ORDER - 1).map(lambda n: n.to_bytes(32, "big"))


@given(secrets, st.binary(max_size=64))
@settings(max_examples=50)
def test_sign_then_recover_gives_the_key(secret: bytes, message: bytes) -> None:
    """Recovering a signature over a digest gives back the signer's public key, for any key and
    message."""
    key = PrivateKey(secret)
    digest = sha256(message)
    assert recover(key.sign(digest), digest) == key.public_key


@given(secrets, st.binary(min_size=1, max_size=64))
@settings(max_examples=30)
def test_other_message_recovers_another_key(secret: bytes, message: bytes) -> None:
    """A signature checked against another message's digest recovers another key or is refused,
    never the signer's."""
    key = PrivateKey(secret)
    sig = key.sign(sha256(message))
    with contextlib.suppress(BadSignature):
        assert recover(sig, sha256(message + b"!")) != key.public_key


def test_high_s_signature_is_refused() -> None:
    """The high-s twin of a valid signature (s replaced by n - s) is refused as malleable."""
    key = PrivateKey.generate()
    digest = sha256(b"m")
    sig = key.sign(digest)
    s = int.from_bytes(sig[32:64], "big")
    flipped = sig[:32] + (ORDER - s).to_bytes(32, "big") + bytes([sig[64] ^ 1])
    with pytest.raises(BadSignature):
        recover(flipped, digest)


def test_garbage_signatures() -> None:
    """An all-zero signature raises BadSignature; a malformed one recovers to None in a batch."""
    digest = sha256(b"m")
    with pytest.raises(BadSignature):
        recover(b"\x00" * 64, digest)
    assert recover_many([(b"\xff" * 65, digest)]) == [None]


def test_key_text_round_trip_and_errors() -> None:
    """Private and public keys survive their text forms; malformed key texts raise InvalidKey."""
    key = PrivateKey.generate()
    assert PrivateKey.from_text(key.to_text()).public_key == key.public_key
    assert public_key_from_text(public_key_to_text(key.public_key)) == key.public_key
    for bad in ("PUB_K1_zz", "EOS6MRyAj", "PUB_K1_" + "00" * 33):
        with pytest.raises(InvalidKey):
            public_key_from_text(bad)
    with pytest.raises(InvalidKey):
        PrivateKey.from_text("PVT_K1_" + "00" * 32)
