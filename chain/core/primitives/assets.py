"""Antelope's symbols and assets as JSON writes them: ``"4,TOK"`` and ``"1.0000 TOK"``.

A symbol is one u64: the precision in its low byte, then up to seven upper-case letters; an
asset is an i64 amount of the smallest unit and a symbol. ``chain.abi`` encodes and decodes
contract data with these; every error is an ``EncodingError`` naming the field at ``path``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from chain.core.primitives.errors import EncodingError

_SYMBOL_CODE_RE = re.compile(r"[A-Z]{1,7}")
_ASSET_RE = re.compile(r"(-?)([0-9]{1,19})(?:\.([0-9]{1,18}))? ([A-Z]{1,7})")
_SYMBOL_RE = re.compile(r"([0-9]{1,2}),([A-Z]{1,7})")
MAX_PRECISION = 18  # Antelope's: 10**18 still fits an i64 amount
MAX_ASSET_AMOUNT = 2**62 - 1  # Antelope's asset::max_amount


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def symbol_code_value(code: str) -> int | None:
    """A symbol code ("TOK") as Antelope's ``symbol_code`` number, the scope and key its token
    tables use; None if ``code`` is not 1-7 letters A-Z."""
    if _SYMBOL_CODE_RE.fullmatch(code) is None:
        return None
    return _symbol_value(0, code) >> 8


def _symbol_value(precision: int, code: str) -> int:
    value = precision
    for i, ch in enumerate(code):
        value |= ord(ch) << (8 * (i + 1))
    return value


def parse_symbol(value: Any, path: str) -> int:
    match = _SYMBOL_RE.fullmatch(value) if isinstance(value, str) else None
    if match is None or int(match[1]) > MAX_PRECISION:
        raise EncodingError(path, f"expected a symbol like '4,TOK', got {_show(value)}")
    return _symbol_value(int(match[1]), match[2])


def split_symbol(value: int, path: str) -> tuple[int, str]:
    precision = value & 0xFF
    code_bytes = (value >> 8).to_bytes(7, "little").rstrip(b"\x00")
    code = code_bytes.decode("latin-1")
    if precision > MAX_PRECISION or _SYMBOL_CODE_RE.fullmatch(code) is None:
        raise EncodingError(path, f"symbol {value:#x} is no precision and 1-7 letters A-Z")
    return precision, code


def format_symbol(value: int, path: str) -> str:
    precision, code = split_symbol(value, path)
    return f"{precision},{code}"


def parse_asset(value: Any, path: str) -> tuple[int, int]:
    match = _ASSET_RE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise EncodingError(path, f"expected an asset like '1.0000 TOK', got {_show(value)}")
    sign, whole, frac, code = match[1], match[2], match[3] or "", match[4]
    amount = int(whole + frac) * (-1 if sign else 1)
    if abs(amount) > MAX_ASSET_AMOUNT:
        raise EncodingError(path, f"asset amount {value!r} is past 2^62 - 1")
    return amount, _symbol_value(len(frac), code)


def format_asset(amount: int, symbol: int, path: str) -> str:
    precision, code = split_symbol(symbol, path)
    if abs(amount) > MAX_ASSET_AMOUNT:
        raise EncodingError(path, f"asset amount {amount} is past 2^62 - 1")
    digits = str(abs(amount)).rjust(precision + 1, "0")
    number = f"{digits[:-precision]}.{digits[-precision:]}" if precision else digits
    return f"{'-' if amount < 0 else ''}{number} {code}"
