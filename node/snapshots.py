"""Snapshot files for a node: write the LIB's state to one, verify one, start a store from
one, serve them to peers and fetch one from peers (state sync).

The format and its checks are ``chain.snapshot``'s, the state sync protocol
``p2p.statesync``'s; this module adds files (written under a temporary name, fsynced, then
renamed, so a file with the final name is always whole), the progress reports, and the rules
for a data dir: a snapshot starts an empty store only.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from io import BufferedReader
from pathlib import Path

import structlog
from blake3 import blake3

from chain.encoding import pack, unpack
from chain.errors import ChainError, SnapshotError
from chain.snapshot import SnapshotHead, SnapshotSummary, read_head, read_snapshot, write_snapshot
from chain.store import BlockStore
from chain.types import BlockId
from p2p.messages import SnapshotOffer
from p2p.statesync import manifest_root

log = structlog.get_logger("snapshots")

__all__ = [
    "FileDownload",
    "ProgressLine",
    "SnapshotDir",
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


# --- state sync: the node's side ------------------------------------------------------------


def prune_snapshots(directory: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` snapshots (by block number) and their chunk hashes."""
    files = sorted(directory.glob("snapshot-*.bin"))  # the name starts with the block number
    for old in files[:-keep]:
        old.unlink(missing_ok=True)
        old.with_name(old.name + ".chunks").unlink(missing_ok=True)
        log.info("snapshot_pruned", file=old.name)


class SnapshotDir:
    """The snapshots in a node's snapshot directory, served to peers (``p2p.statesync``).

    A file is offered once its chunk hashes are known: they are computed off the event loop
    the first time the file is seen and kept beside it (``NAME.chunks``), so that a restart
    does not hash it again. The newest snapshots are offered first.
    """

    def __init__(self, directory: Path, chunk_size: int = 1 << 20, keep: int = 4) -> None:
        self.directory = directory
        self.chunk_size = chunk_size
        self.keep = keep
        self._known: dict[BlockId, tuple[Path, SnapshotOffer, tuple[bytes, ...]]] = {}
        self._seen: set[Path] = set()

    def offers(self) -> list[SnapshotOffer]:
        known = sorted(self._known.values(), key=lambda k: k[1].block_id, reverse=True)
        return [offer for _, offer, _ in known[: self.keep]]

    def manifest(self, block_id: BlockId) -> tuple[bytes, ...] | None:
        known = self._known.get(block_id)
        return None if known is None else known[2]

    async def chunk(self, block_id: BlockId, index: int) -> bytes | None:
        known = self._known.get(block_id)
        if known is None or index >= len(known[2]):
            return None
        return await asyncio.to_thread(
            _read_range, known[0], index * self.chunk_size, self.chunk_size
        )

    async def refresh(self) -> None:
        for block_id, (path, _, _) in list(self._known.items()):
            if not path.exists():  # pruned
                del self._known[block_id]
                self._seen.discard(path)
        if not self.directory.is_dir():
            return
        for path in sorted(self.directory.glob("snapshot-*.bin")):
            if path in self._seen:
                continue
            self._seen.add(path)
            try:
                block_id, offer, hashes = await asyncio.to_thread(self._describe, path)
            except (SnapshotError, OSError) as err:
                log.warning("snapshot_not_served", file=path.name, why=str(err))
                continue
            self._known[block_id] = (path, offer, hashes)
            log.info("snapshot_served", file=path.name, chunks=len(hashes))

    def _describe(self, path: Path) -> tuple[BlockId, SnapshotOffer, tuple[bytes, ...]]:
        head = read_snapshot_head(path)
        size = path.stat().st_size
        sidecar = path.with_name(path.name + ".chunks")
        hashes: tuple[bytes, ...] | None = None
        if sidecar.exists():
            raw = unpack(sidecar.read_bytes(), "chunk hashes")
            if raw[0] == self.chunk_size and raw[1] == size:
                hashes = tuple(raw[2])
        if hashes is None:
            hashes = tuple(_chunk_hashes(path, self.chunk_size))
            sidecar.write_bytes(pack([self.chunk_size, size, list(hashes)]))
        offer = SnapshotOffer(head.block.id, size, self.chunk_size, manifest_root(hashes))
        return head.block.id, offer, hashes


def _read_range(path: Path, offset: int, size: int) -> bytes:
    with path.open("rb") as f:
        f.seek(offset)
        return f.read(size)


def _chunk_hashes(path: Path, chunk_size: int) -> Iterator[bytes]:
    with path.open("rb") as f:
        while data := f.read(chunk_size):
            yield blake3(data).digest()


class FileDownload:
    """A snapshot being fetched, in ``directory``: the file (``snapshot.part``), the accepted
    offer and manifest (``manifest``), and the chunks written (``held``: one 4-byte index
    per chunk, appended once the chunk's bytes are on disk). After a kill -9 the next start
    reads these back and checks each held chunk against its hash, so it fetches only what
    it lacks."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._offer: SnapshotOffer | None = None
        self._hashes: tuple[bytes, ...] = ()
        self._held: set[int] = set()
        self._lock = asyncio.Lock()
        self._load()

    @property
    def part(self) -> Path:
        return self.directory / "snapshot.part"

    def _load(self) -> None:
        manifest = self.directory / "manifest"
        if not manifest.exists():
            return
        try:
            raw = unpack(manifest.read_bytes(), "download manifest")
            offer = SnapshotOffer(BlockId(raw[0]), raw[1], raw[2], raw[3])
            hashes = tuple(raw[4])
        except (ChainError, IndexError, TypeError) as err:
            log.warning("state_sync_download_unreadable", why=str(err))
            return
        self._offer, self._hashes = offer, hashes
        held_file = self.directory / "held"
        indices = held_file.read_bytes() if held_file.exists() else b""
        claimed = {int.from_bytes(indices[i : i + 4], "big") for i in range(0, len(indices) - 3, 4)}
        with self.part.open("rb") as f:
            for index in sorted(claimed):
                if index >= len(hashes):
                    continue
                f.seek(index * offer.chunk_size)
                if blake3(f.read(offer.chunk_size)).digest() == hashes[index]:
                    self._held.add(index)
        log.info("state_sync_resuming", held=len(self._held), of=len(hashes))

    def offer(self) -> SnapshotOffer | None:
        return self._offer

    def hashes(self) -> tuple[bytes, ...]:
        return self._hashes

    def held(self) -> set[int]:
        return self._held

    async def start(self, offer: SnapshotOffer, hashes: tuple[bytes, ...]) -> None:
        if self._offer == offer:
            return
        await self.reset()
        self.directory.mkdir(parents=True, exist_ok=True)

        def begin() -> None:
            with self.part.open("wb") as f:
                f.truncate(offer.size)
            (self.directory / "held").write_bytes(b"")
            record = [offer.block_id, offer.size, offer.chunk_size, offer.root, list(hashes)]
            tmp = self.directory / "manifest.tmp"
            tmp.write_bytes(pack(record))
            os.replace(tmp, self.directory / "manifest")

        await asyncio.to_thread(begin)
        self._offer, self._hashes = offer, hashes

    async def write(self, index: int, data: bytes) -> None:
        offer = self._offer
        assert offer is not None

        def put() -> None:
            fd = os.open(self.part, os.O_WRONLY)
            try:
                os.pwrite(fd, data, index * offer.chunk_size)
                os.fdatasync(fd)
            finally:
                os.close(fd)
            with (self.directory / "held").open("ab") as held:
                held.write(index.to_bytes(4, "big"))
                held.flush()
                os.fsync(held.fileno())

        async with self._lock:
            await asyncio.to_thread(put)
        self._held.add(index)

    async def finish(self) -> Path:
        await asyncio.to_thread(verify_snapshot, self.part)
        return self.part

    async def reset(self) -> None:
        self._offer, self._hashes, self._held = None, (), set()
        await asyncio.to_thread(shutil.rmtree, self.directory, True)
