"""End-to-end encryption of BPS payloads: brokers store and anchor only sealed bytes.

A topic's key (32 random bytes, numbered by a version) is wrapped for each reader's
registered secp256k1 key with ECIES: ECDH with a fresh ephemeral key, HKDF-SHA256, then
AES-256-GCM. A wrap is ``ephemeral public key (33) | nonce (12) | ciphertext + tag (48)``,
93 bytes. A sealed payload is ``b"BPSE" | version u32 (little-endian) | nonce (12) |
ciphertext + tag``, its first 8 bytes authenticated as associated data, so neither the
version nor any byte can change without ``open_sealed`` refusing.
"""

from __future__ import annotations

import os
import struct

import coincurve
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from bps.errors import CannotOpen
from chain.core.primitives.crypto import PrivateKey

MAGIC = b"BPSE"
HEADER = struct.Struct("<4sI")
KEY_BYTES = 32
NONCE_BYTES = 12
PUBLIC_BYTES = 33
WRAP_INFO = b"bps topic key wrap v1"
WRAP_BYTES = PUBLIC_BYTES + NONCE_BYTES + KEY_BYTES + 16


def new_key() -> bytes:
    """A fresh random topic key."""
    return os.urandom(KEY_BYTES)


def _kek(shared: bytes, ephemeral: bytes, recipient: bytes) -> bytes:
    hkdf = HKDF(SHA256(), KEY_BYTES, salt=None, info=WRAP_INFO + ephemeral + recipient)
    return hkdf.derive(shared)


def wrap(public_key: bytes, key: bytes) -> bytes:
    """``key`` (32 bytes) readable only by the holder of ``public_key``'s private key."""
    if len(key) != KEY_BYTES:
        raise ValueError("a topic key has 32 bytes")
    try:
        recipient = coincurve.PublicKey(public_key).format(compressed=True)
    except Exception as err:  # coincurve raises ValueError or its own errors
        raise ValueError(f"not a secp256k1 public key: {err}") from None
    ephemeral = coincurve.PrivateKey()
    sender = ephemeral.public_key.format(compressed=True)
    kek = _kek(ephemeral.ecdh(recipient), sender, recipient)
    nonce = os.urandom(NONCE_BYTES)
    return sender + nonce + AESGCM(kek).encrypt(nonce, key, sender)


def unwrap(private_key: PrivateKey, wrapped: bytes) -> bytes:
    """The topic key in ``wrapped``; CannotOpen for another key's wrap or a changed byte."""
    if len(wrapped) != WRAP_BYTES:
        raise CannotOpen(f"a wrapped key has {WRAP_BYTES} bytes, not {len(wrapped)}")
    sender, nonce = wrapped[:PUBLIC_BYTES], wrapped[PUBLIC_BYTES : PUBLIC_BYTES + NONCE_BYTES]
    mine = coincurve.PrivateKey(private_key.secret)
    recipient = mine.public_key.format(compressed=True)
    try:
        kek = _kek(mine.ecdh(sender), sender, recipient)
        return AESGCM(kek).decrypt(nonce, wrapped[PUBLIC_BYTES + NONCE_BYTES :], sender)
    except (InvalidTag, ValueError, TypeError) as err:
        raise CannotOpen(f"the wrapped key does not open with this key ({err or 'tag'})") from None


def seal(key: bytes, version: int, plaintext: bytes) -> bytes:
    """``plaintext`` under the topic key ``key`` of ``version``."""
    header = HEADER.pack(MAGIC, version)
    nonce = os.urandom(NONCE_BYTES)
    return header + nonce + AESGCM(key).encrypt(nonce, plaintext, header)


def sealed_version(payload: bytes) -> int | None:
    """The topic key version a sealed payload needs, None for a payload that is not sealed."""
    if len(payload) < HEADER.size + NONCE_BYTES + 16 or not payload.startswith(MAGIC):
        return None
    return int(HEADER.unpack_from(payload)[1])


def open_sealed(key: bytes, payload: bytes) -> bytes:
    """The plaintext of a sealed payload; CannotOpen for another key or a changed byte."""
    if sealed_version(payload) is None:
        raise CannotOpen("not a sealed payload")
    header, nonce = payload[: HEADER.size], payload[HEADER.size : HEADER.size + NONCE_BYTES]
    try:
        return AESGCM(key).decrypt(nonce, payload[HEADER.size + NONCE_BYTES :], header)
    except (InvalidTag, ValueError) as err:
        raise CannotOpen(f"the payload does not open with this key ({err or 'tag'})") from None
