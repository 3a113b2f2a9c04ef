"""``bor-node export`` and ``bor-node import``: the irreversible history as a portable file."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from chain.controller import Chain
from chain.core.block import decode_block
from chain.core.errors import StoreError
from chain.signatures.signers import PREFETCH_BLOCKS
from chain.storage.blocklog import BlockLog, BlockLogWriter


def genesis_beside(path: Path) -> Path:
    """Where ``export`` puts the chain's genesis next to the history file ``path``."""
    return path.with_name(path.name + ".genesis.json")


def export_history(chain: Chain, path: Path) -> int:
    """Write blocks 1..LIB to ``path`` (and its index); returns how many."""
    writer = BlockLogWriter(path, chain.chain_id, 1)
    store = chain.store
    try:
        for num in range(1, chain.lib + 1):
            block_id = store.block_id_at(num)
            raw = None if block_id is None else store.block_bytes(block_id)
            if raw is None:
                raise StoreError(f"block {num} is missing from the block store")
            writer.append(raw)
    finally:
        writer.close()
    return chain.lib


class Progress:
    """One line on stderr, redrawn at most a few times a second."""

    def __init__(self, total: int, start: int) -> None:
        self.total, self.start = total, start
        self.t0 = self.shown = time.monotonic()
        self.txs = 0

    def update(self, num: int, txs: int, force: bool = False) -> None:
        self.txs += txs
        now = time.monotonic()
        if not force and now - self.shown < 0.25:
            return
        self.shown = now
        done = num - self.start + 1
        rate = done / (now - self.t0) if now > self.t0 else 0.0
        left = self.total - num
        eta = f"{left / rate:,.0f} s" if rate else "?"
        width = 30
        filled = int(width * done / max(1, self.total - self.start + 1))
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(
            f"\r[{bar}] block {num:,}/{self.total:,}  {rate:,.0f} blocks/s  "
            f"{self.txs / (now - self.t0 or 1):,.0f} tx/s  ETA {eta}   "
        )
        sys.stderr.flush()


def import_history(chain: Chain, path: Path, light: bool, show: bool = True) -> tuple[int, float]:
    """Apply every block of ``path`` above our head, in order, fully validated unless
    ``light``. Resumes where an earlier import stopped. Returns (blocks applied, seconds)."""
    log = BlockLog(path)
    try:
        if log.chain_id != chain.chain_id:
            theirs, ours = log.chain_id.hex()[:16], chain.chain_id.hex()[:16]
            raise StoreError(f"{path} holds chain {theirs}…, this node is on {ours}…")
        start = chain.head.num + 1
        if start > log.last:
            return 0, 0.0
        if light:
            chain.set_light_validation(log.last)
        progress = Progress(log.last, start)
        started = time.monotonic()
        # One sync at the end, not one per block: what a power cut takes, the file still holds.
        with chain.store.defer_sync():
            applied = _apply_all(chain, log, start, light, progress if show else None)
        if show:
            progress.update(chain.head.num, 0, force=True)
            sys.stderr.write("\n")
        return applied, time.monotonic() - started
    finally:
        chain.set_light_validation(0)
        log.close()


def _apply_all(
    chain: Chain, log: BlockLog, start: int, light: bool, progress: Progress | None
) -> int:
    """Apply blocks ``start``.. of ``log``, keys prefetched ``PREFETCH_BLOCKS`` ahead."""
    now = int(time.time() * 1000)
    window = []
    applied = 0
    for num, raw in log.blocks(start):
        block = decode_block(raw)
        if not light:
            chain.prefetch_keys(block.transactions)
        window.append(block)
        if len(window) <= PREFETCH_BLOCKS and num < log.last:
            continue
        current = window.pop(0)
        chain.push_block(current, now)
        applied += 1
        if progress is not None:
            progress.update(current.num, len(current.transactions))
    for block in window:
        chain.push_block(block, now)
        applied += 1
        if progress is not None:
            progress.update(block.num, len(block.transactions))
    return applied
