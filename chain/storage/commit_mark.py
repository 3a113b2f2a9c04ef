"""The commit mark: how far the block store had committed, kept outside LevelDB.

LevelDB replays its write-ahead log on open and takes a log cut short (a power cut, a
damaged file) for a clean end: the store then opens at an older head without a word. The
mark is a small file in the store's directory naming the chain, the lowest head and the
LIB the store may hold; opening a store below its mark is an error, not a new start.

The mark is raised after each synced commit (a crash in between leaves it one commit low,
which is allowed) and lowered, synced, before a commit that lowers the head (a block popped
on a fork switch). It therefore never names more than the disk holds.

Here too: how a store directory is recognised (``holds_a_store``), so that a directory that
held a store is never replaced by an empty one, and the rebuild of one that lost ``CURRENT``.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import plyvel

from chain.core.primitives.errors import StoreError

MARK_FILE = "BOR-COMMITTED"
_MAGIC = b"BORMARK1"
_SIZE = len(_MAGIC) + 32 + 8 + 8 + 4


@dataclass(frozen=True, slots=True)
class Mark:
    """The chain a store holds, the lowest head it may be at and its LIB."""

    chain_id: bytes
    head: int
    lib: int

    def encode(self) -> bytes:
        body = _MAGIC + self.chain_id + self.head.to_bytes(8, "big") + self.lib.to_bytes(8, "big")
        return body + zlib.crc32(body).to_bytes(4, "big")


class CommitMark:
    """The mark file of one store directory; rewritten in place (one sector: 60 bytes)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / MARK_FILE
        self._fd: int | None = None

    def read(self) -> Mark | None:
        """The mark, or None where the store never wrote one (new, or written by an older
        BoR); StoreError if it cannot be read back."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            raise StoreError(f"cannot read {self.path}: {err.strerror}") from err
        body, crc = raw[:-4], raw[-4:]
        if (
            len(raw) != _SIZE
            or not raw.startswith(_MAGIC)
            or zlib.crc32(body) != int.from_bytes(crc, "big")
        ):
            raise StoreError(
                f"{self.path} is damaged: delete it to accept the block store as it is"
            )
        at = len(_MAGIC)
        return Mark(
            chain_id=body[at : at + 32],
            head=int.from_bytes(body[at + 32 : at + 40], "big"),
            lib=int.from_bytes(body[at + 40 : at + 48], "big"),
        )

    def write(self, mark: Mark, durable: bool) -> None:
        """Overwrite the mark; ``durable``: on disk before this returns (a lowered mark must
        be, or a crash could leave it above the store)."""
        try:
            if self._fd is None:
                created = not self.path.exists()
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                durable = durable or created
            os.pwrite(self._fd, mark.encode(), 0)
            if durable:
                os.fsync(self._fd)
                _fsync_dir(self.path.parent)
        except OSError as err:
            raise StoreError(f"cannot write {self.path}: {err.strerror}") from err

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _fsync_dir(directory: Path) -> None:
    """A new file's name survives a power cut only once its directory is synced."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def holds_a_store(directory: Path) -> bool:
    """Whether ``directory`` holds (or held) a store: LevelDB's files or a mark. LOCK and
    LOG alone are what a failed first open leaves."""
    try:
        names = [p.name for p in directory.iterdir()]
    except FileNotFoundError:
        return False
    except OSError as err:
        raise StoreError(f"cannot read {directory}: {err.strerror}") from err
    return any(
        name in ("CURRENT", MARK_FILE)
        or name.startswith("MANIFEST-")
        or name.endswith((".ldb", ".sst", ".log"))
        for name in names
    )


def rebuild(directory: Path) -> None:
    """Rebuild a store that lost its ``CURRENT`` (the name of its manifest) from its tables
    and logs (LevelDB's RepairDB). Only a store with a mark is rebuilt: the mark, and the
    state commitment the caller checks next, tell whether the rebuild holds what it
    committed (without ``CURRENT``, LevelDB would start an empty store and delete the rest)."""
    if not (directory / MARK_FILE).exists():
        raise StoreError(
            f"the block store at {directory} has no CURRENT file and no commit mark: a rebuilt "
            "store could not be checked; move the data dir away and sync or import again"
        )
    try:
        plyvel.repair_db(str(directory))
    except (plyvel.Error, OSError) as err:
        arg = err.args[0] if err.args else err
        reason = arg.decode(errors="replace") if isinstance(arg, bytes) else str(arg)
        raise StoreError(
            f"the block store at {directory} has no CURRENT file and LevelDB could not rebuild "
            f"it ({reason}): move the data dir away and sync or import again"
        ) from err
