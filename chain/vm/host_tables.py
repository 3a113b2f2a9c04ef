"""The database host functions: Antelope's ``db_*_i64`` over primary rows and, for each of
its secondary key types, ``db_idx64_*``, ``db_idx128_*``, ``db_idx256_*`` and
``db_idx_double_*``, with Antelope's names, signatures and iterator semantics.

A secondary key crosses the wasm boundary as Antelope passes it (a pointer to a u64, a u128,
two u128 words of a checksum256 with their count, a double) and is kept by ``Tables`` as the
bytes that order it (``Codec``). Doubles: NaN is refused and -0.0 is stored as 0.0, so the
order is the numbers' order and the same on every node.
"""

from __future__ import annotations

import math
import struct

from chain.vm.host import Action
from chain.vm.hostapi import Category, HostApi
from chain.vm.tables import IDX64, IDX128, IDX256, IDX_DOUBLE, IndexKind

_U32 = 0xFFFFFFFF
_U64 = (1 << 64) - 1
_SIGN = 1 << 63
IDX256_WORDS = 2  # a checksum256 key is passed as two u128 words (Antelope's data_len)

API = HostApi()


# --- primary rows ---------------------------------------------------------------------------


@API.function(
    Category.DB_PRIMARY,
    "scope: u64, table: u64, payer: u64, id: u64, ptr: usize, len: i32 -> i32",
)
def db_store_i64(
    act: Action, scope: int, table: int, payer: int, id_: int, ptr: int, length: int
) -> int:
    length &= _U32
    act.charge(length)
    data = act.read(ptr, length)
    return act.tables.store(scope & _U64, table & _U64, payer & _U64, id_ & _U64, data)


@API.function(Category.DB_PRIMARY, "code: u64, scope: u64, table: u64, id: u64 -> i32")
def db_find_i64(act: Action, code: int, scope: int, table: int, id_: int) -> int:
    act.charge()
    return act.tables.find(code & _U64, scope & _U64, table & _U64, id_ & _U64)


@API.function(Category.DB_PRIMARY, "itr: i32, ptr: usize, len: i32 -> i32")
def db_get_i64(act: Action, itr: int, ptr: int, length: int) -> int:
    act.charge()
    data = act.tables.get(itr)
    n = min(length & _U32, len(data))
    if n:
        act.charge(n)
        act.write(ptr, data[:n])
    return len(data)


@API.function(Category.DB_PRIMARY, "itr: i32, payer: u64, ptr: usize, len: i32 -> void")
def db_update_i64(act: Action, itr: int, payer: int, ptr: int, length: int) -> None:
    length &= _U32
    act.charge(length)
    act.tables.update(itr, payer & _U64, act.read(ptr, length))


@API.function(Category.DB_PRIMARY, "itr: i32 -> void")
def db_remove_i64(act: Action, itr: int) -> None:
    act.charge()
    act.tables.remove(itr)


@API.function(Category.DB_PRIMARY, "itr: i32, primary: usize -> i32")
def db_next_i64(act: Action, itr: int, primary_out: int) -> int:
    act.charge(8)
    found, primary = act.tables.next(itr)
    if found >= 0:
        act.write_u64(primary_out, primary)
    return found


@API.function(Category.DB_PRIMARY, "itr: i32, primary: usize -> i32")
def db_previous_i64(act: Action, itr: int, primary_out: int) -> int:
    act.charge(8)
    found, primary = act.tables.previous(itr)
    if found >= 0:
        act.write_u64(primary_out, primary)
    return found


@API.function(Category.DB_PRIMARY, "code: u64, scope: u64, table: u64, id: u64 -> i32")
def db_lowerbound_i64(act: Action, code: int, scope: int, table: int, id_: int) -> int:
    act.charge()
    return act.tables.lowerbound(code & _U64, scope & _U64, table & _U64, id_ & _U64)


@API.function(Category.DB_PRIMARY, "code: u64, scope: u64, table: u64, id: u64 -> i32")
def db_upperbound_i64(act: Action, code: int, scope: int, table: int, id_: int) -> int:
    act.charge()
    return act.tables.upperbound(code & _U64, scope & _U64, table & _U64, id_ & _U64)


@API.function(Category.DB_PRIMARY, "code: u64, scope: u64, table: u64 -> i32")
def db_end_i64(act: Action, code: int, scope: int, table: int) -> int:
    act.charge()
    return act.tables.end(code & _U64, scope & _U64, table & _U64)


# --- secondary keys as wasm passes them and as the state orders them ---------------------------


def double_key(value: float) -> bytes:
    """The 8 bytes that order doubles as numbers (NaN is refused before; -0.0 is 0.0)."""
    bits: int = struct.unpack(">Q", struct.pack(">d", value + 0.0))[0]
    return (bits ^ _U64 if bits & _SIGN else bits | _SIGN).to_bytes(8, "big")


def double_value(key: bytes) -> float:
    bits = int.from_bytes(key, "big")
    bits = bits ^ _SIGN if bits & _SIGN else bits ^ _U64
    value: float = struct.unpack(">d", bits.to_bytes(8, "big"))[0]
    return value


class Codec:
    """How one key type is read from and written to the contract's memory."""

    def __init__(self, kind: IndexKind, wide: bool) -> None:
        self.kind = kind
        self.wide = wide  # idx256: the key pointer is followed by its count of u128 words

    def check_words(self, act: Action, words: int | None) -> None:
        """Abort unless a checksum256 key's count of u128 words is Antelope's 2."""
        if self.wide and (words is None or words & _U32 != IDX256_WORDS):
            shown = None if words is None else words & _U32
            raise act.abort(
                f"db_idx256: a checksum256 key is {IDX256_WORDS} u128 words, not {shown}"
            )

    def read(self, act: Action, ptr: int, words: int | None) -> bytes:
        kind = self.kind
        if kind is IDX256:
            self.check_words(act, words)
            raw = act.read(ptr, 32)
            return raw[15::-1] + raw[31:15:-1]  # each little-endian word, high word first
        raw = act.read(ptr, kind.size)
        if kind is IDX_DOUBLE:
            value: float = struct.unpack("<d", raw)[0]
            if math.isnan(value):
                raise act.abort("db_idx_double: NaN is not an allowed secondary key")
            return double_key(value)
        return raw[::-1]  # idx64, idx128: little-endian in memory, big-endian in keys

    def write(self, act: Action, ptr: int, key: bytes) -> None:
        kind = self.kind
        if kind is IDX256:
            act.write(ptr, key[15::-1] + key[31:15:-1])
        elif kind is IDX_DOUBLE:
            act.write(ptr, struct.pack("<d", double_value(key)))
        else:
            act.write(ptr, key[::-1])


class IndexFunctions:
    """The ten functions of one secondary key type (Antelope's ``db_idx*`` family), as bound
    methods: a key arrives as ``*key`` (its pointer, and for idx256 its count of words)."""

    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        self.kind = codec.kind
        self.n_key = 2 if codec.wide else 1

    def register(self, api: HostApi, category: Category) -> None:
        key = "secondary: usize, len: u32" if self.codec.wide else "secondary: usize"
        find = f"code: u64, scope: u64, table: u64, {key}, primary: usize -> i32"
        signatures = {
            "store": f"scope: u64, table: u64, payer: u64, id: u64, {key} -> i32",
            "update": f"itr: i32, payer: u64, {key} -> void",
            "remove": "itr: i32 -> void",
            "find_secondary": find,
            "find_primary": f"code: u64, scope: u64, table: u64, {key}, primary: u64 -> i32",
            "lowerbound": find,
            "upperbound": find,
            "next": "itr: i32, primary: usize -> i32",
            "previous": "itr: i32, primary: usize -> i32",
            "end": "code: u64, scope: u64, table: u64 -> i32",
        }
        for op, signature in signatures.items():
            body = getattr(self, op)
            api.function(category, signature, name=f"db_{self.kind.name}_{op}")(body)

    def _key(self, act: Action, key: tuple[int, ...]) -> bytes:
        return self.codec.read(act, key[0], key[1] if self.codec.wide else None)

    def store(self, act: Action, scope: int, table: int, payer: int, id_: int, *key: int) -> int:
        act.charge(self.kind.size)
        value = self._key(act, key)
        return act.tables.idx_store(
            self.kind, scope & _U64, table & _U64, payer & _U64, id_ & _U64, value
        )

    def update(self, act: Action, itr: int, payer: int, *key: int) -> None:
        act.charge(self.kind.size)
        act.tables.idx_update(self.kind, itr, payer & _U64, self._key(act, key))

    def remove(self, act: Action, itr: int) -> None:
        act.charge()
        act.tables.idx_remove(self.kind, itr)

    def find_secondary(self, act: Action, code: int, scope: int, table: int, *rest: int) -> int:
        act.charge(self.kind.size + 8)
        value = self._key(act, rest[: self.n_key])
        found, primary = act.tables.idx_find_secondary(
            self.kind, code & _U64, scope & _U64, table & _U64, value
        )
        if found >= 0:
            act.write_u64(rest[-1], primary)
        return found

    def find_primary(self, act: Action, code: int, scope: int, table: int, *rest: int) -> int:
        act.charge(self.kind.size)
        if self.codec.wide:
            self.codec.check_words(act, rest[1])
        found, value = act.tables.idx_find_primary(
            self.kind, code & _U64, scope & _U64, table & _U64, rest[-1] & _U64
        )
        if found >= 0:
            self.codec.write(act, rest[0], value)
        return found

    def lowerbound(self, act: Action, code: int, scope: int, table: int, *rest: int) -> int:
        return self._bound(act, False, code, scope, table, rest)

    def upperbound(self, act: Action, code: int, scope: int, table: int, *rest: int) -> int:
        return self._bound(act, True, code, scope, table, rest)

    def _bound(
        self, act: Action, upper: bool, code: int, scope: int, table: int, rest: tuple[int, ...]
    ) -> int:
        """Antelope's lower or upper bound: the entry's key is written over the one given."""
        act.charge(2 * self.kind.size + 8)
        value = self._key(act, rest[: self.n_key])
        search = act.tables.idx_upperbound if upper else act.tables.idx_lowerbound
        found, key, primary = search(self.kind, code & _U64, scope & _U64, table & _U64, value)
        if found >= 0:
            self.codec.write(act, rest[0], key)
            act.write_u64(rest[-1], primary)
        return found

    def next(self, act: Action, itr: int, primary_out: int) -> int:
        act.charge(8)
        found, primary = act.tables.idx_next(self.kind, itr)
        if found >= 0:
            act.write_u64(primary_out, primary)
        return found

    def previous(self, act: Action, itr: int, primary_out: int) -> int:
        act.charge(8)
        found, primary = act.tables.idx_previous(self.kind, itr)
        if found >= 0:
            act.write_u64(primary_out, primary)
        return found

    def end(self, act: Action, code: int, scope: int, table: int) -> int:
        act.charge()
        return act.tables.idx_end(self.kind, code & _U64, scope & _U64, table & _U64)


IndexFunctions(Codec(IDX64, wide=False)).register(API, Category.DB_IDX64)
IndexFunctions(Codec(IDX128, wide=False)).register(API, Category.DB_IDX128)
IndexFunctions(Codec(IDX256, wide=True)).register(API, Category.DB_IDX256)
IndexFunctions(Codec(IDX_DOUBLE, wide=False)).register(API, Category.DB_IDX_DOUBLE)
