"""Contract tables as Antelope's ``db_*_i64`` and ``db_idx64_*`` see them, over a StateView.

A table is (contract, scope, table) with rows by a u64 primary key, stored under
``schema.ROW`` as ``payer(8) + row bytes``; an idx64 secondary index keeps, per row, one u64
under ``schema.IDX64`` (by secondary, then primary) and ``schema.IDX64_BY_PRIMARY``. Both are
big-endian in keys, so the state's order is the numeric order the iterators walk.

Iterators are Antelope's: a non-negative handle into this action's cache of rows it has
touched, and per table an end iterator ``-2 - table index`` (-1 is never valid). Any contract
may read any table; only the running contract (the receiver) writes, to its own tables, and
each entry's bytes are billed to a payer who is the receiver or authorized the action.
"""

from __future__ import annotations

from chain.core.execution import ram
from chain.core.execution.contracts import u64_to_name
from chain.core.execution.state import StateView
from chain.core.primitives import schema
from chain.core.primitives.errors import ContractError, ResourceExceeded
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName

# Past every key of a prefix whose keys are the prefix and 8 or 16 more bytes.
_AFTER = b"\xff" * 17

Table = tuple[int, int, int]  # (code, scope, table)


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
        self._idx: list[tuple[int, int, int] | None] = []  # itr -> (table, secondary, primary)
        self._idx_itr: dict[tuple[int, int], int] = {}  # (table index, primary) -> itr

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

    # --- idx64 secondary index -------------------------------------------------------------

    def _idx_iterator(self, t: int, secondary: int, primary: int) -> int:
        itr = self._idx_itr.get((t, primary))
        if itr is None:
            itr = len(self._idx)
            self._idx.append((t, secondary, primary))
            self._idx_itr[(t, primary)] = itr
        else:
            self._idx[itr] = (t, secondary, primary)
        return itr

    def _entry(self, itr: int, what: str) -> tuple[int, int, int]:
        if itr < 0:
            raise self._fail(f"{what}: end iterator or invalid iterator {itr}")
        if itr >= len(self._idx) or (entry := self._idx[itr]) is None:
            raise self._fail(f"{what}: no index entry at iterator {itr}")
        return entry

    def idx_store(self, scope: int, table: int, payer: int, primary: int, secondary: int) -> int:
        self._writable("db_idx64_store")
        by_primary = schema.idx64_primary_key(self._receiver, scope, table, primary)
        if self._view.raw(by_primary) is not None:
            raise self._fail(f"db_idx64_store: row {primary} is already in the index")
        name = self._payer(payer)
        self._bill(name, ram.IDX64_ENTRY_BYTES)
        key = schema.idx64_key(self._receiver, scope, table, secondary, primary)
        self._view.put_raw(key, payer.to_bytes(8, "big"))
        self._view.put_raw(by_primary, secondary.to_bytes(8, "big"))
        return self._idx_iterator(self._table(self._receiver, scope, table), secondary, primary)

    def idx_update(self, itr: int, payer: int, secondary: int) -> None:
        self._writable("db_idx64_update")
        t, old_secondary, primary = self._entry(itr, "db_idx64_update")
        self._own(t, "db_idx64_update")
        code, scope, table = self._tables[t]
        old_key = schema.idx64_key(code, scope, table, old_secondary, primary)
        raw = self._view.raw(old_key)
        assert raw is not None, "a live index iterator's entry exists"
        old_payer = _u64(raw)
        new_payer = old_payer if payer == 0 else payer
        if new_payer != old_payer:
            name = self._payer(new_payer)
            self._bill(self._name(old_payer), -ram.IDX64_ENTRY_BYTES)
            self._bill(name, ram.IDX64_ENTRY_BYTES)
        self._view.put_raw(old_key, None)
        key = schema.idx64_key(code, scope, table, secondary, primary)
        self._view.put_raw(key, new_payer.to_bytes(8, "big"))
        by_primary = schema.idx64_primary_key(code, scope, table, primary)
        self._view.put_raw(by_primary, secondary.to_bytes(8, "big"))
        self._idx[itr] = (t, secondary, primary)

    def idx_remove(self, itr: int) -> None:
        self._writable("db_idx64_remove")
        t, secondary, primary = self._entry(itr, "db_idx64_remove")
        self._own(t, "db_idx64_remove")
        code, scope, table = self._tables[t]
        key = schema.idx64_key(code, scope, table, secondary, primary)
        raw = self._view.raw(key)
        assert raw is not None, "a live index iterator's entry exists"
        self._bill(self._name(_u64(raw)), -ram.IDX64_ENTRY_BYTES)
        self._view.put_raw(key, None)
        self._view.put_raw(schema.idx64_primary_key(code, scope, table, primary), None)
        self._idx[itr] = None
        del self._idx_itr[(t, primary)]

    def idx_find_secondary(
        self, code: int, scope: int, table: int, secondary: int
    ) -> tuple[int, int]:
        """(iterator, primary) of the first entry with exactly ``secondary``, or (end, 0)."""
        t = self._table(code, scope, table)
        start = schema.idx64_key(code, scope, table, secondary, 0)
        found = self._view.next_raw(start, start[:-8] + _AFTER)
        if found is None:
            return -2 - t, 0
        primary = _u64(found[0][-8:])
        return self._idx_iterator(t, secondary, primary), primary

    def idx_find_primary(self, code: int, scope: int, table: int, primary: int) -> tuple[int, int]:
        """(iterator, secondary) of the row's entry, or (end, 0)."""
        t = self._table(code, scope, table)
        raw = self._view.raw(schema.idx64_primary_key(code, scope, table, primary))
        if raw is None:
            return -2 - t, 0
        secondary = _u64(raw)
        return self._idx_iterator(t, secondary, primary), secondary

    def idx_lowerbound(
        self, code: int, scope: int, table: int, secondary: int
    ) -> tuple[int, int, int]:
        """(iterator, secondary, primary) of the first entry with a secondary >= the given
        one, or (end, 0, 0)."""
        t = self._table(code, scope, table)
        return self._first_entry(t, schema.idx64_key(code, scope, table, secondary, 0))

    def idx_next(self, itr: int) -> tuple[int, int]:
        if itr < -1:
            return -1, 0
        t, secondary, primary = self._entry(itr, "db_idx64_next")
        key = schema.idx64_key(*self._tables[t], secondary, primary)
        found, _, next_primary = self._first_entry(t, key + b"\x00")
        return found, next_primary

    def _first_entry(self, t: int, start: bytes) -> tuple[int, int, int]:
        prefix = schema.idx64_prefix(*self._tables[t])
        found = self._view.next_raw(start, prefix + _AFTER)
        if found is None:
            return -2 - t, 0, 0
        key = found[0]
        secondary, primary = _u64(key[-16:-8]), _u64(key[-8:])
        return self._idx_iterator(t, secondary, primary), secondary, primary
