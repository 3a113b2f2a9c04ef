"""``bor-node export`` and ``bor-node import``: the irreversible history as a portable file."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from chain.controller import Chain
from chain.core.consensus.block import decode_block
from chain.core.primitives.errors import StoreError
from chain.signatures.signers import PREFETCH_BLOCKS
from chain.storage.blocklog import BlockLog, BlockLogWriter, index_path
from chain.storage.store import BlockStore
from node.errors import NodeError


def genesis_beside(path: Path) -> Path:
    """Where ``export`` puts the chain's genesis next to the history file ``path``."""
    return path.with_name(path.name + ".genesis.json")


@dataclass(frozen=True, slots=True)
class ExportPlan:
    """What an export of a data dir's irreversible history writes: blocks ``first`` to
    ``last`` of chain ``chain_id``. A data dir started from the snapshot of block N holds no
    block below N, and block N only as the snapshot's head: its history starts at N + 1
    (``snapshot_block`` is N then, None for a data dir that holds the chain from genesis)."""

    chain_id: bytes
    first: int
    last: int
    snapshot_block: int | None

    def describe(self) -> str:
        """The blocks written, and where they start when that is not block 1."""
        blocks = f"blocks {self.first}..{self.last} (irreversible)"
        if self.snapshot_block is None:
            return blocks
        return (
            f"{blocks}: this data dir starts at block {self.snapshot_block} (a snapshot),"
            f" so the file continues the snapshot of block {self.snapshot_block}"
        )


def export_plan(chain: Chain) -> ExportPlan:
    """The export of ``chain``'s irreversible history (on the thread that owns the chain)."""
    held = chain.store.first_block()
    start = None if held <= 1 else held
    plan = ExportPlan(chain.chain_id, 1 if start is None else start + 1, chain.lib, start)
    if plan.last < plan.first:
        raise NothingToExport(
            f"no irreversible block to export yet: the LIB is block {plan.last}"
            + ("" if start is None else ", the snapshot this data dir started from")
        )
    return plan


class NothingToExport(NodeError):
    """The data dir holds no irreversible block that an export would write."""


def export_history(store: BlockStore, plan: ExportPlan, path: Path) -> int:
    """Write ``plan``'s blocks to ``path`` (and its index), whole or not at all (written under
    a temporary name, then renamed); returns how many. Irreversible blocks never change, so
    this may run on another thread than the chain's while the chain goes on."""
    part = path.with_name(path.name + ".part")
    writer = BlockLogWriter(part, plan.chain_id, plan.first)
    try:
        for num in range(plan.first, plan.last + 1):
            block_id = store.block_id_at(num)
            raw = None if block_id is None else store.block_bytes(block_id)
            if raw is None:
                raise StoreError(f"block {num} is missing from the block store")
            writer.append(raw)
    except BaseException:
        writer.close()
        part.unlink(missing_ok=True)
        index_path(part).unlink(missing_ok=True)
        raise
    writer.close()
    index_path(part).replace(index_path(path))
    part.replace(path)
    return plan.last - plan.first + 1


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
        if start < log.first:
            raise StoreError(
                f"{path} holds blocks {log.first}..{log.last}: it continues the snapshot of"
                f" block {log.first - 1}, and this data dir's head is block {start - 1};"
                f" start the data dir from that snapshot first (bor-node import-snapshot)"
            )
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
