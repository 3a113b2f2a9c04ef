"""The committed values of busy state keys (accounts), raw and decoded, kept across blocks.

A transfer reads two accounts and writes them back, and the next blocks read the same
accounts again, and reading one from LevelDB and decoding it is a large share of the chain
thread's work in an import. ``CachedState`` is the reader the controller
hands the state transition: it answers ``StateView`` from memory for the accounts written
recently and passes every other read to the store.

It must always equal the store. The controller is the store's only writer and tells it
everything: ``committed`` after each block's write batch (what the block wrote, encoded and
decoded), ``clear`` when blocks are popped. Decoded values are immutable (``Account`` is a
NamedTuple of ints, strings and tuples), so every view may share them.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Mapping
from itertools import islice
from operator import itemgetter
from typing import Any

from chain.core.block_transition import StateReader
from chain.core.execution.state import CachingReader, Changes
from chain.core.execution.state_hash import StateHash
from chain.core.primitives import schema
from chain.storage.txfilter import TxFilter

__all__ = ["CachedState"]

# 65,536 accounts at about 0.4 KB each (raw bytes, the NamedTuple and the dict entry): 26 MB.
MAX_ENTRIES = 1 << 16
_ACCOUNTS_END = schema.prefix_end(schema.ACCOUNT)
_key = itemgetter(0)


class CachedState(CachingReader):
    """The store's committed state, with the values of recently written accounts in memory."""

    __slots__ = ("_entries", "_limit", "_store")

    def __init__(self, store: StateReader, limit: int = MAX_ENTRIES) -> None:
        self._store = store
        self._limit = limit
        self._entries: dict[bytes, tuple[bytes, Any]] = {}  # in the order first held

    def __len__(self) -> int:
        return len(self._entries)

    # --- the reader (StateReader) -------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        entry = self._entries.get(key)
        return entry[0] if entry is not None else self._store.get(key)

    def iterate(
        self, start: bytes, stop: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        return self._store.iterate(start, stop, reverse=reverse)

    def state_hash(self) -> StateHash:
        return self._store.state_hash()

    @property
    def tx_filter(self) -> TxFilter | None:
        """The store's filter of unexpired transaction ids (``chain.storage.txfilter``)."""
        held: TxFilter | None = getattr(self._store, "tx_filter", None)
        return held

    def cached(self, key: bytes) -> tuple[bytes, Any] | None:
        """The committed (raw, decoded) value of ``key`` if it is held; None if not held."""
        return self._entries.get(key)

    # --- kept equal to the store by the controller --------------------------------------------

    def committed(self, changes: Changes, written: Mapping[bytes, Any]) -> None:
        """A block's write batch is in the store: ``changes`` encoded and in key order (as
        ``StateView.changes`` gives them), ``written`` the same values decoded (the view's
        writes). Accounts written are held from now on; past the limit, the half held
        longest goes (in one sweep: dropping a dict's oldest key one at a time scans past
        every key dropped before)."""
        entries = self._entries
        # ``changes`` are in key order: the accounts are one run of it.
        lo = bisect_left(changes, schema.ACCOUNT, key=_key)
        hi = bisect_left(changes, _ACCOUNTS_END, lo, key=_key)
        for key, raw in changes[lo:hi]:
            value = written[key]
            if raw is not None and not isinstance(value, bytes):  # decoded, as a view has it
                entries[key] = (raw, value)
            else:
                entries.pop(key, None)
        if len(entries) > self._limit:
            for key in list(islice(entries, len(entries) - self._limit // 2)):
                del entries[key]

    def clear(self) -> None:
        """Forget everything (blocks were popped: their writes are undone in the store)."""
        self._entries.clear()
