"""State objects and the copy-on-write view the state transition works on.

The state transition never touches LevelDB directly: it reads through a ``KVReader`` (the
block store implements it) and writes into a ``StateView``. A view over a view is how a
transaction that fails half-way leaves no trace: its child view is simply dropped.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, Protocol

from chain.core.primitives import schema
from chain.core.primitives.encoding import pack, unpack_tuples
from chain.core.primitives.types import AccountName, BlockId, PublicKey, TxId

Changes = list[tuple[bytes, bytes | None]]
"""State writes, encoded, in key order: (key, value), value None for a deletion."""


class KVReader(Protocol):
    """Read access to committed state (implemented by the block store); ``iterate`` walks
    ``start <= key < stop`` in key order, from the last key when ``reverse``."""

    def get(self, key: bytes) -> bytes | None: ...

    def iterate(
        self, start: bytes, stop: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]: ...


class CachingReader(ABC):
    """A reader that holds some committed values decoded (``chain.storage.state_cache``): a root
    view asks it before reading and decoding a key itself."""

    __slots__ = ()

    @abstractmethod
    def cached(self, key: bytes) -> tuple[bytes, Any] | None:
        """The committed (raw, decoded) value of ``key`` if held, else None."""


class Account(NamedTuple):
    """An account. Immutable: the state transition writes a new one for every change.

    NamedTuple rather than a frozen dataclass: a transfer builds four of these, and a
    NamedTuple is built about three times faster (0.8 against 2.2 microseconds, measured).
    """

    name: AccountName
    key: PublicKey
    balance: int = 0
    staked: int = 0
    unbonding: tuple[tuple[int, int], ...] = ()  # (release time in unix s, amount)
    votes: tuple[AccountName, ...] = ()

    def encode(self) -> bytes:
        return pack(self)


def decode_account(data: bytes) -> Account:
    return Account(*unpack_tuples(data))


class Producer(NamedTuple):
    """A producer candidate: registered by itself, approved by governance, elected by votes."""

    name: AccountName
    key: PublicKey
    url: str = ""
    approved: bool = False
    registered: bool = True
    total_votes: int = 0

    def encode(self) -> bytes:
        return pack(self)

    @property
    def electable(self) -> bool:
        return self.approved and self.registered and self.total_votes > 0


def decode_producer(data: bytes) -> Producer:
    return Producer(*unpack_tuples(data))


_Decoder = Callable[[bytes], Any]


def _raw(data: bytes) -> bytes:
    return data


class StateView:
    """A typed overlay: reads fall through to the parent, writes stay here until merged.

    The root view (the one over the store) caches what it reads, raw and decoded, so a block
    reads each key from LevelDB once and the undo record needs no second read.
    """

    __slots__ = ("_base", "_cached", "_marked", "_parent", "_reads", "_root", "_tapos", "_writes")

    def __init__(self, base: KVReader | StateView) -> None:
        self._base = base
        # key -> decoded object (Account, Producer), raw bytes, or None for a deletion
        self._writes: dict[bytes, Any] = {}
        # Ids of the transactions applied in this view: the de-duplication set's part that is
        # not in the store's transaction index yet (``tx_seen``).
        self._marked: set[bytes] = set()
        # The root view, for child views; None in the root itself: a root pointing at itself
        # would be a reference cycle, left to the cyclic GC with all the cache it holds (its
        # pauses of a few hundred ms showed in RPC latency under load, bench_rpc.py).
        if isinstance(base, StateView):
            self._parent: StateView | None = base
            self._root: StateView | None = base._top
        else:
            self._parent = None
            self._root = None
        self._reads: dict[bytes, tuple[bytes | None, Any]] = {}
        # A root view over a CachingReader asks it before reading and decoding a key.
        self._cached: Callable[[bytes], tuple[bytes, Any] | None] | None = None
        if self._root is None and isinstance(base, CachingReader):
            self._cached = base.cached
        # (ref_block_num, ref_block_prefix) -> whether it names a block of this chain; most
        # transactions of a block reference the same few blocks.
        self._tapos: dict[tuple[int, int], bool] = {}

    @property
    def _top(self) -> StateView:
        return self if self._root is None else self._root

    # --- generic ---------------------------------------------------------------------------

    def _read(self, key: bytes, decode: _Decoder) -> Any:
        view: StateView | None = self
        while view is not None:
            if key in view._writes:
                return view._writes[key]
            view = view._parent
        root = self._top
        cached = root._reads.get(key)
        if cached is not None:
            return cached[1]
        if root._cached is not None and (held := root._cached(key)) is not None:
            root._reads[key] = held
            return held[1]
        raw = root._base.get(key)  # type: ignore[union-attr]
        value = None if raw is None else decode(raw)
        root._reads[key] = (raw, value)
        return value

    def _scan(self, prefix: bytes, decode: _Decoder) -> dict[bytes, Any]:
        if self._parent is not None:
            found = self._parent._scan(prefix, decode)
        else:
            base = self._base
            assert not isinstance(base, StateView)
            found = {k: decode(v) for k, v in base.iterate(prefix, schema.prefix_end(prefix))}
        for key, value in self._writes.items():
            if key.startswith(prefix):
                if value is None:
                    found.pop(key, None)
                else:
                    found[key] = value
        return found

    def child(self) -> StateView:
        return StateView(self)

    def merge_into_parent(self) -> None:
        assert self._parent is not None, "only a child view can be merged"
        self._parent._writes.update(self._writes)
        self._parent._marked |= self._marked

    def changes(self) -> Changes:
        """Every write, encoded, in key order (the order the state root hashes them in)."""
        out: Changes = []
        for key in sorted(self._writes):
            value = self._writes[key]
            if value is None or isinstance(value, bytes):
                out.append((key, value))
            else:
                out.append((key, value.encode()))
        return out

    def written(self) -> dict[bytes, Any]:
        """Every write as it was made: decoded objects, raw bytes, None for a deletion."""
        return self._writes

    def originals(self) -> dict[bytes, bytes | None]:
        """Committed raw values of the keys this block read (the old values for undo)."""
        return {key: raw for key, (raw, _) in self._top._reads.items()}

    # --- accounts and producers -----------------------------------------------------------

    def account(self, name: str) -> Account | None:
        return self._read(schema.account_key(name), decode_account)  # type: ignore[no-any-return]

    def put_account(self, account: Account) -> None:
        self._writes[schema.account_key(account.name)] = account

    def producer(self, name: str) -> Producer | None:
        return self._read(schema.producer_key(name), decode_producer)  # type: ignore[no-any-return]

    def put_producer(self, producer: Producer) -> None:
        self._writes[schema.producer_key(producer.name)] = producer

    def producers(self) -> list[Producer]:
        return list(self._scan(schema.PRODUCER, decode_producer).values())

    # --- raw entries (contract code, tables, storage use: ``chain.vm``) ---------------------

    def raw(self, key: bytes) -> bytes | None:
        return self._read(key, _raw)  # type: ignore[no-any-return]

    def put_raw(self, key: bytes, value: bytes | None) -> None:
        """Write ``value`` at ``key``; None deletes it."""
        self._writes[key] = value

    def next_raw(self, start: bytes, stop: bytes) -> tuple[bytes, bytes] | None:
        """The first live entry with ``start <= key < stop``, this view's writes and its
        parents' over the committed state (a deletion hides a committed key)."""
        # One walk of the committed range merged with the views' written keys, in key order:
        # deleted entries are skipped as the walk passes them, so a contract that deleted
        # many rows does not pay a rescan of every layer per row skipped (a host call's
        # fixed fuel would not cover that).
        root = self._top
        base = root._base
        assert not isinstance(base, StateView)
        written: set[bytes] = set()
        view: StateView | None = self
        while view is not None:
            written.update(key for key in view._writes if start <= key < stop)
            view = view._parent
        committed = (key for key, _ in base.iterate(start, stop))
        for key in heapq.merge(sorted(written), committed):
            value = self.raw(key)
            if value is not None:
                return key, value
        return None

    def prev_raw(self, start: bytes, stop: bytes) -> tuple[bytes, bytes] | None:
        """The last live entry with ``start <= key < stop``: ``next_raw`` walking down (a
        contract's reverse iteration of a table or index)."""
        root = self._top
        base = root._base
        assert not isinstance(base, StateView)
        written: set[bytes] = set()
        view: StateView | None = self
        while view is not None:
            written.update(key for key in view._writes if start <= key < stop)
            view = view._parent
        committed = (key for key, _ in base.iterate(start, stop, reverse=True))
        for key in heapq.merge(sorted(written, reverse=True), committed, reverse=True):
            value = self.raw(key)
            if value is not None:
                return key, value
        return None

    # --- replay protection ----------------------------------------------------------------

    def tx_seen(self, tx_id: bytes) -> bool:
        """Whether a transaction with this id was applied: in this view (or a parent), or
        in a block of the chain, as the store's transaction index says (``schema.TX_INDEX``).

        The index is the de-duplication set's by-id lookup: an id's transaction has one
        expiration (the id is the hash of its bytes), so an id applied before is either a
        duplicate or expired, and expiration is checked first. Reading the block index
        rather than keeping a state entry per id spares every transaction a write when it
        is applied and a delete when it expires (and the undo records of both)."""
        view: StateView | None = self
        while view is not None:
            if tx_id in view._marked:
                return True
            view = view._parent
        base = self._top._base
        assert not isinstance(base, StateView), "a root view reads the store"
        return base.get(schema.tx_index_key(TxId(tx_id))) is not None

    def mark_tx(self, tx_id: bytes) -> None:
        self._marked.add(tx_id)

    def record_block_txs(self, num: int, applied: list[tuple[int, bytes]]) -> None:
        """Keep the (expiration, id) of each transaction block ``num`` applied, as one entry
        that ``prune_expired_txs`` drops once the last of them expired: the de-duplication
        set in the state (and so in the commitment and a snapshot, whose import indexes its
        ids), whose lookup by id is the transaction index (``tx_seen``)."""
        if applied:
            last = max(expiration for expiration, _ in applied)
            self._writes[schema.tx_block_key(last, num)] = schema.tx_block_value(applied)

    def prune_expired_txs(self, now_s: int) -> int:
        """Drop the id lists of blocks whose transactions all expired before ``now_s``;
        returns how many ids they held. (Their ids stay in the transaction index, which
        serves the RPC too: a transaction past its expiration is refused before its id is
        looked up.)"""
        base = self._base
        assert not isinstance(base, StateView), "prune on the block's root view"
        stop = schema.TX_BLOCK + now_s.to_bytes(4, "big")
        writes, reads = self._writes, self._reads
        pruned = 0
        for key, value in base.iterate(schema.TX_BLOCK, stop):
            writes[key] = None
            reads[key] = (value, value)  # the old value, for undo, without reading it again
            pruned += len(value) // schema.TX_BLOCK_ITEM
        return pruned

    def block_summary(self, num: int) -> BlockId | None:
        return self._read(schema.block_summary_key(num), _raw)  # type: ignore[no-any-return]

    def set_block_summary(self, num: int, block_id: BlockId) -> None:
        self._writes[schema.block_summary_key(num)] = bytes(block_id)
        self._top._tapos.clear()

    def tapos_matches(self, ref_num: int, ref_prefix: int) -> bool:
        """Whether the block summary at ``ref_num`` has id prefix ``ref_prefix`` (EOSIO's
        TaPoS check: bytes 8..11 of the id, little-endian)."""
        memo = self._top._tapos
        known = memo.get((ref_num, ref_prefix))
        if known is None:
            ref = self.block_summary(ref_num)
            known = ref is not None and int.from_bytes(ref[8:12], "little") == ref_prefix
            memo[(ref_num, ref_prefix)] = known
        return known
