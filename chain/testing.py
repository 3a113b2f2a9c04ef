"""Helpers for tests of the chain and of what sits on it: a dict-backed ``KVReader``, the
wall clock in milliseconds, and a dump of a chain's state for comparing two chains.

The dev network with all its keys (``DevNet``) needs a genesis, so it lives in
``genesis.testing``: the chain imports nothing of ours.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator

from chain.controller import Chain


class MemoryKV:
    """A ``KVReader`` over a dict, for unit tests of the state transition."""

    def __init__(self, data: dict[bytes, bytes] | None = None) -> None:
        self.data = dict(data or {})

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def iterate(
        self, start: bytes, stop: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        keys = sorted(self.data)
        chosen = keys[bisect.bisect_left(keys, start) : bisect.bisect_left(keys, stop)]
        for key in reversed(chosen) if reverse else chosen:
            yield key, self.data[key]


def now_ms() -> int:
    return int(time.time() * 1000)


def state_dump(chain: Chain) -> dict[bytes, bytes]:
    """Every state key and value: two chains in the same state dump equal."""
    return dict(chain.store.iterate(b"s", b"t"))
