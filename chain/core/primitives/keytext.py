"""Antelope's text forms of K1 keys and signatures, beside BoR's own (prefix and hex).

Antelope writes a K1 public key as ``PUB_K1_`` and base58 of the 33-byte key and a 4-byte
check (the first bytes of RIPEMD-160 over the key and the text "K1"); a private key as
``PVT_K1_`` the same way over its 32 bytes; a signature as ``SIG_K1_`` over 65 bytes, its
recovery id first (31 + id: a compressed key) and then r and s, where BoR keeps r, s and the
id last. The legacy forms (``EOS`` keys, WIF private keys) are read too, since Antelope's
tools still print them. Only this module turns those texts into bytes and back.
"""

from __future__ import annotations

import hashlib

from chain.core.primitives.errors import BadSignature, InvalidKey

K1_PUBLIC = "PUB_K1_"
K1_PRIVATE = "PVT_K1_"
K1_SIGNATURE = "SIG_K1_"
LEGACY_PUBLIC = "EOS"
_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_DIGITS = {c: i for i, c in enumerate(_BASE58)}
# The longest text this module reads: a signature's 69 bytes are 95 base58 digits at most.
MAX_TEXT = 128
_COMPRESSED_HEADER = 31  # Antelope's signature header: 27 + 4 (compressed key) + recovery id


def base58(data: bytes) -> str:
    """Bitcoin's base58 (each leading zero byte a "1"), as Antelope uses it."""
    number = int.from_bytes(data, "big")
    digits = ""
    while number:
        number, digit = divmod(number, 58)
        digits = _BASE58[digit] + digits
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + digits


def from_base58(text: str) -> bytes:
    """The bytes of base58 ``text``; ValueError if it has a character out of the alphabet."""
    if len(text) > MAX_TEXT:  # int() below is quadratic in the digits
        raise ValueError(f"longer than {MAX_TEXT} characters")
    number = 0
    for char in text:
        digit = _DIGITS.get(char)
        if digit is None:
            raise ValueError(f"{char!r} is not a base58 digit")
        number = number * 58 + digit
    body = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return b"\0" * (len(text) - len(text.lstrip("1"))) + body


def ripemd160(data: bytes) -> bytes:
    """RIPEMD-160 of ``data``: hashlib's where OpenSSL still offers it (OpenSSL 3 moved it to
    the legacy provider, so some builds lack it), else the checked implementation here."""
    try:
        return hashlib.new("ripemd160", data).digest()
    except ValueError:
        return ripemd160_python(data)


def _checked(text: str, size: int, suffix: bytes, what: str) -> bytes:
    """The ``size`` bytes of base58 ``text`` whose last 4 bytes check them; ValueError."""
    raw = from_base58(text)
    if len(raw) != size + 4:
        raise ValueError(f"{what} must be {size} bytes and a 4-byte check, not {len(raw)}")
    body, check = raw[:size], raw[size:]
    if ripemd160(body + suffix)[:4] != check:
        raise ValueError(f"{what} fails its checksum (a typo?)")
    return body


def _with_check(body: bytes, suffix: bytes) -> str:
    return base58(body + ripemd160(body + suffix)[:4])


# --- public keys ------------------------------------------------------------------------------


def public_key_text(key: bytes) -> str:
    """``key`` (33 bytes, compressed) as Antelope writes it: ``PUB_K1_`` base58."""
    return K1_PUBLIC + _with_check(key, b"K1")


def legacy_public_key_text(key: bytes) -> str:
    """``key`` in the legacy ``EOS`` form (its check over the key alone)."""
    return LEGACY_PUBLIC + _with_check(key, b"")


def public_key_bytes(text: str) -> bytes:
    """The 33 bytes of an Antelope ``PUB_K1_`` base58 or legacy ``EOS`` key text (not yet
    checked to be a point); InvalidKey naming what is wrong."""
    try:
        if text.startswith(K1_PUBLIC):
            return _checked(text[len(K1_PUBLIC) :], 33, b"K1", "public key")
        if text.startswith(LEGACY_PUBLIC):
            return _checked(text[len(LEGACY_PUBLIC) :], 33, b"", "public key")
    except ValueError as err:
        raise InvalidKey(
            f"public key is not hex (BoR's form) nor Antelope's base58: {err}"
        ) from None
    raise InvalidKey(f"public key must start with {K1_PUBLIC} or {LEGACY_PUBLIC}")


# --- private keys -----------------------------------------------------------------------------


def private_key_text(secret: bytes) -> str:
    """A 32-byte secret as Antelope writes it: ``PVT_K1_`` base58."""
    return K1_PRIVATE + _with_check(secret, b"K1")


def private_key_bytes(text: str) -> bytes:
    """The 32-byte secret of a ``PVT_K1_`` base58 text or a legacy WIF (``5...``: 0x80, the
    secret, 4 bytes of double SHA-256); InvalidKey naming what is wrong."""
    try:
        if text.startswith(K1_PRIVATE):
            return _checked(text[len(K1_PRIVATE) :], 32, b"K1", "private key")
        raw = from_base58(text)
    except ValueError as err:
        raise InvalidKey(
            f"private key is not hex (BoR's form) nor Antelope's base58: {err}"
        ) from None
    if len(raw) != 37 or raw[0] != 0x80:
        raise InvalidKey(f"private key must be {K1_PRIVATE}... or a WIF (5...)")
    if hashlib.sha256(hashlib.sha256(raw[:33]).digest()).digest()[:4] != raw[33:]:
        raise InvalidKey("private key (WIF) fails its checksum (a typo?)")
    return raw[1:33]


# --- signatures -------------------------------------------------------------------------------


def signature_text(signature: bytes) -> str:
    """BoR's 65-byte signature (r, s, recovery id) as Antelope's ``SIG_K1_`` text."""
    if len(signature) != 65 or signature[64] > 3:
        raise BadSignature("a signature is 65 bytes: r, s and a recovery id of 0 to 3")
    header = bytes([_COMPRESSED_HEADER + signature[64]])
    return K1_SIGNATURE + _with_check(header + signature[:64], b"K1")


def signature_bytes(text: str) -> bytes:
    """BoR's 65 bytes (r, s, recovery id) of an Antelope ``SIG_K1_`` text; BadSignature
    naming what is wrong."""
    if not text.startswith(K1_SIGNATURE):
        raise BadSignature(f"signature text must start with {K1_SIGNATURE}")
    try:
        raw = _checked(text[len(K1_SIGNATURE) :], 65, b"K1", "signature")
    except ValueError as err:
        raise BadSignature(str(err)) from None
    recovery = raw[0] - 27
    if recovery >= 4:
        recovery -= 4  # the header says the key is compressed: BoR's always are
    if not 0 <= recovery <= 3:
        raise BadSignature(f"signature header {raw[0]} is no K1 recovery id")
    return raw[1:] + bytes([recovery])


# --- RIPEMD-160 without OpenSSL -----------------------------------------------------------------

# The message-word order, rotations and constants of each line (Dobbertin, Bosselaers and
# Preneel, "RIPEMD-160: A Strengthened Version of RIPEMD", 1996).
_R_LEFT = "0123456789abcdef74d1a6f3c0952eb83ae49f812706db5c19ba08c4d37fe56240597c2ae138b6fd"
_R_RIGHT = "5e7092b4d6f81a3c6b370d5aef8c4912f5137e69b8c2a04d86413bf05c2d97aecfa4158762de039b"
_S_LEFT = (
    (11, 14, 15, 12, 5, 8, 7, 9, 11, 13, 14, 15, 6, 7, 9, 8),
    (7, 6, 8, 13, 11, 9, 7, 15, 7, 12, 15, 9, 11, 7, 13, 12),
    (11, 13, 6, 7, 14, 9, 13, 15, 14, 8, 13, 6, 5, 12, 7, 5),
    (11, 12, 14, 15, 14, 15, 9, 8, 9, 14, 5, 6, 8, 6, 5, 12),
    (9, 15, 5, 11, 6, 8, 13, 12, 5, 12, 13, 14, 11, 8, 5, 6),
)
_S_RIGHT = (
    (8, 9, 9, 11, 13, 15, 15, 5, 7, 7, 8, 11, 14, 14, 12, 6),
    (9, 13, 15, 7, 12, 8, 9, 11, 7, 7, 12, 7, 6, 15, 13, 11),
    (9, 7, 15, 11, 8, 6, 6, 14, 12, 13, 5, 14, 13, 13, 7, 5),
    (15, 5, 8, 11, 14, 14, 6, 14, 6, 9, 12, 9, 12, 5, 15, 8),
    (8, 5, 12, 9, 12, 5, 14, 6, 8, 13, 6, 5, 15, 13, 11, 11),
)
_K_LEFT = (0x00000000, 0x5A827999, 0x6ED9EBA1, 0x8F1BBCDC, 0xA953FD4E)
_K_RIGHT = (0x50A28BE6, 0x5C4DD124, 0x6D703EF3, 0x7A6D76E9, 0x00000000)
_MASK = 0xFFFFFFFF


def _f(j: int, x: int, y: int, z: int) -> int:
    if j == 0:
        return x ^ y ^ z
    if j == 1:
        return (x & y) | (~x & z)
    if j == 2:
        return (x | ~y & _MASK) ^ z
    if j == 3:
        return (x & z) | (y & ~z)
    return x ^ (y | ~z & _MASK)


def _rol(x: int, n: int) -> int:
    x &= _MASK
    return ((x << n) | (x >> (32 - n))) & _MASK


def _compress(h: list[int], words: list[int]) -> None:
    al, bl, cl, dl, el = h
    ar, br, cr, dr, er = h
    for i in range(80):
        j = i // 16
        t = _rol(
            al + _f(j, bl, cl, dl) + words[int(_R_LEFT[i], 16)] + _K_LEFT[j], _S_LEFT[j][i % 16]
        )
        al, el, dl, cl, bl = el, dl, _rol(cl, 10), bl, (t + el) & _MASK
        t = _rol(
            ar + _f(4 - j, br, cr, dr) + words[int(_R_RIGHT[i], 16)] + _K_RIGHT[j],
            _S_RIGHT[j][i % 16],
        )
        ar, er, dr, cr, br = er, dr, _rol(cr, 10), br, (t + er) & _MASK
    h[:] = [
        (h[1] + cl + dr) & _MASK,
        (h[2] + dl + er) & _MASK,
        (h[3] + el + ar) & _MASK,
        (h[4] + al + br) & _MASK,
        (h[0] + bl + cr) & _MASK,
    ]


def ripemd160_python(data: bytes) -> bytes:
    """RIPEMD-160 in Python: slow (tens of microseconds for a key), used only without
    OpenSSL's, and checked against the paper's test vectors."""
    h = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0]
    padded = (
        data + b"\x80" + b"\0" * ((55 - len(data)) % 64) + (8 * len(data)).to_bytes(8, "little")
    )
    for start in range(0, len(padded), 64):
        block = padded[start : start + 64]
        _compress(h, [int.from_bytes(block[i : i + 4], "little") for i in range(0, 64, 4)])
    return b"".join(x.to_bytes(4, "little") for x in h)
