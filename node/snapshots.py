"""Snapshot files for a node: write the LIB's state to one, verify one, start a store from one.

The format and its checks are ``chain.snapshot``'s; this module adds files (written under a
temporary name, fsynced, then renamed, so a file with the final name is always whole), the
progress reports, and the rules for a data dir: a snapshot starts an empty store only.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from io import BufferedReader
from pathlib import Path

from chain.errors import SnapshotError
from chain.snapshot import SnapshotHead, SnapshotSummary, read_head, read_snapshot, write_snapshot
from chain.store import BlockStore
from chain.types import BlockId

__all__ = [
    "ProgressLine",
    "create_snapshot",
    "import_snapshot",
    "read_snapshot_head",
    "snapshot_name",
    "verify_snapshot",
]

# A reason a progress report is due: (entries so far, bytes so far).
Report = Callable[[int, int], None]


def snapshot_name(num: int, block_id: BlockId) -> str:
    return f"snapshot-{num:010d}-{block_id.hex()[:16]}.bin"


def create_snapshot(
    head: SnapshotHead,
    entries: Iterator[tuple[bytes, bytes]],
    path: Path,
    report: Report | None = None,
) -> SnapshotSummary:
    """Write the snapshot of ``head`` to ``path`` (whole or not at all)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    try:
        with part.open("wb") as out:
            summary = write_snapshot(out, head, entries, report)
            out.flush()
            os.fsync(out.fileno())
        part.replace(path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return summary


@dataclass(frozen=True, slots=True)
class Verified:
    head: SnapshotHead
    entries: int
    size: int


def verify_snapshot(path: Path, report: Report | None = None) -> Verified:
    """Read the whole file and check it (``chain.snapshot``); SnapshotError says what is
    wrong with it."""
    with _open(path) as inp:
        head, chunks = read_snapshot(inp)
        count = 0
        for chunk in chunks:
            count += len(chunk)
            if report is not None:
                report(count, inp.tell())
        return Verified(head, count, inp.tell())


def read_snapshot_head(path: Path) -> SnapshotHead:
    """The head of the snapshot at ``path``, checked; the entries are not read."""
    with _open(path) as inp:
        _, head = read_head(inp)
        return head


def import_snapshot(
    store: BlockStore, path: Path, chain_id: bytes, report: Report | None = None
) -> Verified:
    """Fill the empty ``store`` from the snapshot at ``path``, verifying it as it is read; a
    snapshot of another chain is refused before anything is written."""
    with _open(path) as inp:
        head, chunks = read_snapshot(inp)
        if head.chain_id != chain_id:
            raise SnapshotError(
                f"the snapshot is of chain {head.chain_id.hex()[:16]}…, "
                f"the genesis of {chain_id.hex()[:16]}…"
            )
        count = 0

        def counted() -> Iterator[list[tuple[bytes, bytes]]]:
            nonlocal count
            for chunk in chunks:
                count += len(chunk)
                if report is not None:
                    report(count, inp.tell())
                yield chunk

        store.import_snapshot(head, counted())
        return Verified(head, count, inp.tell())


def _open(path: Path) -> BufferedReader:
    try:
        return path.open("rb")
    except OSError as err:
        raise SnapshotError(f"cannot read {path}: {err.strerror}") from err


class ProgressLine:
    """A progress line on a terminal (stderr), redrawn at most twice a second; prints nothing
    when stderr is not a terminal. ``total`` is the file size when it is known."""

    def __init__(self, what: str, total: int | None = None) -> None:
        self._what = what
        self._total = total
        self._start = self._last = time.monotonic()
        self._tty = sys.stderr.isatty()

    def __call__(self, entries: int, size: int) -> None:
        now = time.monotonic()
        if not self._tty or now - self._last < 0.5:
            return
        self._last = now
        rate = size / max(now - self._start, 1e-9) / 1e6
        done = f" {100 * size / self._total:5.1f} %" if self._total else ""
        sys.stderr.write(
            f"\r{self._what}:{done} {entries:,} entries, {size / 1e6:,.1f} MB, {rate:,.1f} MB/s"
        )
        sys.stderr.flush()

    def done(self) -> None:
        if self._tty:
            sys.stderr.write("\n")
