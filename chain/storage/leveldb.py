"""What the store needs of LevelDB beyond plyvel: a reader over one of its snapshots, the
text of the status it reports, and which process holds its lock (so that "in use" names it)."""

from __future__ import annotations

import fcntl
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import plyvel

from chain.core.primitives.errors import StoreError


def status_text(err: Exception) -> str:
    """plyvel passes LevelDB's status as bytes."""
    arg = err.args[0] if err.args else err
    return arg.decode(errors="replace") if isinstance(arg, bytes) else str(arg)


def lock_owner(directory: Path, reason: str) -> int | None:
    """The process holding LevelDB's lock on ``directory``: LevelDB takes a POSIX record
    lock on its LOCK file, whose holder F_GETLK names; a lock this process holds is
    invisible to F_GETLK, and LevelDB then says so itself. None where it cannot be told."""
    if "already held by process" in reason:
        return os.getpid()
    try:
        fd = os.open(directory / "LOCK", os.O_RDONLY)
    except OSError:
        return None
    try:
        # struct flock on Linux: l_type, l_whence (short), l_start, l_len (off_t), l_pid.
        layout = "hhqqi4x"
        probe = struct.pack(layout, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        kind, _, _, _, pid = struct.unpack(layout, fcntl.fcntl(fd, fcntl.F_GETLK, probe))
    except OSError:
        return None
    finally:
        os.close(fd)
    return int(pid) if kind != fcntl.F_UNLCK and pid > 0 else None


class FrozenReader:
    """A ``KVReader`` over a LevelDB snapshot (``BlockStore.frozen``); safe on any thread."""

    __slots__ = ("_snap",)

    def __init__(self, snap: Any) -> None:
        self._snap = snap

    def get(self, key: bytes) -> bytes | None:
        try:
            return self._snap.get(key)  # type: ignore[no-any-return]
        except (plyvel.Error, RuntimeError) as err:  # RuntimeError: the store was closed
            raise StoreError(f"read failed: {err}") from err

    def iterate(
        self, start: bytes, stop: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Entries with ``start <= key < stop``, in key order (from the last when
        ``reverse``: a page of table rows read downwards)."""
        try:
            with self._snap.iterator(start=start, stop=stop, reverse=reverse) as entries:
                yield from entries
        except (plyvel.Error, RuntimeError) as err:
            raise StoreError(f"iteration failed: {err}") from err

    def close(self) -> None:
        self._snap.close()
