"""Signature recovery spread over worker processes.

Recovery is pure CPU in libsecp256k1 and holds the GIL through coincurve's cffi calls, so
threads do not help; processes do. Two ways to use the pool: call it with a batch (split into
one chunk per worker plus one the caller does itself while it waits), or ``submit`` a batch
and collect it later, so that the workers recover the next block's signatures while the
caller applies the current block (``Chain.prefetch_keys``).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from chain.crypto import recover_many
from chain.types import PublicKey

# Below this many signatures the pickling round trip costs more than it saves.
MIN_PARALLEL = 64


class ParallelRecoverer:
    """A ``Recoverer`` backed by a process pool; call ``close`` when done."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))

    def __call__(self, items: list[tuple[bytes, bytes]]) -> list[PublicKey | None]:
        if len(items) < MIN_PARALLEL:
            return recover_many(items)
        parts = self.workers + 1
        size = -(-len(items) // parts)
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        futures = [self._pool.submit(recover_many, c) for c in chunks[1:]]
        out = recover_many(chunks[0])
        for future in futures:
            out.extend(future.result())
        return out

    def submit(self, items: list[tuple[bytes, bytes]]) -> Callable[[], list[PublicKey | None]]:
        """Start recovering ``items`` in the workers; returns a function that waits for them."""
        size = max(1, -(-len(items) // self.workers))
        futures = [
            self._pool.submit(recover_many, items[i : i + size]) for i in range(0, len(items), size)
        ]
        return lambda: [key for f in futures for key in f.result()]

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)
