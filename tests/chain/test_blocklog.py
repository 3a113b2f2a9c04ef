"""The block log reads back what was appended and recovers, on open, from a crash's leftovers:
a torn last entry and an index that is missing, longer or shorter than the log."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.blocklog import HEADER_SIZE, BlockLog, BlockLogWriter
from chain.errors import StoreError

CHAIN_ID = bytes(range(32))
FIRST = 5
ENTRY_OVERHEAD = 4 + 8  # length before the bytes, own offset after them


def _payloads(n: int) -> list[bytes]:
    return [f"block {i} ".encode() * (i + 1) for i in range(n)]


def _write(path: Path, payloads: list[bytes]) -> list[int]:
    """Write a log; returns the offset of each entry."""
    writer = BlockLogWriter(path, CHAIN_ID, FIRST)
    offsets, offset = [], HEADER_SIZE
    for data in payloads:
        offsets.append(offset)
        writer.append(data)
        offset += len(data) + ENTRY_OVERHEAD
    writer.close()
    return offsets


def _index(path: Path) -> Path:
    return path.with_name(path.name + ".index")


def _read_all(path: Path) -> tuple[int, list[bytes], list[bytes]]:
    """(last number, every block by ``read``, every block by ``blocks``)."""
    log = BlockLog(path)
    try:
        by_read = [log.read(n) for n in range(FIRST, log.last + 1)]
        by_walk = [data for _, data in log.blocks()]
        return log.last, by_read, by_walk
    finally:
        log.close()


def test_reads_back_what_was_appended(tmp_path: Path) -> None:
    """Blocks come back by number and in order, from any start, with the chain id."""
    path, payloads = tmp_path / "blocks.log", _payloads(6)
    _write(path, payloads)
    log = BlockLog(path)
    assert (log.chain_id, log.first, log.last, len(log)) == (CHAIN_ID, FIRST, FIRST + 5, 6)
    assert [log.read(FIRST + i) for i in range(6)] == payloads
    assert list(log.blocks(FIRST + 4)) == [(FIRST + 4, payloads[4]), (FIRST + 5, payloads[5])]
    with pytest.raises(StoreError):
        log.read(FIRST + 6)
    log.close()


@pytest.mark.parametrize("cut", [1, 3, 4, 10, -8, -1], ids=lambda c: f"cut_at_{c}")
def test_torn_last_entry_is_dropped(tmp_path: Path, cut: int) -> None:
    """A log cut anywhere inside its last entry opens with the whole entries before it."""
    path, payloads = tmp_path / "blocks.log", _payloads(5)
    offsets = _write(path, payloads)
    size = path.stat().st_size
    torn_at = offsets[-1] + cut if cut > 0 else size + cut
    with path.open("r+b") as f:
        f.truncate(torn_at)
    assert _read_all(path) == (FIRST + 3, payloads[:4], payloads[:4])


def test_index_longer_than_the_log_is_rebuilt(tmp_path: Path) -> None:
    """An index naming entries the log lost (cut at an entry boundary) is not trusted."""
    path, payloads = tmp_path / "blocks.log", _payloads(5)
    offsets = _write(path, payloads)
    with path.open("r+b") as f:
        f.truncate(offsets[3])
    assert _read_all(path) == (FIRST + 2, payloads[:3], payloads[:3])


def test_index_shorter_than_the_log_is_rebuilt(tmp_path: Path) -> None:
    """Entries the index missed (the crash came before its write) are found by a scan."""
    path, payloads = tmp_path / "blocks.log", _payloads(5)
    _write(path, payloads)
    index = _index(path)
    index.write_bytes(index.read_bytes()[: 2 * 8 + 3])  # two offsets and a torn third
    assert _read_all(path) == (FIRST + 4, payloads, payloads)


def test_index_shorter_and_last_entry_torn(tmp_path: Path) -> None:
    """Both at once: the scan stops at the torn entry."""
    path, payloads = tmp_path / "blocks.log", _payloads(5)
    offsets = _write(path, payloads)
    with path.open("r+b") as f:
        f.truncate(offsets[-1] + 6)
    index = _index(path)
    index.write_bytes(index.read_bytes()[:16])
    assert _read_all(path) == (FIRST + 3, payloads[:4], payloads[:4])


def test_missing_index_is_rebuilt(tmp_path: Path) -> None:
    """A log without its index is read whole by scanning."""
    path, payloads = tmp_path / "blocks.log", _payloads(4)
    _write(path, payloads)
    _index(path).unlink()
    assert _read_all(path) == (FIRST + 3, payloads, payloads)


def test_not_a_block_log_is_refused(tmp_path: Path) -> None:
    """A file without the magic header is refused with our StoreError."""
    path = tmp_path / "other.bin"
    path.write_bytes(b"not a log at all, but long enough to hold a header")
    with pytest.raises(StoreError, match="not a BoR block log"):
        BlockLog(path)
