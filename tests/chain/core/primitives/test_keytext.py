"""Antelope's key and signature texts: the vectors of Antelope's documentation (the dev key
``PVT_K1_2bfGi…`` / ``5KQwr…`` and its public key in both forms) and a signature made by
WharfKit 1.2.0 read back; round trips; a changed character fails the checksum."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chain.core.primitives import keytext
from chain.core.primitives.crypto import PrivateKey, public_key_from_text, recover
from chain.core.primitives.errors import BadSignature, InvalidKey

# Antelope's documented development key, in each of its text forms.
DEV_PRIVATE = "PVT_K1_2bfGi9rYsXQSXXTvJbDAPhHLQUojjaNLomdm3cEJ1XTzMqUt3V"
DEV_WIF = "5KQwrPbwdL6PhXujxW37FSSQZ1JiwsST4cqQzDeyXtP79zkvFD3"
DEV_PUBLIC = "PUB_K1_6MRyAjQq8ud7hVNYcfnVPJqcVpscN5So8BhtHuGYqET5BoDq63"
DEV_LEGACY = "EOS6MRyAjQq8ud7hVNYcfnVPJqcVpscN5So8BhtHuGYqET5GDW5CV"
# WharfKit 1.2.0: PrivateKey.from(DEV_PRIVATE).signDigest(Checksum256.hash("BoR")).
DIGEST = bytes.fromhex("1e279fcf2226695daa5bacfe7f6cabeff42f11f66440b5344e40fc078dfccbb9")
WHARFKIT_SIGNATURE = (
    "SIG_K1_KWM7otKvErPeumkc7JT1ovMJ3bbAJr5XTQdLbTZLq73rvXCH2oJhkZoEBcaBV9NWFx87XAWyMafkNU1nXd"
    "6WAsi5zMLrNt"
)


def _typo(text: str) -> str:
    """``text`` with its last character changed (still base58)."""
    return text[:-1] + ("2" if text[-1] != "2" else "3")


def test_antelopes_dev_key_reads_in_every_form_and_writes_antelopes_texts() -> None:
    """PVT_K1_ base58 and the WIF give the same secret, whose public key BoR writes as
    Antelope's PUB_K1_ and EOS texts, and parses back from each."""
    key = PrivateKey.from_text(DEV_PRIVATE)
    assert PrivateKey.from_text(DEV_WIF).secret == key.secret
    assert keytext.private_key_text(key.secret) == DEV_PRIVATE
    assert keytext.public_key_text(key.public_key) == DEV_PUBLIC
    assert keytext.legacy_public_key_text(key.public_key) == DEV_LEGACY
    for text in (DEV_PUBLIC, DEV_LEGACY, "PUB_K1_" + key.public_key.hex()):
        assert public_key_from_text(text) == key.public_key
    assert PrivateKey.from_text(key.to_text()).secret == key.secret  # BoR's hex form still


def test_a_wharfkit_signature_recovers_the_signer_and_round_trips() -> None:
    """WharfKit's SIG_K1_ text (recovery id first) becomes BoR's r, s, id and recovers the
    dev key; BoR writes the same text back."""
    signature = keytext.signature_bytes(WHARFKIT_SIGNATURE)
    assert recover(signature, DIGEST) == PrivateKey.from_text(DEV_PRIVATE).public_key
    assert keytext.signature_text(signature) == WHARFKIT_SIGNATURE


@given(st.binary(min_size=32, max_size=32).filter(lambda b: b != bytes(32)))
def test_signatures_of_any_key_round_trip(seed: bytes) -> None:
    """Any BoR signature survives SIG_K1_ text and still recovers its key."""
    key = PrivateKey(hashlib.sha256(seed).digest())
    signature = key.sign(DIGEST)
    back = keytext.signature_bytes(keytext.signature_text(signature))
    assert back == signature and recover(back, DIGEST) == key.public_key
    assert public_key_from_text(keytext.public_key_text(key.public_key)) == key.public_key
    assert keytext.private_key_bytes(keytext.private_key_text(key.secret)) == key.secret


def test_a_changed_character_fails_the_checksum() -> None:
    """One character off in any text is refused by its check, naming the kind of text."""
    with pytest.raises(InvalidKey, match="checksum"):
        public_key_from_text(_typo(DEV_PUBLIC))
    with pytest.raises(InvalidKey, match="checksum"):
        public_key_from_text(_typo(DEV_LEGACY))
    with pytest.raises(InvalidKey, match="checksum"):
        PrivateKey.from_text(_typo(DEV_PRIVATE))
    with pytest.raises(InvalidKey, match="checksum"):
        PrivateKey.from_text(_typo(DEV_WIF))
    with pytest.raises(BadSignature, match="checksum"):
        keytext.signature_bytes(_typo(WHARFKIT_SIGNATURE))


@pytest.mark.parametrize(
    "text", ["PUB_K1_0OIl", "PUB_K1_", "PUB_K1_" + "z" * 200, "PUB_R1_abc", "EOS", "EOS1"]
)
def test_malformed_public_key_texts_are_refused(text: str) -> None:
    """Characters outside base58, an empty or overlong body and other curves are InvalidKey."""
    with pytest.raises(InvalidKey):
        public_key_from_text(text)


def test_signature_texts_of_other_kinds_are_refused() -> None:
    """A signature text must be SIG_K1_ with 65 checked bytes."""
    for text in ("SIG_R1_abc", "SIG_K1_", "SIG_K1_" + keytext.base58(b"\x1f" * 10)):
        with pytest.raises(BadSignature):
            keytext.signature_bytes(text)


@pytest.mark.parametrize(
    ("data", "digest"),
    [  # the test vectors of the RIPEMD-160 paper
        (b"", "9c1185a5c5e9fc54612808977ee8f548b2258d31"),
        (b"abc", "8eb208f7e05d987a9b044a8e98c6b087f15a0bfc"),
        (b"message digest", "5d0689ef49d2fae572b881b123a85ffa21595f36"),
    ],
)
def test_python_ripemd160_matches_the_papers_vectors(data: bytes, digest: str) -> None:
    """The fallback used where OpenSSL lacks RIPEMD-160 gives the published digests."""
    assert keytext.ripemd160_python(data).hex() == digest


@given(st.binary(max_size=300))
def test_python_ripemd160_matches_openssls(data: bytes) -> None:
    """Across lengths (padding crosses block edges) the fallback agrees with OpenSSL's."""
    try:
        expected = hashlib.new("ripemd160", data).digest()
    except ValueError:
        pytest.skip("this OpenSSL has no RIPEMD-160 to compare with")
    assert keytext.ripemd160_python(data) == expected
