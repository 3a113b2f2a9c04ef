"""The block log reads back what was appended, rebuilds a missing index, and refuses a log that
is cut short or disagrees with its index, naming its last whole block."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.core.primitives.errors import StoreError
from chain.storage.blocklog import HEADER_SIZE, BlockLog, BlockLogWriter

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
def test_log_cut_inside_an_entry_is_refused(tmp_path: Path, cut: int) -> None:
    """A log cut anywhere inside its last entry is refused, naming the last whole block."""
    path, payloads = tmp_path / "blocks.log", _payloads(5)
    offsets = _write(path, payloads)
    size = path.stat().st_size
    torn_at = offsets[-1] + cut if cut > 0 else size + cut
    with path.open("r+b") as f:
        f.truncate(torn_at)
    with pytest.raises(StoreError, match=f"block {FIRST + 3} is its last whole block"):
        BlockLog(path)


def test_log_cut_inside_an_earlier_entry_is_refused(tmp_path: Path) -> None:
    """A log cut mid-way, its index whole (a copy cut short), is refused; the index's count
    and the last whole block are in the one-line reason."""
    path, payloads = tmp_path / "blocks.log", _payloads(21)
    offsets = _write(path, payloads)
    with path.open("r+b") as f:
        f.truncate(offsets[15] + 7)
    with pytest.raises(StoreError, match=f"block {FIRST + 14} is its last whole block") as err:
        BlockLog(path)
    assert "\n" not in str(err.value)


def test_index_longer_than_the_log_is_refused(tmp_path: Path) -> None:
    """An index naming entries the log lost (cut at an entry boundary) is refused."""
    path, payloads = tmp_path / "blocks.log", _payloads(5)
    offsets = _write(path, payloads)
    with path.open("r+b") as f:
        f.truncate(offsets[3])
    with pytest.raises(StoreError, match=f"lists 5 blocks .* block {FIRST + 2} is its last"):
        BlockLog(path)


def test_index_shorter_than_the_log_is_refused(tmp_path: Path) -> None:
    """An index that names fewer entries than the log holds is not from the same export."""
    path, payloads = tmp_path / "blocks.log", _payloads(5)
    _write(path, payloads)
    index = _index(path)
    index.write_bytes(index.read_bytes()[: 2 * 8 + 3])  # two offsets and a torn third
    with pytest.raises(StoreError, match="holds 5 whole ones"):
        BlockLog(path)


def test_log_cut_inside_its_first_entry_is_refused(tmp_path: Path) -> None:
    """A log with its header and part of one entry holds no whole block: refused, not empty."""
    path = tmp_path / "blocks.log"
    _write(path, _payloads(1))
    _index(path).unlink()
    with path.open("r+b") as f:
        f.truncate(HEADER_SIZE + 5)
    with pytest.raises(StoreError, match="holds no whole block"):
        BlockLog(path)


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
