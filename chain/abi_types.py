"""The ABI's built-in types beyond integers, names, bytes, symbols and assets
(``chain.core.primitives.assets``): 128-bit integers, doubles and Antelope's three time
types, with Antelope's binary layout and JSON forms.

``u128``/``i128`` are 16 bytes little-endian, in JSON a decimal string (a JavaScript number
cannot hold them; a JSON integer is accepted too). ``f64`` (alias ``float64``) is an IEEE
double, in JSON a number, or ``"inf"``, ``"-inf"``, ``"nan"`` for what JSON cannot write.
``time_point`` is an i64 of microseconds since 1970, ``time_point_sec`` a u32 of seconds,
``block_timestamp_type`` a u32 count of half-second slots since 2000-01-01; in JSON each is
Antelope's UTC text without a zone (``2024-05-01T12:00:00.500``, the seconds' type without
a fraction). Every conversion is integer arithmetic on the text's fields, so every node and
client gets the same bytes.
"""

from __future__ import annotations

import calendar
import json
import math
import re
import struct
import time
from collections.abc import Callable
from typing import Any

from chain.core.primitives.errors import EncodingError

SIZES: dict[str, int] = {
    "u128": 16,
    "i128": 16,
    "f64": 8,
    "float64": 8,
    "time_point": 8,
    "time_point_sec": 4,
    "block_timestamp_type": 4,
}
TYPES = frozenset(SIZES)

# A secondary index's key type -> the types of a row field it may index (Antelope's
# idx64, idx128, idx256, idx_double; a u64 key may index any unsigned integer or a name).
INDEX_TYPES: dict[str, frozenset[str]] = {
    "u64": frozenset({"u64", "name", "u32", "u16", "u8"}),
    "u128": frozenset({"u128"}),
    "checksum256": frozenset({"checksum256"}),
    "double": frozenset({"f64", "float64"}),
}
MAX_INDEXES = 16  # secondary indexes per table, as Antelope allows

BLOCK_TIMESTAMP_EPOCH_MS = 946_684_800_000  # 2000-01-01T00:00:00 UTC, Antelope's slot epoch
BLOCK_INTERVAL_MS = 500

_TIME_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?Z?")
_INT_RE = re.compile(r"-?[0-9]{1,40}")
_RANGES = {"u128": (0, 2**128 - 1), "i128": (-(2**127), 2**127 - 1)}


def _show(value: Any) -> str:
    text = (
        json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else repr(value)
    )
    return text if len(text) <= 40 else text[:37] + "..."


# --- 128-bit integers, doubles and times ---------------------------------------------------


def _int128(type_: str, value: Any, path: str) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise EncodingError(path, f"expected a {type_} as a decimal string, got {_show(value)}")
    if isinstance(value, str) and not _INT_RE.fullmatch(value):
        raise EncodingError(path, f"expected a {type_} as a decimal string, got {_show(value)}")
    number = int(value)
    lo, hi = _RANGES[type_]
    if not lo <= number <= hi:
        raise EncodingError(path, f"{number} is out of range for {type_}")
    return number.to_bytes(16, "little", signed=type_ == "i128")


def _f64(value: Any, path: str) -> bytes:
    specials = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
    if isinstance(value, str) and value in specials:
        return struct.pack("<d", specials[value])
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EncodingError(path, f"expected a number (f64), got {_show(value)}")
    try:
        return struct.pack("<d", float(value))
    except OverflowError:
        raise EncodingError(path, f"{value} does not fit a double") from None


def _f64_json(data: bytes) -> Any:
    value: float = struct.unpack("<d", data)[0]
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def parse_time_us(value: Any, path: str) -> int:
    """Microseconds since 1970 of Antelope's UTC text (``YYYY-MM-DDTHH:MM:SS[.ffffff]``)."""
    match = _TIME_RE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise EncodingError(
            path, f"expected a time as YYYY-MM-DDTHH:MM:SS[.fff], got {_show(value)}"
        )
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 60):
        raise EncodingError(path, f"{value!r} is not a valid time")
    if day > calendar.monthrange(year, month)[1]:
        raise EncodingError(path, f"{value!r} is not a valid date")
    fraction = (match.group(7) or "").ljust(6, "0")
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    return seconds * 1_000_000 + int(fraction)


def format_time_us(us: int, digits: int = 3) -> str:
    """Antelope's UTC text of ``us`` microseconds since 1970, with ``digits`` of fraction
    (3, as nodeos prints a time_point; 6 when the microseconds are not whole milliseconds)."""
    seconds, fraction = divmod(us, 1_000_000)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    if digits == 0:
        return text
    if fraction % 1000:
        digits = 6
    return f"{text}.{fraction:06d}"[: len(text) + 1 + digits]


def _checked_int(value: int, lo: int, hi: int, type_: str, path: str) -> int:
    if not lo <= value <= hi:
        raise EncodingError(path, f"{value} is out of range for {type_}")
    return value


def _time_point(value: Any, path: str) -> bytes:
    us = parse_time_us(value, path)
    return struct.pack("<q", _checked_int(us, -(2**63), 2**63 - 1, "time_point", path))


def _time_point_sec(value: Any, path: str) -> bytes:
    us = parse_time_us(value, path)
    if us % 1_000_000:
        raise EncodingError(path, f"{value!r}: a time_point_sec has no fraction of a second")
    return struct.pack("<I", _checked_int(us // 1_000_000, 0, 2**32 - 1, "time_point_sec", path))


def _block_timestamp(value: Any, path: str) -> bytes:
    ms, rest = divmod(parse_time_us(value, path), 1000)
    slot, off = divmod(ms - BLOCK_TIMESTAMP_EPOCH_MS, BLOCK_INTERVAL_MS)
    if rest or off:
        raise EncodingError(path, f"{value!r} is not on a half-second block slot")
    return struct.pack("<I", _checked_int(slot, 0, 2**32 - 1, "block_timestamp_type", path))


_ENCODERS: dict[str, Callable[[Any, str], bytes]] = {
    "u128": lambda v, p: _int128("u128", v, p),
    "i128": lambda v, p: _int128("i128", v, p),
    "f64": _f64,
    "float64": _f64,
    "time_point": _time_point,
    "time_point_sec": _time_point_sec,
    "block_timestamp_type": _block_timestamp,
}
_DECODERS: dict[str, Callable[[bytes], Any]] = {
    "u128": lambda d: str(int.from_bytes(d, "little")),
    "i128": lambda d: str(int.from_bytes(d, "little", signed=True)),
    "f64": _f64_json,
    "float64": _f64_json,
    "time_point": lambda d: format_time_us(struct.unpack("<q", d)[0]),
    "time_point_sec": lambda d: format_time_us(struct.unpack("<I", d)[0] * 1_000_000, 0),
    "block_timestamp_type": lambda d: format_time_us(
        (BLOCK_TIMESTAMP_EPOCH_MS + struct.unpack("<I", d)[0] * BLOCK_INTERVAL_MS) * 1000
    ),
}


def encode(type_: str, value: Any, path: str) -> bytes:
    """The bytes of ``value`` (its JSON form) as ``type_``, one of ``TYPES``."""
    return _ENCODERS[type_](value, path)


def decode(type_: str, data: bytes) -> Any:
    """The JSON form of ``data``, exactly ``SIZES[type_]`` bytes of ``type_``."""
    return _DECODERS[type_](data)
