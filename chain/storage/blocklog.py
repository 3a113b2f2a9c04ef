"""The portable history file: an append-only block log with an index, after EOSIO's
blocks.log.

``FILE`` holds a header (magic, version, chain id, first block number) and then, per block,
``length (4) || canonical block bytes || offset of this entry (8)``; the trailing offsets
make the log walkable from its end and let a reader find the last whole entry after a
crash. ``FILE.index`` holds one 8-byte offset per block, so block n is found at once. A
reader walks the whole log on open and refuses it unless it ends with a whole entry and
agrees with its index (when there is one).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from chain.core.primitives.errors import StoreError

MAGIC = b"BORLOG\x00\x01"
HEADER_SIZE = len(MAGIC) + 32 + 4
_ENTRY_OVERHEAD = 4 + 8


def index_path(path: Path) -> Path:
    """Where the index of the block log ``path`` is."""
    return path.with_name(path.name + ".index")


class BlockLogWriter:
    """Appends blocks to a new log (``first`` is the number of the first block)."""

    def __init__(self, path: Path, chain_id: bytes, first: int = 1) -> None:
        self.path = path
        self.next_num = first
        self._log = path.open("wb")
        self._index = index_path(path).open("wb")
        self._log.write(MAGIC + chain_id + first.to_bytes(4, "big"))
        self._offset = HEADER_SIZE

    def append(self, block_bytes: bytes) -> None:
        offset = self._offset
        self._log.write(
            len(block_bytes).to_bytes(4, "big") + block_bytes + offset.to_bytes(8, "big")
        )
        self._index.write(offset.to_bytes(8, "big"))
        self._offset += len(block_bytes) + _ENTRY_OVERHEAD
        self.next_num += 1

    def close(self) -> None:
        for f in (self._log, self._index):
            f.flush()
            os.fsync(f.fileno())
            f.close()


class BlockLog:
    """Reads a block log, checked whole on open: refuses a cut or damaged one (StoreError)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._file = path.open("rb")
        except OSError as err:
            raise StoreError(f"cannot open block log {path}: {err.strerror}") from err
        header = self._file.read(HEADER_SIZE)
        if len(header) != HEADER_SIZE or not header.startswith(MAGIC):
            raise StoreError(f"{path} is not a BoR block log")
        self.chain_id = header[len(MAGIC) : len(MAGIC) + 32]
        self.first = int.from_bytes(header[-4:], "big")
        self._offsets = self._load_index()

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def last(self) -> int:
        return self.first + len(self._offsets) - 1

    def _load_index(self) -> list[int]:
        """The offset of every entry, each one checked. A history file is written whole and
        synced once (``BlockLogWriter.close``), so a file that ends inside an entry, or
        whose index names other entries than the file holds, is a damaged copy: importing
        what it holds would end the chain early without a word. The index may be missing:
        the walk stands in for it."""
        size = self.path.stat().st_size
        offsets = self._scan(size)
        last = self.first + len(offsets) - 1
        whole = f"block {last} is its last whole block" if offsets else "it holds no whole block"
        if (self._entry_end(offsets[-1]) if offsets else HEADER_SIZE) != size:
            raise StoreError(f"{self.path} is cut short or damaged after its entries: {whole}")
        index = index_path(self.path)
        try:
            raw = index.read_bytes()
        except FileNotFoundError:
            return offsets
        except OSError as err:
            raise StoreError(f"cannot read {index}: {err.strerror}") from err
        listed = [int.from_bytes(raw[i : i + 8], "big") for i in range(0, len(raw), 8)]
        if len(raw) % 8 or listed != offsets:
            raise StoreError(
                f"{index.name} lists {len(raw) // 8} blocks but {self.path} holds "
                f"{len(offsets)} whole ones: {whole} (a truncated copy? the index and the "
                "file must come from the same export)"
            )
        return offsets

    def _entry_end(self, offset: int) -> int:
        self._file.seek(offset)
        length = int.from_bytes(self._file.read(4), "big")
        return offset + 4 + length + 8

    def _entry_ok(self, offset: int, size: int) -> bool:
        if offset + 4 > size:
            return False
        end = self._entry_end(offset)
        if end > size:
            return False
        self._file.seek(end - 8)
        return int.from_bytes(self._file.read(8), "big") == offset

    def _scan(self, size: int) -> list[int]:
        """The offsets found by walking the log; stops at the first entry that is not whole."""
        offsets: list[int] = []
        offset = HEADER_SIZE
        while offset < size and self._entry_ok(offset, size):
            offsets.append(offset)
            offset = self._entry_end(offset)
        return offsets

    def read(self, num: int) -> bytes:
        if not self.first <= num <= self.last:
            raise StoreError(f"block {num} is not in {self.path} ({self.first}..{self.last})")
        offset = self._offsets[num - self.first]
        self._file.seek(offset)
        length = int.from_bytes(self._file.read(4), "big")
        return self._file.read(length)

    def blocks(self, start: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(number, bytes) from ``start`` (default: the first block) to the end."""
        num = self.first if start is None else max(start, self.first)
        if num > self.last:
            return
        self._file.seek(self._offsets[num - self.first])
        while num <= self.last:
            length = int.from_bytes(self._file.read(4), "big")
            data = self._file.read(length)
            self._file.read(8)
            yield num, data
            num += 1

    def close(self) -> None:
        self._file.close()
