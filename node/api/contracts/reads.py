"""Reads of contract state for the RPC: code, ABI and table rows, from one ``KVReader``.

The handlers give these a frozen reader (``BlockStore.frozen``), so a page of rows is one
state however long it takes to read, and they run on a worker thread, never the chain's.
A page is bounded three ways: rows (``limit``), bytes of row data and time; whichever ends
it first, the answer says ``more`` and gives the ``next_key`` to start the next page at.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from chain.abi import Abi, parse_abi, symbol_code_value
from chain.core.execution.contracts import name_to_u64, u64_to_name
from chain.core.execution.state import KVReader
from chain.core.primitives import schema
from chain.core.primitives.encoding import unpack
from chain.core.primitives.errors import EncodingError, NotFound

MAX_ROWS = 1000
# Row bytes per page: 1000 rows of ~1 KiB, while the JSON answer stays a few MiB at most.
MAX_PAGE_BYTES = 1 << 20
# Time one page may take to read and decode (on a worker thread: it competes for the GIL).
PAGE_TIME_S = 0.05
_U64_MAX = 2**64 - 1


@dataclass(frozen=True, slots=True)
class Code:
    """What ``setcode`` left at an account."""

    account: str
    code_hash: bytes
    wasm: bytes
    abi_text: str

    @property
    def code_bytes(self) -> int:
        return len(self.wasm)


def code_of(reader: KVReader, account: str) -> Code:
    """The code deployed at ``account``; NotFound if there is none (or no such account)."""
    raw = reader.get(schema.code_key(account))
    if raw is None:
        if reader.get(schema.account_key(account)) is None:
            raise NotFound(f"no account {account!r}")
        raise NotFound(f"{account!r} has no contract")
    code_hash, abi_text = unpack(raw, "code entry")
    wasm = reader.get(schema.wasm_key(account)) or b""
    return Code(account, bytes(code_hash), wasm, abi_text)


def abi_of(reader: KVReader, account: str) -> Abi:
    """The parsed ABI of ``account``'s contract; NotFound if it has none."""
    code = code_of(reader, account)
    if not code.abi_text:
        raise NotFound(f"{account!r} has a contract but no ABI")
    return parse_abi(code.abi_text)


def u64_of(value: int | str, what: str) -> int:
    """A key given as a number, a decimal string, a name or a token's symbol code ("TOK", as
    cleos takes the scope of eosio.token's stat table); EncodingError naming ``what`` otherwise."""
    if isinstance(value, int):
        number = value
    elif value.isascii() and value.isdigit():
        number = int(value)
    elif (code := symbol_code_value(value)) is not None:
        return code
    else:
        try:
            return name_to_u64(value)
        except EncodingError:
            raise EncodingError(
                what, f"{value!r} is neither a u64 number, a name nor a symbol code"
            ) from None
    if not 0 <= number <= _U64_MAX:
        raise EncodingError(what, f"{number} is not a u64")
    return number


class RowReader(Protocol):
    """A frozen state that iterates both ways (``FrozenReader``): a page in reverse starts
    at its upper bound."""

    def get(self, key: bytes) -> bytes | None: ...

    def iterate(
        self, start: bytes, stop: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]: ...


@dataclass(frozen=True, slots=True)
class RowQuery:
    """One page of a table: rows with ``lower <= key <= upper``, by primary key or by the
    table's first secondary index (``index_table``), decoded by ``abi`` when given, from the
    upper bound down when ``reverse``, each with its payer when ``show_payer``."""

    contract: str
    scope: int
    table: str
    lower: int = 0
    upper: int = _U64_MAX
    limit: int = 10
    index_table: str | None = None  # the idx64 table; None: by primary key
    abi: Abi | None = None
    reverse: bool = False
    show_payer: bool = False


def table_rows(
    reader: RowReader,
    query: RowQuery,
    *,
    max_bytes: int = MAX_PAGE_BYTES,
    time_s: float = PAGE_TIME_S,
) -> dict[str, Any]:
    """Antelope's ``{rows, more, next_key}`` for ``query``; at most ``query.limit`` rows,
    ``max_bytes`` of row data and ``time_s`` of work (at least one row, so paging always
    moves). ``next_key`` is the key of the first row left out: the next page's lower bound
    (its upper bound in reverse), so that paging gives every row once."""
    contract = name_to_u64(query.contract)
    table = name_to_u64(query.table)
    deadline = time.perf_counter() + time_s
    rows: list[Any] = []
    size = 0
    table_prefix = schema.table_prefix(contract, query.scope, table)
    if query.index_table is None:
        prefix = table_prefix
    else:
        prefix = schema.idx64_prefix(contract, query.scope, name_to_u64(query.index_table))
    found = reader.iterate(
        prefix + schema.be(query.lower, 8), _stop(prefix, query.upper), reverse=query.reverse
    )
    entries = (
        _keyed(found) if query.index_table is None else _by_secondary(reader, found, table_prefix)
    )
    for key, value in entries:
        if len(rows) >= query.limit or (
            rows and (size + len(value) > max_bytes or time.perf_counter() > deadline)
        ):
            return {"rows": rows, "more": True, "next_key": str(key)}
        size += len(value)
        rows.append(_row(value, query))
    return {"rows": rows, "more": False, "next_key": ""}


def _stop(prefix: bytes, upper: int) -> bytes:
    """The end of a range whose last key is ``upper`` (inclusive, as Antelope's)."""
    if upper == _U64_MAX:
        return schema.prefix_end(prefix)
    return prefix + schema.be(upper + 1, 8)


def _keyed(entries: Any) -> Any:
    """Rows by primary key: ``(key, value)``."""
    for key, value in entries:
        yield int.from_bytes(key[-8:], "big"), value


def _by_secondary(reader: RowReader, entries: Any, table_prefix: bytes) -> Any:
    """Rows in (secondary, primary) order: ``(secondary, row value)``; an index entry whose
    row is gone (never, in a state the runtime wrote) is skipped."""
    for key, _payer in entries:
        value = reader.get(table_prefix + key[-8:])
        if value is not None:
            yield int.from_bytes(key[-16:-8], "big"), value


def _row(value: bytes, query: RowQuery) -> Any:
    """A row as Antelope gives it: decoded by the ABI (its hex if the ABI does not describe
    it, as nodeos does), or its hex; with its payer, ``{data, payer}``."""
    data = value[8:]
    row: Any = data.hex()
    if query.abi is not None:
        with contextlib.suppress(EncodingError):  # the contract changed its layout
            row = query.abi.decode_table_row(query.table, data)
    if not query.show_payer:
        return row
    payer_u64 = int.from_bytes(value[:8], "big")
    return {"data": row, "payer": u64_to_name(payer_u64) or str(payer_u64)}
