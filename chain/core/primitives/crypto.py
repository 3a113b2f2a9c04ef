"""Hashes, keys and signatures.

Signatures are recoverable ECDSA over secp256k1 (EOSIO's K1 curve) through coincurve, which
binds libsecp256k1. Signature checks are the bottleneck of block validation, and of the
schemes Python binds, secp256k1 through coincurve checks the fastest (faster than Ed25519
through ``cryptography`` or PyNaCl). Recovery is a little slower than verify but needs no
state: the signer's keys come out of the signature alone, so recovery can run in
worker processes or at admission time and be cached by transaction id, and the state only has
to compare keys (EOSIO authorises the same way).

Signatures are 65 bytes, ``r || s || recovery id``, with ``s`` in the lower half of the group
order so that a signature cannot be re-shaped into a second valid one.
"""

from __future__ import annotations

import hashlib
import string
import threading
from collections.abc import Callable

import coincurve

from chain.core.primitives import keytext
from chain.core.primitives.errors import BadSignature, InvalidKey
from chain.core.primitives.types import PublicKey

SIGNATURE_SIZE = 65
PUBLIC_KEY_SIZE = 33
_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
_HALF_ORDER = _ORDER // 2
# The largest s of a canonical (low-s) signature, as its 32 big-endian bytes.
LOW_S_MAX = _HALF_ORDER.to_bytes(32, "big")

PUBLIC_PREFIX = "PUB_K1_"
PRIVATE_PREFIX = "PVT_K1_"


def sha256(data: bytes) -> bytes:
    """SHA-256 digest of ``data``."""
    return hashlib.sha256(data).digest()


class PrivateKey:
    """A secp256k1 private key that signs 32-byte digests."""

    __slots__ = ("_key",)

    def __init__(self, secret: bytes) -> None:
        try:
            self._key = coincurve.PrivateKey(secret)
        except Exception as err:  # coincurve raises ValueError or its own errors
            raise InvalidKey(f"invalid private key: {err}") from err

    @classmethod
    def generate(cls) -> PrivateKey:
        """A fresh random key."""
        return cls(coincurve.PrivateKey().secret)

    @classmethod
    def from_text(cls, text: str) -> PrivateKey:
        """Parse BoR's ``PVT_K1_<hex>``, or Antelope's ``PVT_K1_`` base58 or legacy WIF."""
        if not isinstance(text, str) or len(text) > keytext.MAX_TEXT:
            raise InvalidKey("private key must be PVT_K1_ text")
        if not _is_hex_text(text, PRIVATE_PREFIX):
            return cls(keytext.private_key_bytes(text))
        try:
            secret = bytes.fromhex(text[len(PRIVATE_PREFIX) :])
        except ValueError as err:
            raise InvalidKey("private key is not hex") from err
        if len(secret) != 32:
            raise InvalidKey("private key must be 32 bytes")
        return cls(secret)

    def to_text(self) -> str:
        return PRIVATE_PREFIX + self._key.secret.hex()

    @property
    def secret(self) -> bytes:
        return bytes(self._key.secret)

    @property
    def public_key(self) -> PublicKey:
        return PublicKey(self._key.public_key.format(compressed=True))

    def sign(self, digest: bytes) -> bytes:
        """A 65-byte recoverable signature of a 32-byte digest (libsecp256k1 signs low-s)."""
        return bytes(self._key.sign_recoverable(digest, hasher=None))


class _DirectRecovery:
    """Key recovery through coincurve's cffi binding of libsecp256k1, without its wrapper
    objects. Measured on one core: 77 microseconds a recovery against 88 through
    ``coincurve.PublicKey.from_signature_and_message``; libsecp256k1 itself takes 75.
    Buffers are reused, so one instance per thread.
    """

    def __init__(self) -> None:
        from coincurve._libsecp256k1 import ffi, lib
        from coincurve.context import GLOBAL_CONTEXT

        self._lib, self._ffi, self._ctx = lib, ffi, GLOBAL_CONTEXT.ctx
        self._sig = ffi.new("secp256k1_ecdsa_recoverable_signature *")
        self._pub = ffi.new("secp256k1_pubkey *")
        self._out = ffi.new("unsigned char[33]")
        self._out_len = ffi.new("size_t *")
        self._compressed = lib.SECP256K1_EC_COMPRESSED

    def __call__(self, signature: bytes, digest: bytes) -> bytes | None:
        lib, ctx = self._lib, self._ctx
        if not lib.secp256k1_ecdsa_recoverable_signature_parse_compact(
            ctx, self._sig, signature, signature[64]
        ):
            return None
        if not lib.secp256k1_ecdsa_recover(ctx, self._pub, self._sig, digest):
            return None
        self._out_len[0] = PUBLIC_KEY_SIZE
        lib.secp256k1_ec_pubkey_serialize(
            ctx, self._out, self._out_len, self._pub, self._compressed
        )
        return bytes(self._ffi.buffer(self._out, PUBLIC_KEY_SIZE))


def batch_recovery_parts() -> tuple[int, int, int, int, int, object] | None:
    """What a compiled batch recovery (``_fastrecover``) needs of the libsecp256k1 that
    coincurve loaded: its context's address, those of the parse, recover and serialize
    functions, the compressed-key flag, and the object owning the context (to keep it alive);
    None for a coincurve without the internals ``_DirectRecovery`` uses too."""
    try:
        from coincurve._libsecp256k1 import ffi, lib
        from coincurve.context import GLOBAL_CONTEXT
    except ImportError:
        return None
    try:
        functions = [
            ffi.addressof(lib, name)
            for name in (
                "secp256k1_ecdsa_recoverable_signature_parse_compact",
                "secp256k1_ecdsa_recover",
                "secp256k1_ec_pubkey_serialize",
            )
        ]
        parse, recover_fn, serialize = (int(ffi.cast("uintptr_t", f)) for f in functions)
        ctx = int(ffi.cast("uintptr_t", GLOBAL_CONTEXT.ctx))
        compressed = int(lib.SECP256K1_EC_COMPRESSED)
    except (AttributeError, TypeError):
        return None
    return ctx, parse, recover_fn, serialize, compressed, GLOBAL_CONTEXT


def _wrapped_recovery(signature: bytes, digest: bytes) -> bytes | None:
    try:
        key = coincurve.PublicKey.from_signature_and_message(signature, digest, hasher=None)
    except Exception:  # coincurve raises ValueError or its own errors
        return None
    return bytes(key.format(compressed=True))


_local = threading.local()


def _recovery() -> Callable[[bytes, bytes], bytes | None]:
    fn: Callable[[bytes, bytes], bytes | None] | None = getattr(_local, "recover", None)
    if fn is None:
        try:
            fn = _DirectRecovery()
        except (ImportError, AttributeError):  # a coincurve without the internals we use
            fn = _wrapped_recovery
        _local.recover = fn
    return fn


def recover(signature: bytes, digest: bytes) -> PublicKey:
    """The public key that made ``signature`` over ``digest``; raises BadSignature."""
    if len(signature) != SIGNATURE_SIZE or len(digest) != 32:
        raise BadSignature(f"signature must be {SIGNATURE_SIZE} bytes over a 32-byte digest")
    if signature[64] > 3:
        raise BadSignature("signature has an invalid recovery id")
    if int.from_bytes(signature[32:64], "big") > _HALF_ORDER:
        raise BadSignature("signature is not in canonical low-s form")
    key = _recovery()(signature, digest)
    if key is None:
        raise BadSignature("signature does not recover to a key")
    return PublicKey(key)


def recover_many(items: list[tuple[bytes, bytes]]) -> list[PublicKey | None]:
    """Recover a batch of (signature, digest) pairs; None where a signature is bad.

    A plain top-level function so that worker processes can run it.
    """
    out: list[PublicKey | None] = []
    for signature, digest in items:
        try:
            out.append(recover(signature, digest))
        except BadSignature:
            out.append(None)
    return out


def _is_hex_text(text: str, prefix: str) -> bool:
    """Whether ``text`` is in BoR's form, ``prefix`` and hex digits (Antelope's base58 of a
    key has other letters: the chance that its 50 digits are all hex is below 1e-20)."""
    body = text[len(prefix) :]
    return text.startswith(prefix) and all(c in string.hexdigits for c in body)


def public_key_from_text(text: str) -> PublicKey:
    """Parse BoR's ``PUB_K1_<hex of the 33-byte compressed point>``, or Antelope's
    ``PUB_K1_`` base58 text or legacy ``EOS`` text of the same key."""
    if not isinstance(text, str) or len(text) > keytext.MAX_TEXT:
        raise InvalidKey(f"public key must start with {PUBLIC_PREFIX}")
    if not _is_hex_text(text, PUBLIC_PREFIX):
        return check_public_key(keytext.public_key_bytes(text))
    try:
        raw = bytes.fromhex(text[len(PUBLIC_PREFIX) :])
    except ValueError as err:
        raise InvalidKey("public key is not hex") from err
    return check_public_key(raw)


def check_public_key(raw: bytes) -> PublicKey:
    """Return ``raw`` as a public key if it is a valid compressed point."""
    if len(raw) != PUBLIC_KEY_SIZE:
        raise InvalidKey(f"public key must be {PUBLIC_KEY_SIZE} bytes")
    try:
        coincurve.PublicKey(raw)
    except Exception as err:
        raise InvalidKey("public key is not a point on secp256k1") from err
    return PublicKey(raw)


def public_key_to_text(key: bytes) -> str:
    return PUBLIC_PREFIX + key.hex()
