"""A Bloom filter over the transaction ids of the store's de-duplication set (its ``TX_BLOCK``
entries), asked by the compiled transfer pass before the transaction index: a new id, nearly
every one, then costs four bit tests instead of a LevelDB miss (~4 us on a 600k-transaction
store: a bloom check in each of the 4-5 files the key could be in).

Sound, not exact. It holds every id of every ``TX_BLOCK`` entry in the store: those there at
open and each entry a write puts (``BlockStore._write``, the store's one writer: a block's
list, one an undo restores, a snapshot's). So an id it does not hold was never applied by a
transaction that is still unexpired on this chain, and ``StateView.tx_seen`` asks only of
unexpired ones (expiration is checked first; a block's list is pruned only once all its
transactions expired). Ids of lists since pruned or undone stay: such a false positive costs
the index lookup it would have cost anyway. Past its capacity it is rebuilt from the entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from chain.core.primitives import schema

PROBES = 4  # bit positions an id sets: its first four 8-byte words, little-endian
BITS_PER_ID = 16  # at capacity, a false positive about once in 400 lookups
LEAST_CAPACITY = 1 << 16  # ids; 128 KiB

# The compiled adder: (bits, mask, TX_BLOCK value) -> None, setting the positions of the id
# of each whole item (a value that is not a list of items, which the schema never writes
# under TX_BLOCK, adds what items it holds).
Adder = Callable[[bytearray, int, bytes], None]


def positions(tx_id: bytes, mask: int) -> list[int]:
    """The bits that ``tx_id`` sets (the reference of the compiled adder and test)."""
    return [int.from_bytes(tx_id[8 * j : 8 * j + 8], "little") & mask for j in range(PROBES)]


class TxFilter:
    """The filter's bits (``mask + 1`` of them, a power of two) and how many ids it holds."""

    __slots__ = ("_add", "bits", "capacity", "held", "mask")

    def __init__(self, capacity: int, add: Adder) -> None:
        size = 64
        while size < BITS_PER_ID * capacity:
            size <<= 1
        self.bits = bytearray(size // 8)
        self.mask = size - 1
        self.capacity = capacity
        self.held = 0
        self._add = add

    @classmethod
    def of_entries(cls, values: Iterable[bytes], add: Adder) -> TxFilter:
        """A filter holding the ids of ``values`` (``TX_BLOCK`` values), sized for twice as
        many as they hold."""
        held = list(values)
        ids = sum(len(v) // schema.TX_BLOCK_ITEM for v in held)
        built = cls(max(LEAST_CAPACITY, 2 * ids), add)
        for value in held:
            built.add_entry(value)
        return built

    def add_entry(self, value: bytes) -> None:
        """Hold the ids of a ``TX_BLOCK`` value's items."""
        self._add(self.bits, self.mask, value)
        self.held += len(value) // schema.TX_BLOCK_ITEM

    def may_hold(self, tx_id: bytes) -> bool:
        """False only if no entry written since this filter was built held ``tx_id``."""
        bits = self.bits
        return all(bits[p >> 3] & (1 << (p & 7)) for p in positions(tx_id, self.mask))

    @property
    def full(self) -> bool:
        return self.held > self.capacity
