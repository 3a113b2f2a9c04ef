"""``StateView.next_raw``: the first live raw entry of a range, views merged over the
committed state, at a cost that does not multiply with the deletions it skips."""

from __future__ import annotations

from collections.abc import Iterator

from chain.core.execution.state import StateView
from chain.testing import MemoryKV

PREFIX = b"sr" + b"\x01" * 24
STOP = PREFIX + b"\xff" * 9


def _key(i: int) -> bytes:
    return PREFIX + i.to_bytes(8, "big")


class CountingKV(MemoryKV):
    """A MemoryKV that counts the walks (``iterate`` calls) and the entries they hand out."""

    def __init__(self, data: dict[bytes, bytes]) -> None:
        super().__init__(data)
        self.walks = 0
        self.yielded = 0

    def iterate(
        self, start: bytes, stop: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        self.walks += 1
        for item in super().iterate(start, stop, reverse=reverse):
            self.yielded += 1
            yield item


def test_next_raw_merges_views_over_the_committed_state_in_key_order() -> None:
    """A key written in a child, a parent's deletion of a committed key and a committed key
    are seen in key order, each from the layer that holds it last."""
    kv = MemoryKV({_key(1): b"one", _key(3): b"three", _key(5): b"five"})
    block = StateView(kv)
    block.put_raw(_key(1), None)
    tx = block.child()
    tx.put_raw(_key(2), b"two")
    tx.put_raw(_key(3), None)
    assert tx.next_raw(PREFIX, STOP) == (_key(2), b"two")
    assert tx.next_raw(_key(2) + b"\x00", STOP) == (_key(5), b"five")
    assert tx.next_raw(_key(6), STOP) is None
    assert block.next_raw(PREFIX, STOP) == (_key(3), b"three")


def test_prev_raw_walks_the_same_layers_down() -> None:
    """prev_raw sees the same merged state as next_raw, from the top of the range down:
    the last live key below ``stop``, a deletion hiding a committed key."""
    kv = MemoryKV({_key(1): b"one", _key(3): b"three", _key(5): b"five"})
    block = StateView(kv)
    block.put_raw(_key(5), None)
    tx = block.child()
    tx.put_raw(_key(4), b"four")
    tx.put_raw(_key(3), None)
    assert tx.prev_raw(PREFIX, STOP) == (_key(4), b"four")
    assert tx.prev_raw(PREFIX, _key(4)) == (_key(1), b"one")
    assert tx.prev_raw(PREFIX, _key(1)) is None
    assert block.prev_raw(PREFIX, STOP) == (_key(3), b"three")


def test_skipping_deleted_rows_walks_the_committed_state_once() -> None:
    """A contract that deleted a table's rows and looks for the next one pays one host call:
    the lookup reads each committed entry once, not once per deletion it skips (which made
    one lookup cost rows x writes of the block, seconds for a thousand rows)."""
    rows = 500
    kv = CountingKV({_key(i): b"row" for i in range(rows)})
    block = StateView(kv)
    tx = block.child()
    for i in range(rows):
        tx.put_raw(_key(i), None)
    assert tx.next_raw(PREFIX, STOP) is None
    assert (kv.walks, kv.yielded) == (1, rows)
