"""Snapshot files for a node: write the LIB's state to one, verify one, start a store from
one, serve them to peers and fetch one from peers (state sync).

The format and its checks are ``chain.storage.snapshot``'s, the state sync protocol
``p2p.statesync.reactor``'s; this module adds files (written under a temporary name, fsynced, then
renamed, so a file with the final name is always whole), the progress reports, and the rules
for a data dir: a snapshot starts an empty store (or one holding the genesis only).
"""

from __future__ import annotations

import asyncio
import io
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

from chain.core.primitives.encoding import check_bytes, check_int, pack, unpack
from chain.core.primitives.errors import ChainError, SnapshotError
from chain.core.primitives.types import BlockId
from chain.storage.snapshot import (
    HEAD_PREFIX,
    SnapshotHead,
    SnapshotSummary,
    head_size,
    read_head,
    read_snapshot,
    write_snapshot,
)
from chain.storage.store import BlockStore
from p2p.statesync.fetch import chunk_length, manifest_root, offer_problem
from p2p.wire.messages import SnapshotOffer

log = structlog.get_logger("snapshots")

# The most snapshots offered to peers, the newest first; how many the directory keeps is the
# option snapshot-keep (node.snapshots.schedule prunes the rest).
MAX_OFFERED = 4

__all__ = [
    "FileDownload",
    "ProgressLine",
    "Report",
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
    """Read the whole file and check it (``chain.storage.snapshot``); SnapshotError says what is
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


def _not_trusted(head: SnapshotHead, trusted: BlockId) -> str:
    return (
        f"the snapshot is of block {head.num} ({head.block.id.hex()[:16]}…), "
        f"not of the trusted block {trusted.hex()[:16]}…"
    )


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
    """The snapshots in a node's snapshot directory, served to peers (``p2p.statesync.serving``).

    A file is offered once its chunk hashes are known: they are computed off the event loop
    the first time the file is seen and kept beside it (``NAME.chunks``), so that a restart
    does not hash it again. The newest snapshots are offered first.
    """

    def __init__(self, directory: Path, chunk_size: int) -> None:
        self.directory = directory
        self.chunk_size = chunk_size  # the option snapshot-chunk-bytes
        self._known: dict[BlockId, tuple[Path, SnapshotOffer, tuple[bytes, ...]]] = {}
        self._seen: set[Path] = set()

    def offers(self) -> list[SnapshotOffer]:
        known = sorted(self._known.values(), key=lambda k: k[1].block_id, reverse=True)
        return [offer for _, offer, _ in known[:MAX_OFFERED]]

    def manifest(self, block_id: BlockId) -> tuple[bytes, ...] | None:
        known = self._known.get(block_id)
        return None if known is None else known[2]

    async def chunk(self, block_id: BlockId, index: int) -> bytes | None:
        """Chunk ``index`` of the snapshot of ``block_id``; None if it is not served, or no
        longer: a file pruned (or cut) while it was served is forgotten, and the requester
        told so goes to other peers."""
        known = self._known.get(block_id)
        if known is None or not 0 <= index < len(known[2]):
            return None
        path, offer, _ = known
        try:
            data = await asyncio.to_thread(
                _read_range, path, index * offer.chunk_size, offer.chunk_size
            )
        except OSError as err:
            data, why = None, err.strerror
        else:
            why = "the file is shorter than its chunks"
        if data is None or len(data) != chunk_length(offer, index):
            log.info("snapshot_not_served", file=path.name, why=why)
            self._known.pop(block_id, None)
            self._seen.discard(path)
            return None
        return data

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
        stat = path.stat()
        # The hashes are reused only for the very file they were made of: same size and
        # modification time (a file rewritten with its size kept is hashed again).
        key = [self.chunk_size, stat.st_size, stat.st_mtime_ns]
        sidecar = path.with_name(path.name + ".chunks")
        hashes = _read_sidecar(sidecar, key, -(-stat.st_size // self.chunk_size))
        if hashes is None:
            hashes = tuple(_chunk_hashes(path, self.chunk_size))
            tmp = sidecar.with_name(sidecar.name + ".tmp")
            tmp.write_bytes(pack([*key, list(hashes)]))
            tmp.replace(sidecar)
        offer = SnapshotOffer(head.block.id, stat.st_size, self.chunk_size, manifest_root(hashes))
        return head.block.id, offer, hashes


def _read_sidecar(sidecar: Path, key: list[int], chunks: int) -> tuple[bytes, ...] | None:
    """The chunk hashes kept in ``sidecar`` if they were made for ``key``; else None."""
    try:
        raw = unpack(sidecar.read_bytes(), "chunk hashes")
        if raw[:3] != key or len(raw[3]) != chunks:
            return None
        return tuple(check_bytes(h, 32, "chunk hash") for h in raw[3])
    except (OSError, ChainError, IndexError, TypeError):
        return None  # none, an older format or damaged: hashed again


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
    it lacks; a download it cannot read back whole (killed while it was being reset, say)
    is started over. As soon as the chunks held from the first on cover the snapshot's head,
    ``head_id`` names its block, so that a snapshot of another block than the offer's is
    refused long before the whole file is in."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._offer: SnapshotOffer | None = None
        self._hashes: tuple[bytes, ...] = ()
        self._held: set[int] = set()
        self._prefix = 0  # chunks 0 .. _prefix - 1 are all held
        self._head: BlockId | None = None
        self._lock = asyncio.Lock()  # writes, starts and resets, one at a time
        try:
            self._load()
        except (ChainError, IndexError, TypeError, OSError) as err:
            log.warning("state_sync_download_discarded", why=str(err))
            self._offer, self._hashes, self._held = None, (), set()
            self._prefix, self._head = 0, None
            self._discard()

    @property
    def part(self) -> Path:
        return self.directory / "snapshot.part"

    def _load(self) -> None:
        manifest = self.directory / "manifest"
        if not manifest.exists():
            return
        raw = unpack(manifest.read_bytes(), "download manifest")
        offer = SnapshotOffer(
            BlockId(check_bytes(raw[0], 32, "block id")),
            check_int(raw[1], 1, 2**63, "size"),
            check_int(raw[2], 1, 2**63, "chunk size"),
            check_bytes(raw[3], 32, "root"),
        )
        hashes = tuple(check_bytes(h, 32, "chunk hash") for h in raw[4])
        _check_download(offer, hashes)
        if self.part.stat().st_size != offer.size:
            raise SnapshotError(f"{self.part.name} is not {offer.size} bytes long")
        held_file = self.directory / "held"
        indices = held_file.read_bytes() if held_file.exists() else b""
        claimed = {int.from_bytes(indices[i : i + 4], "big") for i in range(0, len(indices) - 3, 4)}
        self._offer, self._hashes = offer, hashes
        with self.part.open("rb") as f:
            for index in sorted(claimed):
                if index >= len(hashes):
                    continue
                f.seek(index * offer.chunk_size)
                if blake3(f.read(offer.chunk_size)).digest() == hashes[index]:
                    self._held.add(index)
        self._advance_prefix()
        self._head = self._read_head_id(offer)
        if self._head is not None and self._head != offer.block_id:
            raise SnapshotError(f"it is the snapshot of block {self._head.hex()[:16]}…")
        log.info("state_sync_resuming", held=len(self._held), of=len(hashes))

    def offer(self) -> SnapshotOffer | None:
        return self._offer

    def hashes(self) -> tuple[bytes, ...]:
        return self._hashes

    def held(self) -> set[int]:
        return self._held

    def head_id(self) -> BlockId | None:
        return self._head

    async def start(self, offer: SnapshotOffer, hashes: tuple[bytes, ...]) -> None:
        _check_download(offer, hashes)  # before a file of offer.size is made
        async with self._lock:
            if self._offer == offer:
                return
            await self._reset()

            def begin() -> None:
                self.directory.mkdir(parents=True, exist_ok=True)
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
            if self._offer is not offer:
                return  # reset (or restarted) while this waited: not this download's chunk
            await asyncio.to_thread(put)
            self._held.add(index)
            if self._head is None and index == self._prefix:
                self._advance_prefix()
                self._head = await asyncio.to_thread(self._read_head_id, offer)

    def _advance_prefix(self) -> None:
        while self._prefix in self._held:
            self._prefix += 1

    def _read_head_id(self, offer: SnapshotOffer) -> BlockId | None:
        """The block named by the head of the file, if the chunks held from the first on
        cover it; SnapshotError if they show it is no snapshot."""
        have = min(self._prefix * offer.chunk_size, offer.size)
        if have < HEAD_PREFIX:
            return None
        with self.part.open("rb") as f:
            need = head_size(f.read(HEAD_PREFIX))
            if have < need:
                return None
            f.seek(0)
            _, head = read_head(io.BytesIO(f.read(need)))
        return head.block.id

    async def finish(self) -> Path:
        offer = self._offer
        assert offer is not None
        verified = await asyncio.to_thread(verify_snapshot, self.part)
        if verified.head.block.id != offer.block_id:
            raise SnapshotError(_not_trusted(verified.head, offer.block_id))
        return self.part

    async def reset(self) -> None:
        async with self._lock:
            await self._reset()

    async def _reset(self) -> None:
        self._offer, self._hashes, self._held = None, (), set()
        self._prefix, self._head = 0, None
        await asyncio.to_thread(self._discard)

    def _discard(self) -> None:
        # The manifest goes first: a reset cut short leaves nothing that looks resumable.
        (self.directory / "manifest").unlink(missing_ok=True)
        shutil.rmtree(self.directory, ignore_errors=True)


def _check_download(offer: SnapshotOffer, hashes: tuple[bytes, ...]) -> None:
    """An offer and manifest sane enough to make a file of ``offer.size`` for."""
    problem = offer_problem(offer)
    if problem is not None:
        raise SnapshotError(f"snapshot offer refused: {problem}")
    if len(hashes) != offer.chunks:
        raise SnapshotError(
            f"a manifest of {len(hashes)} chunks for {offer.chunks} chunks of "
            f"{offer.chunk_size} bytes"
        )
