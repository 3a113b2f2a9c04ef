"""Contract tables as Antelope's ``db_*_i64`` and ``db_idx*`` functions see them, over a StateView.

A table is (contract, scope, table) with rows by a u64 primary key, stored under
``schema.ROW`` as ``payer(8) + row bytes``. A secondary index of one of Antelope's key types
(``KINDS``: idx64, idx128, idx256, idx_double) keeps, per row, one key under its kind's prefix
(by secondary, then primary; value: the payer) and its BY_PRIMARY twin (value: the key).
Keys are stored in bytes whose order is the key type's order (big-endian integers, a
checksum's own bytes, a double's ordered bits), so the state's order is what the iterators walk.

Iterators are Antelope's: a non-negative handle into this action's cache of rows it has
touched, and per table an end iterator ``-2 - table index`` (-1 is never valid). Any contract
may read any table; only the running contract (the receiver) writes, to its own tables, and
each entry's bytes are billed to a payer who is the receiver or authorized the action.
"""

from __future__ import annotations

from dataclasses import dataclass

from chain.core.execution import ram
from chain.core.execution.contracts import u64_to_name
from chain.core.execution.state import StateView
from chain.core.primitives import schema
from chain.core.primitives.errors import ContractError, ResourceExceeded
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName

# Past every key of a prefix whose keys are the prefix and up to 40 more bytes.
_AFTER = b"\xff" * 41  # past a key of 32 bytes and a primary of 8
_U64 = (1 << 64) - 1

Table = tuple[int, int, int]  # (code, scope, table)


@dataclass(frozen=True, slots=True)
class IndexKind:
    """One of Antelope's secondary key types: its functions' prefix, where its entries are
    stored and how many bytes its keys take."""

    name: str  # "idx64": its host functions are db_idx64_*
    prefix: bytes
    by_primary: bytes
    size: int

    @property
    def entry_bytes(self) -> int:
        return ram.index_entry_bytes(self.size)


IDX64 = IndexKind("idx64", schema.IDX64, schema.IDX64_BY_PRIMARY, 8)
IDX128 = IndexKind("idx128", schema.IDX128, schema.IDX128_BY_PRIMARY, 16)
IDX256 = IndexKind("idx256", schema.IDX256, schema.IDX256_BY_PRIMARY, 32)
IDX_DOUBLE = IndexKind("idx_double", schema.IDX_DOUBLE, schema.IDX_DOUBLE_BY_PRIMARY, 8)
KINDS = (IDX64, IDX128, IDX256, IDX_DOUBLE)

# An index entry an iterator points at: (kind, table index, secondary key bytes, primary).
Entry = tuple[IndexKind, int, bytes, int]


def _u64(data: bytes) -> int:
    return int.from_bytes(data, "big")


class Tables:
    """The tables one action sees and the iterators it holds (made per action, dropped after)."""

    __slots__ = (
        "_auth_ids",
        "_idx",
        "_idx_itr",
        "_params",
        "_prefixes",
        "_readonly",
        "_receiver",
        "_receiver_name",
        "_row_itr",
        "_rows",
        "_table_index",
        "_tables",
        "_view",
        "_where",
    )

    def __init__(
        self,
        view: StateView,
        receiver: int,
        receiver_name: AccountName,
        auth_ids: frozenset[int],
        params: ChainParams,
        *,
        readonly: bool,
        where: str,
    ) -> None:
        self._view = view
        self._receiver = receiver
        self._receiver_name = receiver_name
        self._auth_ids = auth_ids
        self._params = params
        self._readonly = readonly
        self._where = where
        self._tables: list[Table] = []  # shared by both kinds of iterator: its index is the end
        self._table_index: dict[Table, int] = {}
        self._prefixes: list[bytes] = []  # table index -> the prefix of its row keys
        self._rows: list[tuple[int, int] | None] = []  # itr -> (table index, primary)
        self._row_itr: dict[tuple[int, int], int] = {}
        self._idx: list[Entry | None] = []  # itr -> the entry
        self._idx_itr: dict[tuple[str, int, int], int] = {}  # (kind, table, primary) -> itr

    # --- helpers ---------------------------------------------------------------------------

    def _fail(self, reason: str) -> ContractError:
        return ContractError(f"{self._where}: {reason}")

    def _table(self, code: int, scope: int, table: int) -> int:
        key = (code, scope, table)
        index = self._table_index.get(key)
        if index is None:
            index = len(self._tables)
            self._tables.append(key)
            self._prefixes.append(schema.table_prefix(code, scope, table))
            self._table_index[key] = index
        return index

    def _writable(self, what: str) -> None:
        if self._readonly:
            raise self._fail(f"{what} is not allowed in a read-only call")

    def _own(self, t: int, what: str) -> None:
        if self._tables[t][0] != self._receiver:
            raise self._fail(f"{what}: the table belongs to another contract")

    def _payer(self, payer: int) -> AccountName:
        """The payer's name, if it may be billed: the receiver or an authorizer."""
        name = u64_to_name(payer)
        if name is None or (payer != self._receiver and payer not in self._auth_ids):
            shown = name if name is not None else f"#{payer}"
            raise self._fail(f"payer {shown} is neither the contract nor an authorizer")
        return AccountName(name)

    def _bill(self, payer: str, delta: int) -> None:
        try:
            ram.charge(self._view, payer, delta, self._params)
        except ResourceExceeded as err:
            raise ResourceExceeded(f"{self._where}: {err.reason}") from None

    # --- primary rows ----------------------------------------------------------------------

    def _row_iterator(self, t: int, primary: int) -> int:
        itr = self._row_itr.get((t, primary))
        if itr is None:
            itr = len(self._rows)
            self._rows.append((t, primary))
            self._row_itr[(t, primary)] = itr
        return itr

    def _row(self, itr: int, what: str) -> tuple[int, int, bytes]:
        """(table index, primary, row key) of a live row iterator, else abort."""
        if itr < 0:
            raise self._fail(f"{what}: end iterator or invalid iterator {itr}")
        if itr >= len(self._rows) or (entry := self._rows[itr]) is None:
            raise self._fail(f"{what}: no row at iterator {itr}")
        t, primary = entry
        return t, primary, self._prefixes[t] + primary.to_bytes(8, "big")

    def store(self, scope: int, table: int, payer: int, primary: int, data: bytes) -> int:
        self._writable("db_store_i64")
        t = self._table(self._receiver, scope, table)
        key = self._prefixes[t] + primary.to_bytes(8, "big")
        if self._view.raw(key) is not None:
            raise self._fail(f"db_store_i64: row {primary} already exists")
        name = self._payer(payer)
        value = payer.to_bytes(8, "big") + data
        self._bill(name, ram.row_bytes(key, value))
        self._view.put_raw(key, value)
        return self._row_iterator(t, primary)

    def find(self, code: int, scope: int, table: int, primary: int) -> int:
        t = self._table(code, scope, table)
        if self._view.raw(self._prefixes[t] + primary.to_bytes(8, "big")) is None:
            return -2 - t
        return self._row_iterator(t, primary)

    def get(self, itr: int) -> bytes:
        _, _, key = self._row(itr, "db_get_i64")
        value = self._view.raw(key)
        if value is None:
            raise self._fail(f"db_get_i64: no row at iterator {itr}")
        return value[8:]

    def update(self, itr: int, payer: int, data: bytes) -> None:
        self._writable("db_update_i64")
        t, _, key = self._row(itr, "db_update_i64")
        self._own(t, "db_update_i64")
        old = self._view.raw(key)
        assert old is not None, "a live iterator's row exists"
        old_payer = _u64(old[:8])
        new_payer = old_payer if payer == 0 else payer
        value = new_payer.to_bytes(8, "big") + data
        old_cost, new_cost = ram.row_bytes(key, old), ram.row_bytes(key, value)
        if new_payer != old_payer or new_cost > old_cost:
            # Antelope's rule: no one's storage grows without their authorization.
            self._payer(new_payer)
        if new_payer == old_payer:
            if new_cost != old_cost:
                self._bill(self._name(old_payer), new_cost - old_cost)
        else:
            self._bill(self._name(old_payer), -old_cost)
            self._bill(self._name(new_payer), new_cost)
        self._view.put_raw(key, value)

    def remove(self, itr: int) -> None:
        self._writable("db_remove_i64")
        t, primary, key = self._row(itr, "db_remove_i64")
        self._own(t, "db_remove_i64")
        old = self._view.raw(key)
        assert old is not None, "a live iterator's row exists"
        self._bill(self._name(_u64(old[:8])), -ram.row_bytes(key, old))
        self._view.put_raw(key, None)
        self._rows[itr] = None
        del self._row_itr[(t, primary)]

    def next(self, itr: int) -> tuple[int, int]:
        """(iterator, primary) of the next row, or (end iterator, 0)."""
        if itr < -1:
            return -1, 0  # Antelope: there is nothing past a table's end
        t, _, key = self._row(itr, "db_next_i64")
        return self._first_row(t, key + b"\x00")

    def previous(self, itr: int) -> tuple[int, int]:
        """(iterator, primary) of the row before ``itr`` (the last row when ``itr`` is the
        table's end), or (-1, 0) when there is none."""
        if itr < -1:
            t = self._end_table(itr, "db_previous_i64")
            prefix = self._prefixes[t]
            found = self._view.prev_raw(prefix, prefix + _AFTER)
        else:
            t, _, key = self._row(itr, "db_previous_i64")
            found = self._view.prev_raw(self._prefixes[t], key)
        if found is None:
            return -1, 0
        primary = _u64(found[0][-8:])
        return self._row_iterator(t, primary), primary

    def upperbound(self, code: int, scope: int, table: int, primary: int) -> int:
        """The first row with a primary key > ``primary``, or the end iterator."""
        t = self._table(code, scope, table)
        if primary == _U64:
            return -2 - t
        return self._first_row(t, self._prefixes[t] + (primary + 1).to_bytes(8, "big"))[0]

    def _end_table(self, itr: int, what: str) -> int:
        """The table index of end iterator ``itr``, else abort."""
        t = -2 - itr
        if not 0 <= t < len(self._tables):
            raise self._fail(f"{what}: invalid iterator {itr}")
        return t

    def lowerbound(self, code: int, scope: int, table: int, primary: int) -> int:
        t = self._table(code, scope, table)
        return self._first_row(t, self._prefixes[t] + primary.to_bytes(8, "big"))[0]

    def end(self, code: int, scope: int, table: int) -> int:
        return -2 - self._table(code, scope, table)

    def _first_row(self, t: int, start: bytes) -> tuple[int, int]:
        prefix = self._prefixes[t]
        found = self._view.next_raw(start, prefix + _AFTER)
        if found is None:
            return -2 - t, 0
        primary = _u64(found[0][-8:])
        return self._row_iterator(t, primary), primary

    @staticmethod
    def _name(payer: int) -> str:
        name = u64_to_name(payer)
        assert name is not None, "a stored payer was checked when it was billed"
        return name

    # --- secondary indexes (db_idx64_*, db_idx128_*, db_idx256_*, db_idx_double_*) ------------

    def _idx_iterator(self, kind: IndexKind, t: int, secondary: bytes, primary: int) -> int:
        itr = self._idx_itr.get((kind.name, t, primary))
        if itr is None:
            itr = len(self._idx)
            self._idx.append((kind, t, secondary, primary))
            self._idx_itr[(kind.name, t, primary)] = itr
        else:
            self._idx[itr] = (kind, t, secondary, primary)
        return itr

    def _entry(self, kind: IndexKind, itr: int, what: str) -> Entry:
        if itr < 0:
            raise self._fail(f"{what}: end iterator or invalid iterator {itr}")
        if itr >= len(self._idx) or (entry := self._idx[itr]) is None:
            raise self._fail(f"{what}: no index entry at iterator {itr}")
        if entry[0] is not kind:
            raise self._fail(f"{what}: iterator {itr} is of a {entry[0].name} index")
        return entry

    def _keys(self, kind: IndexKind, t: int, secondary: bytes, primary: int) -> tuple[bytes, bytes]:
        """(the entry's key by secondary, its key by primary)."""
        code, scope, table = self._tables[t]
        by_primary = schema.index_prefix(kind.by_primary, code, scope, table)
        prefix = schema.index_prefix(kind.prefix, code, scope, table)
        return prefix + secondary + primary.to_bytes(8, "big"), by_primary + primary.to_bytes(
            8, "big"
        )

    def idx_store(
        self, kind: IndexKind, scope: int, table: int, payer: int, primary: int, secondary: bytes
    ) -> int:
        what = f"db_{kind.name}_store"
        self._writable(what)
        t = self._table(self._receiver, scope, table)
        key, by_primary = self._keys(kind, t, secondary, primary)
        if self._view.raw(by_primary) is not None:
            raise self._fail(f"{what}: row {primary} is already in the index")
        name = self._payer(payer)
        self._bill(name, kind.entry_bytes)
        self._view.put_raw(key, payer.to_bytes(8, "big"))
        self._view.put_raw(by_primary, secondary)
        return self._idx_iterator(kind, t, secondary, primary)

    def idx_update(self, kind: IndexKind, itr: int, payer: int, secondary: bytes) -> None:
        what = f"db_{kind.name}_update"
        self._writable(what)
        _, t, old_secondary, primary = self._entry(kind, itr, what)
        self._own(t, what)
        old_key, by_primary = self._keys(kind, t, old_secondary, primary)
        raw = self._view.raw(old_key)
        assert raw is not None, "a live index iterator's entry exists"
        old_payer = _u64(raw)
        new_payer = old_payer if payer == 0 else payer
        if new_payer != old_payer:
            name = self._payer(new_payer)
            self._bill(self._name(old_payer), -kind.entry_bytes)
            self._bill(name, kind.entry_bytes)
        self._view.put_raw(old_key, None)
        key, _ = self._keys(kind, t, secondary, primary)
        self._view.put_raw(key, new_payer.to_bytes(8, "big"))
        self._view.put_raw(by_primary, secondary)
        self._idx[itr] = (kind, t, secondary, primary)

    def idx_remove(self, kind: IndexKind, itr: int) -> None:
        what = f"db_{kind.name}_remove"
        self._writable(what)
        _, t, secondary, primary = self._entry(kind, itr, what)
        self._own(t, what)
        key, by_primary = self._keys(kind, t, secondary, primary)
        raw = self._view.raw(key)
        assert raw is not None, "a live index iterator's entry exists"
        self._bill(self._name(_u64(raw)), -kind.entry_bytes)
        self._view.put_raw(key, None)
        self._view.put_raw(by_primary, None)
        self._idx[itr] = None
        del self._idx_itr[(kind.name, t, primary)]

    def idx_find_secondary(
        self, kind: IndexKind, code: int, scope: int, table: int, secondary: bytes
    ) -> tuple[int, int]:
        """(iterator, primary) of the first entry with exactly ``secondary``, or (end, 0)."""
        t = self._table(code, scope, table)
        start, _ = self._keys(kind, t, secondary, 0)
        found = self._view.next_raw(start, start[:-8] + _AFTER)
        if found is None:
            return -2 - t, 0
        primary = _u64(found[0][-8:])
        return self._idx_iterator(kind, t, secondary, primary), primary

    def idx_find_primary(
        self, kind: IndexKind, code: int, scope: int, table: int, primary: int
    ) -> tuple[int, bytes]:
        """(iterator, secondary) of the row's entry, or (end, b"")."""
        t = self._table(code, scope, table)
        secondary = self._view.raw(self._keys(kind, t, b"", primary)[1])
        if secondary is None:
            return -2 - t, b""
        return self._idx_iterator(kind, t, secondary, primary), secondary

    def idx_lowerbound(
        self, kind: IndexKind, code: int, scope: int, table: int, secondary: bytes
    ) -> tuple[int, bytes, int]:
        """(iterator, secondary, primary) of the first entry with a secondary >= the given
        one, or (end, b"", 0)."""
        t = self._table(code, scope, table)
        return self._first_entry(kind, t, self._keys(kind, t, secondary, 0)[0])

    def idx_upperbound(
        self, kind: IndexKind, code: int, scope: int, table: int, secondary: bytes
    ) -> tuple[int, bytes, int]:
        """As ``idx_lowerbound``, for the first entry with a secondary > the given one."""
        t = self._table(code, scope, table)
        return self._first_entry(kind, t, self._keys(kind, t, secondary, 0)[0][:-8] + _AFTER)

    def idx_end(self, kind: IndexKind, code: int, scope: int, table: int) -> int:
        return -2 - self._table(code, scope, table)

    def idx_next(self, kind: IndexKind, itr: int) -> tuple[int, int]:
        """(iterator, primary) of the entry after ``itr``, or (end, 0); -1 past the end."""
        if itr < -1:
            return -1, 0
        _, t, secondary, primary = self._entry(kind, itr, f"db_{kind.name}_next")
        key, _ = self._keys(kind, t, secondary, primary)
        found, _, next_primary = self._first_entry(kind, t, key + b"\x00")
        return found, next_primary

    def idx_previous(self, kind: IndexKind, itr: int) -> tuple[int, int]:
        """(iterator, primary) of the entry before ``itr`` (the last when ``itr`` is the end),
        or (-1, 0) when there is none."""
        what = f"db_{kind.name}_previous"
        if itr < -1:
            t = self._end_table(itr, what)
            stop = schema.index_prefix(kind.prefix, *self._tables[t]) + _AFTER
        else:
            _, t, secondary, primary = self._entry(kind, itr, what)
            stop = self._keys(kind, t, secondary, primary)[0]
        found = self._view.prev_raw(schema.index_prefix(kind.prefix, *self._tables[t]), stop)
        if found is None:
            return -1, 0
        key = found[0]
        prev_primary = _u64(key[-8:])
        return self._idx_iterator(kind, t, key[-8 - kind.size : -8], prev_primary), prev_primary

    def _first_entry(self, kind: IndexKind, t: int, start: bytes) -> tuple[int, bytes, int]:
        prefix = schema.index_prefix(kind.prefix, *self._tables[t])
        found = self._view.next_raw(start, prefix + _AFTER)
        if found is None:
            return -2 - t, b"", 0
        key = found[0]
        secondary, primary = key[-8 - kind.size : -8], _u64(key[-8:])
        return self._idx_iterator(kind, t, secondary, primary), secondary, primary
