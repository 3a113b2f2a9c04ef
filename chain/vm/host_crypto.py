"""The hashing and key-recovery host functions, as Antelope's crypto API has them.

``sha1``, ``sha256``, ``sha512`` and ``ripemd160`` write a digest; each ``assert_*`` aborts
unless the data hashes to the given digest. ``recover_key`` takes a digest and a signature
in Antelope's packed form (a type byte 0 for K1, then the 65-byte compact signature: header
27 + 4 + recovery id, r, s) and writes the packed public key (type byte 0, then the 33-byte
compressed key); ``assert_recover_key`` aborts unless the signature recovers to the given
key. Only K1 keys exist on BoR; a signature must be canonical (low s), as every BoR
signature is, so that one digest and key have one signature.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from chain.core.primitives import keytext
from chain.core.primitives.crypto import recover
from chain.core.primitives.errors import BadSignature
from chain.vm.host import HOST_CALL_FUEL, Action
from chain.vm.hostapi import Category, HostApi

API = HostApi()

_U32 = 0xFFFFFFFF
K1 = 0  # the type byte of a K1 key or signature in Antelope's packed variant
PACKED_SIGNATURE = 1 + 65
PACKED_PUBLIC_KEY = 1 + 33
# A key recovery takes libsecp256k1 about 75 microseconds: ten host calls' worth of fuel.
RECOVER_FUEL = 100_000


def _sha1(data: bytes) -> bytes:
    return hashlib.sha1(data, usedforsecurity=False).digest()


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _sha512(data: bytes) -> bytes:
    return hashlib.sha512(data).digest()


Hash = Callable[[bytes], bytes]


def _hash(act: Action, ptr: int, length: int, size: int, fn: Hash) -> bytes:
    """The digest of ``length`` bytes at ``ptr``, charged for before they are read."""
    length &= _U32
    act.charge(length + size)
    return fn(act.read(ptr, length))


def _assert_hash(act: Action, ptr: int, length: int, expected: int, name: str, fn: Hash) -> None:
    size = {"sha1": 20, "sha256": 32, "sha512": 64, "ripemd160": 20}[name]
    digest = _hash(act, ptr, length, size, fn)
    if act.read(expected, size) != digest:
        raise act.abort(f"assert_{name}: the data does not hash to the given digest")


@API.function(Category.CRYPTO, "data: usize, len: u32, hash: usize -> void")
def sha1(act: Action, ptr: int, length: int, out: int) -> None:
    act.write(out, _hash(act, ptr, length, 20, _sha1))


@API.function(Category.CRYPTO, "data: usize, len: u32, hash: usize -> void")
def sha256(act: Action, ptr: int, length: int, out: int) -> None:
    act.write(out, _hash(act, ptr, length, 32, _sha256))


@API.function(Category.CRYPTO, "data: usize, len: u32, hash: usize -> void")
def sha512(act: Action, ptr: int, length: int, out: int) -> None:
    act.write(out, _hash(act, ptr, length, 64, _sha512))


@API.function(Category.CRYPTO, "data: usize, len: u32, hash: usize -> void")
def ripemd160(act: Action, ptr: int, length: int, out: int) -> None:
    act.write(out, _hash(act, ptr, length, 20, keytext.ripemd160))


@API.function(Category.CRYPTO, "data: usize, len: u32, hash: usize -> void")
def assert_sha1(act: Action, ptr: int, length: int, expected: int) -> None:
    _assert_hash(act, ptr, length, expected, "sha1", _sha1)


@API.function(Category.CRYPTO, "data: usize, len: u32, hash: usize -> void")
def assert_sha256(act: Action, ptr: int, length: int, expected: int) -> None:
    _assert_hash(act, ptr, length, expected, "sha256", _sha256)


@API.function(Category.CRYPTO, "data: usize, len: u32, hash: usize -> void")
def assert_sha512(act: Action, ptr: int, length: int, expected: int) -> None:
    _assert_hash(act, ptr, length, expected, "sha512", _sha512)


@API.function(Category.CRYPTO, "data: usize, len: u32, hash: usize -> void")
def assert_ripemd160(act: Action, ptr: int, length: int, expected: int) -> None:
    _assert_hash(act, ptr, length, expected, "ripemd160", keytext.ripemd160)


def _recover(act: Action, digest_ptr: int, sig_ptr: int, sig_len: int, what: str) -> bytes:
    """The packed public key a packed K1 signature over the digest recovers to, else abort."""
    act.charge(32 + PACKED_SIGNATURE + PACKED_PUBLIC_KEY)
    sig_len &= _U32
    if sig_len != PACKED_SIGNATURE:
        raise act.abort(f"{what}: a K1 signature packs to {PACKED_SIGNATURE} bytes, not {sig_len}")
    act.charge(RECOVER_FUEL - HOST_CALL_FUEL, per_byte=1)  # with the call's own: RECOVER_FUEL
    digest = act.read(digest_ptr, 32)
    packed = act.read(sig_ptr, PACKED_SIGNATURE)
    if packed[0] != K1:
        raise act.abort(f"{what}: signature type {packed[0]}: only K1 (0) is supported")
    recovery = packed[1] - 27 - 4
    if not 0 <= recovery <= 3:
        raise act.abort(f"{what}: signature header {packed[1]} is no compressed K1 recovery id")
    try:
        key = recover(packed[2:] + bytes([recovery]), digest)
    except BadSignature as err:
        raise act.abort(f"{what}: {err.reason}") from None
    return bytes([K1]) + key


@API.function(
    Category.CRYPTO, "digest: usize, sig: usize, siglen: u32, pub: usize, publen: u32 -> i32"
)
def recover_key(act: Action, digest: int, sig: int, sig_len: int, pub: int, pub_len: int) -> int:
    key = _recover(act, digest, sig, sig_len, "recover_key")
    n = min(pub_len & _U32, len(key))
    act.write(pub, key[:n])
    return len(key)


@API.function(
    Category.CRYPTO, "digest: usize, sig: usize, siglen: u32, pub: usize, publen: u32 -> void"
)
def assert_recover_key(
    act: Action, digest: int, sig: int, sig_len: int, pub: int, pub_len: int
) -> None:
    pub_len &= _U32
    if pub_len != PACKED_PUBLIC_KEY:
        raise act.abort(
            f"assert_recover_key: a K1 public key packs to {PACKED_PUBLIC_KEY} bytes, not {pub_len}"
        )
    key = _recover(act, digest, sig, sig_len, "assert_recover_key")
    if act.read(pub, PACKED_PUBLIC_KEY) != key:
        raise act.abort("assert_recover_key: the signature was not made by the given key")
