"""A block store that lost committed writes is refused on open, or rebuilt and checked: the
commit mark outside LevelDB says how far the store had committed."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.controller import Chain
from chain.core.consensus.block import SignedBlock
from chain.core.primitives.errors import StoreError
from chain.core.primitives.types import BlockId
from chain.storage.commit_mark import MARK_FILE, CommitMark, Mark
from chain.storage.store import BlockStore
from genesis.testing import DevNet


def _chain_of(net: DevNet, path: Path, blocks: int) -> tuple[BlockId, int]:
    """Produce ``blocks`` blocks into a store at ``path``, close it; (head id, LIB)."""
    chain = net.open(path)
    for _ in range(blocks):
        net.produce(chain)
    head, lib = chain.head.id, chain.lib
    chain.store.close()
    return head, lib


def _write_ahead_log(path: Path) -> Path:
    """The LevelDB log holding the latest writes (a small store never flushed it to tables)."""
    return max(path.glob("*.log"), key=lambda p: p.stat().st_size)


def test_store_whose_log_lost_its_tail_is_refused(tmp_path: Path) -> None:
    """A write-ahead log cut to half (what a power cut does to unsynced writes) makes the
    store open below its mark: refused in one line naming both heads, not a silent rewind."""
    net = DevNet.create(1)
    path = tmp_path / "blocks"
    _chain_of(net, path, 12)
    log = _write_ahead_log(path)
    with log.open("r+b") as f:
        f.truncate(log.stat().st_size // 2)
    with pytest.raises(StoreError, match=r"ends at block \d+ .* had committed block 12") as err:
        BlockStore(str(path))
    assert "\n" not in str(err.value)


def test_store_without_current_is_rebuilt_to_its_head(tmp_path: Path) -> None:
    """A store whose CURRENT file was deleted is rebuilt from its tables and logs, checked
    against its mark and state commitment, and opens at the same head: not a new chain."""
    net = DevNet.create(1)
    path = tmp_path / "blocks"
    head, lib = _chain_of(net, path, 12)
    (path / "CURRENT").unlink()
    chain = net.open(path)
    assert (chain.head.id, chain.lib) == (head, lib)
    chain.store.close()


def test_store_without_current_nor_mark_is_refused(tmp_path: Path) -> None:
    """A store that lost CURRENT and has no mark to check a rebuild against is refused, not
    replaced by an empty one."""
    net = DevNet.create(1)
    path = tmp_path / "blocks"
    _chain_of(net, path, 3)
    (path / "CURRENT").unlink()
    (path / MARK_FILE).unlink()
    with pytest.raises(StoreError, match="has no CURRENT file and no commit mark"):
        BlockStore(str(path))


def test_emptied_store_is_refused(tmp_path: Path) -> None:
    """A store directory whose LevelDB files are all gone but whose mark names a chain is
    refused rather than started afresh at block 0."""
    net = DevNet.create(1)
    path = tmp_path / "blocks"
    _chain_of(net, path, 3)
    for child in path.iterdir():
        if child.name != MARK_FILE:
            child.unlink()
    with pytest.raises(StoreError, match=r"is empty but held chain .* up to block 3"):
        BlockStore(str(path))


def _reversible_head(path: Path) -> tuple[Chain, SignedBlock]:
    """A chain of 5 blocks at ``path`` whose head is still reversible (three producers)."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain: Chain = net.open(path)
    for _ in range(5):
        net.produce(chain)
    head = chain.store.block(chain.head.id)
    assert head is not None and chain.lib < head.num
    return chain, head


def test_popped_blocks_lower_the_mark(tmp_path: Path) -> None:
    """A block popped (a fork switch) lowers the mark before the store, so the store reopens."""
    path = tmp_path / "blocks"
    chain, head = _reversible_head(path)
    chain.store.pop_block(head)
    chain.store.close()
    mark = CommitMark(path).read()
    assert mark is not None and mark.head == 4
    store = BlockStore(str(path))
    store.close()


def test_deferred_syncs_keep_the_mark_until_the_end(tmp_path: Path) -> None:
    """While syncs are deferred (a bulk import) the mark stays at the last synced head, and
    moves to the head once the closing synced write is done."""
    net = DevNet.create(1)
    path = tmp_path / "blocks"
    chain = net.open(path)
    net.produce(chain)
    mark = CommitMark(path)
    with chain.store.defer_sync():
        for _ in range(3):
            net.produce(chain)
        during = mark.read()
    after = mark.read()
    chain.store.close()
    assert during is not None and during.head == 1
    assert after is not None and after.head == 4


def test_damaged_mark_is_refused(tmp_path: Path) -> None:
    """A mark that fails its checksum is refused, with the way out in the one line."""
    net = DevNet.create(1)
    path = tmp_path / "blocks"
    _chain_of(net, path, 2)
    raw = bytearray((path / MARK_FILE).read_bytes())
    raw[-5] ^= 1
    (path / MARK_FILE).write_bytes(bytes(raw))
    with pytest.raises(StoreError, match="is damaged: delete it"):
        BlockStore(str(path))


def test_mark_round_trips(tmp_path: Path) -> None:
    """A written mark reads back as written; a store directory without one reads None."""
    mark = CommitMark(tmp_path)
    assert mark.read() is None
    written = Mark(bytes(range(32)), 7, 5)
    mark.write(written, durable=False)
    mark.close()
    assert CommitMark(tmp_path).read() == written


def test_a_pop_inside_deferred_syncs_still_lowers_the_mark(tmp_path: Path) -> None:
    """A fork switch inside a batch of catch-up (syncs deferred) lowers the mark before the
    pop, so a store killed right after it reopens (seen: a producer killed under load came
    back refused, its store at 70 under a mark of 71)."""
    path = tmp_path / "blocks"
    chain, head = _reversible_head(path)
    with pytest.raises(KeyboardInterrupt), chain.store.defer_sync():
        chain.store.pop_block(head)
        during = CommitMark(path).read()
        raise KeyboardInterrupt  # the batch ends here: its closing synced write never happens
    chain.store.close()
    assert during is not None and during.head == 4
    BlockStore(str(path)).close()
