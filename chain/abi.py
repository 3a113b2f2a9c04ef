"""A contract's ABI: the JSON that says how its actions, table rows and events are encoded.

The binary encoding is Antelope's, so a contract built with an Antelope-style SDK reads its
arguments the way it would there: little-endian integers, a name as its u64, strings and
bytes as a varuint32 length and the bytes, a symbol as one u64 (precision byte, then up to
seven upper-case letters), an asset as an i64 amount and a symbol. This module is the only
place where contract data turns into JSON and back, for the RPC, the stream and the wallet.
Every error is an ``EncodingError`` whose ``what`` is the path of the field at fault
(``transfer.quantity``, ``transfer.to[2]``), so a client can tell its user what to fix.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Set
from dataclasses import dataclass, field
from typing import Any

from chain import abi_types
from chain.abi_actions import parse_notify, split_read_only
from chain.core.execution.contracts import name_to_u64, u64_to_name
from chain.core.primitives.assets import (
    MAX_ASSET_AMOUNT,
    MAX_PRECISION,
    format_asset,
    format_symbol,
    parse_asset,
    parse_symbol,
    symbol_code_value,
)
from chain.core.primitives.errors import EncodingError

__all__ = ["MAX_ASSET_AMOUNT", "MAX_PRECISION", "Abi", "parse_abi", "symbol_code_value"]

VERSION = "bor::abi/1"
MAX_ABI_BYTES = 64 * 1024  # the most a setcode carries; parse_abi refuses more

_INTS: dict[str, tuple[str, int, int]] = {  # type -> (struct format, min, max)
    "u8": ("<B", 0, 2**8 - 1),
    "u16": ("<H", 0, 2**16 - 1),
    "u32": ("<I", 0, 2**32 - 1),
    "u64": ("<Q", 0, 2**64 - 1),
    "i8": ("<b", -(2**7), 2**7 - 1),
    "i16": ("<h", -(2**15), 2**15 - 1),
    "i32": ("<i", -(2**31), 2**31 - 1),
    "i64": ("<q", -(2**63), 2**63 - 1),
}
BUILTIN_TYPES = (
    frozenset(_INTS)
    | {
        "bool",
        "name",
        "string",
        "bytes",
        "checksum256",
        "symbol",
        "asset",
    }
    | abi_types.TYPES
)
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_MAX_TYPE_CHARS = 80  # "u8[][]..." nests no deeper than this
_MAX_WIDTH = 4096  # values one element decodes to: bounds decoding work per byte of data
_TOP_KEYS = {"version", "structs", "actions", "tables", "events", "action_results", "notify"}
# Types inside types (structs, lists, optionals) one value may nest: the parser, the encoder
# and the decoder recurse once per level, so a deep ABI must fail here, alike on every node,
# rather than on Python's stack (Antelope's abi_serializer stops at 32 as well).
MAX_TYPE_DEPTH = 32


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a struct."""

    name: str
    type: str


@dataclass(frozen=True, slots=True)
class Secondary:
    """A secondary index of a table: the index table the contract writes (its db_idx* calls'
    table), its key type (``abi_types.INDEX_TYPES``) and the row field it indexes ("" when
    an old ABI does not say, so the node cannot build it from the rows)."""

    name: str
    table: str
    type: str
    field: str = ""


@dataclass(frozen=True, slots=True)
class Table:
    """A contract table: its rows are ``type``, keyed by a u64 primary key."""

    name: str
    type: str
    index_type: str
    secondary: tuple[Secondary, ...]


@dataclass(frozen=True, slots=True)
class Abi:
    """A parsed, validated ABI. ``text`` is what the contract's setcode carried."""

    text: str
    structs: dict[str, tuple[Field, ...]]
    actions: dict[str, str]  # action name -> type
    tables: dict[str, Table]
    events: dict[str, str]  # event name -> type
    results: dict[str, str]  # action name -> type of its return value (Antelope's action_results)
    read_only: set[str] = field(default_factory=set)  # actions run by call, never pushed
    notify: list[tuple[str, str]] = field(default_factory=list)  # (contract or *, action)

    # --- the operations the node and the wallet use -----------------------------------------

    def encode_action(self, action: str, value: Any) -> bytes:
        """The binary arguments of ``action`` from their JSON form."""
        return self.encode(_lookup(self.actions, action, "action"), value, action)

    def decode_action(self, action: str, data: bytes) -> Any:
        return self.decode(_lookup(self.actions, action, "action"), data, action)

    def decode_table_row(self, table: str, data: bytes) -> Any:
        return self.decode(_lookup_table(self.tables, table).type, data, table)

    def decode_event(self, event: str, data: bytes) -> Any:
        return self.decode(_lookup(self.events, event, "event"), data, event)

    def decode_result(self, action: str, data: bytes) -> Any:
        """An action's return value (``set_action_return_value``) as its ABI types it."""
        type_ = self.results.get(action)
        if type_ is None:
            raise EncodingError("result", f"the ABI gives no result type for {action!r}")
        return self.decode(type_, data, f"{action}.result")

    # --- any type ----------------------------------------------------------------------------

    def encode(self, type_: str, value: Any, path: str) -> bytes:
        out = bytearray()
        self._encode(type_, value, path, out)
        return bytes(out)

    def decode(self, type_: str, data: bytes, path: str) -> Any:
        reader = _Reader(data)
        value = self._decode(type_, reader, path)
        if reader.pos != len(data):
            raise EncodingError(path, f"{len(data) - reader.pos} bytes left over after the value")
        return value

    def _encode(self, type_: str, value: Any, path: str, out: bytearray) -> None:
        if type_.endswith("[]"):
            if not isinstance(value, list):
                raise EncodingError(path, f"expected a list of {type_[:-2]}")
            _put_varuint32(len(value), out)
            for i, item in enumerate(value):
                self._encode(type_[:-2], item, f"{path}[{i}]", out)
        elif type_.endswith("?"):
            if value is None:
                out.append(0)
            else:
                out.append(1)
                self._encode(type_[:-1], value, path, out)
        elif type_ in self.structs:
            self._encode_struct(type_, value, path, out)
        else:
            out += _encode_builtin(type_, value, path)

    def _encode_struct(self, type_: str, value: Any, path: str, out: bytearray) -> None:
        if not isinstance(value, dict):
            raise EncodingError(path, f"expected an object ({type_})")
        fields = self.structs[type_]
        known = {f.name for f in fields}
        for key in value:
            if key not in known:
                raise EncodingError(path, f"unknown field {key!r} (not in {type_})")
        for f in fields:
            if f.name not in value and not f.type.endswith("?"):
                raise EncodingError(f"{path}.{f.name}", f"missing ({f.type})")
            self._encode(f.type, value.get(f.name), f"{path}.{f.name}", out)

    def _decode(self, type_: str, reader: _Reader, path: str) -> Any:
        if type_.endswith("[]"):
            count = reader.varuint32(path)
            if count > reader.left():  # an element takes a byte at least (parse_abi sees to it)
                raise EncodingError(path, f"{count} elements in {reader.left()} bytes")
            return [self._decode(type_[:-2], reader, f"{path}[{i}]") for i in range(count)]
        if type_.endswith("?"):
            flag = reader.take(1, path)[0]
            if flag > 1:
                raise EncodingError(path, f"optional flag {flag}, not 0 or 1")
            return self._decode(type_[:-1], reader, path) if flag else None
        if type_ in self.structs:
            return {
                f.name: self._decode(f.type, reader, f"{path}.{f.name}")
                for f in self.structs[type_]
            }
        return _decode_builtin(type_, reader, path)


def _fixed_size(type_: str) -> int:
    if type_ in _INTS:
        return struct.calcsize(_INTS[type_][0])
    if type_ in abi_types.TYPES:
        return abi_types.SIZES[type_]
    return {"name": 8, "checksum256": 32, "symbol": 8, "asset": 16}[type_]


def _lookup(table: dict[str, str], name: str, kind: str) -> str:
    type_ = table.get(name)
    if type_ is None:
        raise EncodingError(kind, f"{name!r} is not an {kind} of this contract's ABI")
    return type_


def _lookup_table(tables: dict[str, Table], name: str) -> Table:
    table = tables.get(name)
    if table is None:
        raise EncodingError("table", f"{name!r} is not a table of this contract's ABI")
    return table


# --- built-in types -----------------------------------------------------------------------------


def _as_int(value: Any, type_: str, path: str) -> int:
    """An integer from JSON: a number, or a decimal string (64-bit values lose precision as
    JavaScript numbers, so clients may send them as strings)."""
    if isinstance(value, bool):
        raise EncodingError(path, f"expected a {type_} number, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,20}", value):
        return int(value)
    raise EncodingError(path, f"expected a {type_} number, got {_show(value)}")


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _encode_builtin(type_: str, value: Any, path: str) -> bytes:
    if type_ in _INTS:
        fmt, lo, hi = _INTS[type_]
        number = _as_int(value, type_, path)
        if not lo <= number <= hi:
            raise EncodingError(path, f"{number} is out of range for {type_} [{lo}, {hi}]")
        return struct.pack(fmt, number)
    if type_ == "bool":
        if not isinstance(value, bool):
            raise EncodingError(path, f"expected true or false, got {_show(value)}")
        return b"\x01" if value else b"\x00"
    if type_ == "name":
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64:
            return struct.pack("<Q", value)  # what decoding gives for a u64 that is no name
        if not isinstance(value, str):
            raise EncodingError(path, f"expected a name, got {_show(value)}")
        if value == "":
            return bytes(8)
        try:
            return struct.pack("<Q", name_to_u64(value))
        except EncodingError:
            raise EncodingError(path, f"{value!r} is not a valid name") from None
    if type_ == "string":
        if not isinstance(value, str):
            raise EncodingError(path, f"expected a string, got {_show(value)}")
        return _with_length(value.encode("utf-8"))
    if type_ == "bytes":
        return _with_length(_hex(value, path, None))
    if type_ == "checksum256":
        return _hex(value, path, 32)
    if type_ == "symbol":
        return struct.pack("<Q", parse_symbol(value, path))
    if type_ == "asset":
        amount, symbol = parse_asset(value, path)
        return struct.pack("<qQ", amount, symbol)
    if type_ in abi_types.TYPES:
        return abi_types.encode(type_, value, path)
    raise AssertionError(f"unknown built-in type {type_}")  # parse_abi refuses it


def _decode_builtin(type_: str, reader: _Reader, path: str) -> Any:
    if type_ in _INTS:
        fmt = _INTS[type_][0]
        return struct.unpack(fmt, reader.take(struct.calcsize(fmt), path))[0]
    if type_ == "bool":
        byte = reader.take(1, path)[0]
        if byte > 1:
            raise EncodingError(path, f"bool byte {byte}, not 0 or 1")
        return byte == 1
    if type_ == "name":
        value = struct.unpack("<Q", reader.take(8, path))[0]
        if value == 0:
            return ""
        text = u64_to_name(value)
        return text if text is not None else value  # a u64 that is no name stays a number
    if type_ == "string":
        raw = reader.take(reader.varuint32(path), path)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise EncodingError(path, "string is not valid UTF-8") from None
    if type_ == "bytes":
        return reader.take(reader.varuint32(path), path).hex()
    if type_ == "checksum256":
        return reader.take(32, path).hex()
    if type_ == "symbol":
        return format_symbol(struct.unpack("<Q", reader.take(8, path))[0], path)
    if type_ == "asset":
        amount, symbol = struct.unpack("<qQ", reader.take(16, path))
        return format_asset(amount, symbol, path)
    if type_ in abi_types.TYPES:
        return abi_types.decode(type_, reader.take(abi_types.SIZES[type_], path))
    raise AssertionError(f"unknown built-in type {type_}")


def _hex(value: Any, path: str, size: int | None) -> bytes:
    try:
        if not isinstance(value, str):
            raise ValueError
        raw = bytes.fromhex(value)
    except ValueError:
        raise EncodingError(path, f"expected hex bytes, got {_show(value)}") from None
    if size is not None and len(raw) != size:
        raise EncodingError(path, f"expected {size} bytes ({2 * size} hex digits), got {len(raw)}")
    return raw


def _with_length(raw: bytes) -> bytes:
    out = bytearray()
    _put_varuint32(len(raw), out)
    return bytes(out) + raw


def _put_varuint32(n: int, out: bytearray) -> None:
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


class _Reader:
    """Reads a value's bytes front to back; every short read is an error naming the field."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def left(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int, path: str) -> bytes:
        if n > self.left():
            raise EncodingError(path, f"needs {n} bytes, {self.left()} left")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def varuint32(self, path: str) -> int:
        value = 0
        for i in range(5):
            byte = self.take(1, path)[0]
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                if byte == 0 and i > 0:
                    raise EncodingError(path, "length is not minimally encoded")
                if value >= 1 << 32:
                    raise EncodingError(path, "length past 2^32 - 1")
                return value
        raise EncodingError(path, "length is more than 5 bytes")


# --- parsing the ABI's JSON ---------------------------------------------------------------------


def parse_abi(text: str) -> Abi:
    """Parse and validate an ABI: every type known, no struct that contains itself, action,
    table and event names valid names, no duplicates. Raises ``EncodingError("abi...")``."""
    if len(text.encode("utf-8")) > MAX_ABI_BYTES:
        raise EncodingError("abi", f"more than {MAX_ABI_BYTES} bytes")
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise EncodingError("abi", f"not JSON: {err}") from None
    obj = _object(raw, "abi")
    _only(obj, "abi", _TOP_KEYS)
    if obj.get("version") != VERSION:
        raise EncodingError("abi.version", f"expected {VERSION!r}, got {_show(obj.get('version'))}")
    structs: dict[str, tuple[Field, ...]] = {}
    for i, item in enumerate(_list(obj, "structs")):
        where = f"abi.structs[{i}]"
        s = _object(item, where)
        _only(s, where, {"name", "fields"})
        name = _ident(s.get("name"), f"{where}.name")
        if name in structs or name in BUILTIN_TYPES:
            raise EncodingError(f"{where}.name", f"{name!r} is defined twice or is a built-in type")
        fields = []
        for j, f_item in enumerate(_list(s, "fields", where)):
            f_where = f"{where}.fields[{j}]"
            f = _object(f_item, f_where)
            _only(f, f_where, {"name", "type"})
            fields.append(
                Field(_ident(f.get("name"), f"{f_where}.name"), _text(f, "type", f_where))
            )
        if len({f.name for f in fields}) != len(fields):
            raise EncodingError(where, f"struct {name!r} has two fields of the same name")
        structs[name] = tuple(fields)
    abi = Abi(text, structs, {}, {}, {}, {})
    types = _TypeCheck(structs)
    for name in structs:
        types.check(name, f"struct {name}")
    for i, item in enumerate(_list(obj, "actions")):
        entry, read_only = split_read_only(item, f"abi.actions[{i}]")
        name, type_ = _named_type(types, entry, f"abi.actions[{i}]", abi.actions)
        abi.actions[name] = type_
        if read_only:
            abi.read_only.add(name)
    abi.notify.extend(parse_notify(obj.get("notify", [])))
    for i, item in enumerate(_list(obj, "events")):
        name, type_ = _named_type(types, item, f"abi.events[{i}]", abi.events)
        abi.events[name] = type_
    for i, item in enumerate(_list(obj, "action_results")):
        where = f"abi.action_results[{i}]"
        result = _object(item, where)
        _only(result, where, {"name", "result_type"})
        name = _name(result.get("name"), f"{where}.name")
        if name not in abi.actions or name in abi.results:
            raise EncodingError(f"{where}.name", f"{name!r} is no action, or given twice")
        type_ = _text(result, "result_type", where)
        types.check(type_, where)
        abi.results[name] = type_
    for i, item in enumerate(_list(obj, "tables")):
        table = _table(types, abi.tables, item, f"abi.tables[{i}]")
        abi.tables[table.name] = table
    return abi


class _TypeCheck:
    """Walks every type of an ABI once (memoized, so no ABI makes it exponential): each
    type known, no struct inside itself, no list of values of no bytes, and a bounded number
    of values to decode per element, so decoding work stays proportional to the data."""

    def __init__(self, structs: dict[str, tuple[Field, ...]]) -> None:
        self.structs = structs
        self.sizes: dict[str, tuple[int, int, int]] = {}  # struct -> (min bytes, values, levels)
        self.open: set[str] = set()

    def check(self, type_: str, where: str) -> tuple[int, int]:
        """``(fewest bytes a value takes, values decoded for one)``."""
        size, width, _ = self._check(type_, where, 0)
        return size, width

    def _check(self, type_: str, where: str, depth: int) -> tuple[int, int, int]:
        """``check``'s answer and the levels of types below ``type_`` (0 for a built-in);
        ``depth``: the levels above it, which with those below stay within MAX_TYPE_DEPTH."""
        if depth > MAX_TYPE_DEPTH:
            raise EncodingError("abi", f"{where}: types nest more than {MAX_TYPE_DEPTH} deep")
        if len(type_) > _MAX_TYPE_CHARS:
            raise EncodingError("abi", f"{where}: type name longer than {_MAX_TYPE_CHARS}")
        if type_.endswith("[]"):
            size, width, height = self._check(type_[:-2], where, depth + 1)
            if size == 0:
                raise EncodingError("abi", f"{where}: {type_} is a list of values of no bytes")
            return 1, width + 1, height + 1
        if type_.endswith("?"):
            _, width, height = self._check(type_[:-1], where, depth + 1)
            return 1, width + 1, height + 1
        if type_ in BUILTIN_TYPES:
            return (1 if type_ in ("bool", "string", "bytes") else _fixed_size(type_)), 1, 0
        if type_ not in self.structs:
            raise EncodingError("abi", f"{where}: unknown type {type_!r}")
        if type_ in self.open:
            raise EncodingError("abi", f"{where}: struct {type_!r} contains itself")
        if type_ not in self.sizes:
            self.open.add(type_)
            size, width, height = 0, 1, 0
            for f in self.structs[type_]:
                f_size, f_width, f_height = self._check(
                    f.type, f"struct {type_}.{f.name}", depth + 1
                )
                size, width, height = size + f_size, width + f_width, max(height, f_height + 1)
            self.open.discard(type_)
            if width > _MAX_WIDTH:
                raise EncodingError("abi", f"{where}: {type_} holds more than {_MAX_WIDTH} values")
            self.sizes[type_] = (size, width, height)
        size, width, height = self.sizes[type_]
        if depth + height > MAX_TYPE_DEPTH:  # known from another path, reached deeper here
            raise EncodingError("abi", f"{where}: types nest more than {MAX_TYPE_DEPTH} deep")
        return size, width, height


def _named_type(
    types: _TypeCheck, item: Any, where: str, known: dict[str, str], extra: Set[str] = frozenset()
) -> tuple[str, str]:
    obj = _object(item, where)
    _only(obj, where, {"name", "type", *extra})
    name = _name(obj.get("name"), f"{where}.name")
    if name in known:
        raise EncodingError(f"{where}.name", f"{name!r} is defined twice")
    type_ = _text(obj, "type", where)
    types.check(type_, where)
    return name, type_


def _table(types: _TypeCheck, tables: dict[str, Table], item: Any, where: str) -> Table:
    obj = _object(item, where)
    _only(obj, where, {"name", "type", "index_type", "secondary"})
    name = _name(obj.get("name"), f"{where}.name")
    if name in tables:
        raise EncodingError(f"{where}.name", f"{name!r} is defined twice")
    type_ = _text(obj, "type", where)
    types.check(type_, where)
    index_type = obj.get("index_type", "i64")
    if index_type != "i64":
        raise EncodingError(
            f"{where}.index_type", f"only 'i64' is supported, got {_show(index_type)}"
        )
    items = _list(obj, "secondary", where)
    if len(items) > abi_types.MAX_INDEXES:
        raise EncodingError(f"{where}.secondary", f"more than {abi_types.MAX_INDEXES} indexes")
    fields = {f.name: f.type for f in types.structs.get(type_, ())}
    secondary = [_secondary(s, f"{where}.secondary[{j}]", fields) for j, s in enumerate(items)]
    if len({s.table for s in secondary}) != len(secondary):
        raise EncodingError(f"{where}.secondary", "two indexes share an index table")
    return Table(name, type_, "i64", tuple(secondary))


def _secondary(item: Any, where: str, fields: dict[str, str]) -> Secondary:
    s = _object(item, where)
    _only(s, where, {"name", "table", "type", "field"})
    key = s.get("type", "u64")
    if key not in abi_types.INDEX_TYPES:
        raise EncodingError(f"{where}.type", f"not an index key type: {_show(key)}")
    field = s.get("field", "")
    if field != "" and abi_types.INDEX_TYPES[key] & {fields.get(_ident(field, where))} == set():
        raise EncodingError(f"{where}.field", f"no field {field!r} of a {key} key's type")
    name, table = _ident(s.get("name"), f"{where}.name"), _name(s.get("table"), f"{where}.table")
    return Secondary(name, table, key, field)


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise EncodingError(where, f"expected an object, got {_show(value)}")
    return value


def _only(obj: dict[str, Any], where: str, keys: set[str]) -> None:
    for key in obj:
        if key not in keys:
            raise EncodingError(where, f"unknown key {key!r}")


def _list(obj: dict[str, Any], key: str, where: str = "abi") -> list[Any]:
    value = obj.get(key, [])
    if not isinstance(value, list):
        raise EncodingError(f"{where}.{key}", f"expected a list, got {_show(value)}")
    return value


def _text(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise EncodingError(f"{where}.{key}", f"expected a type name, got {_show(value)}")
    return value


def _ident(value: Any, where: str) -> str:
    if not isinstance(value, str) or _IDENT_RE.fullmatch(value) is None:
        raise EncodingError(where, f"expected an identifier, got {_show(value)}")
    return value


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise EncodingError(where, f"expected a name, got {_show(value)}")
    try:
        name_to_u64(value)
    except EncodingError:
        raise EncodingError(where, f"{value!r} is not a valid name") from None
    return value
