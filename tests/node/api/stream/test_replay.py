"""The replay cache shared by stream sessions: bounded in bytes, by number only for a block
that extends the cursor, and emptied when the last replay ends."""

from __future__ import annotations

from pathlib import Path

from chain.core.consensus.block import SignedBlock
from chain.core.primitives.params import ChainParams
from genesis.testing import DevNet
from node.api.stream.replay import INDEX_WEIGHT, ReplayCache


def _blocks(tmp_path: Path, count: int) -> list[SignedBlock]:
    net = DevNet.create(1)
    chain = net.open(tmp_path)
    try:
        return [net.produce(chain) for _ in range(count)]
    finally:
        chain.store.close()


def test_the_cache_keeps_the_newest_blocks_within_its_bytes(tmp_path: Path) -> None:
    """Past its byte bound the least recently used blocks go first, and a block is handed out
    only to a cursor it extends."""
    blocks = _blocks(tmp_path, 6)
    weight = max(len(b.encode()) for b in blocks) * INDEX_WEIGHT
    cache = ReplayCache(ChainParams(), max_bytes=3 * weight)
    indexes = [cache.put(b, ()) for b in blocks]
    assert len(cache) <= 3 and cache.bytes <= cache.max_bytes
    last = blocks[-1]
    assert cache.get(last.num, last.header.previous) is indexes[-1]
    assert cache.get(last.num, last.id) is None, "not the parent named"
    assert cache.get(blocks[0].num, blocks[0].header.previous) is None, "dropped"
    assert cache.put(last, ()) is indexes[-1], "one index per block"


def test_the_last_replay_to_end_empties_the_cache(tmp_path: Path) -> None:
    """While one of two replays goes on the blocks stay; when the last ends they are gone."""
    blocks = _blocks(tmp_path, 2)
    cache = ReplayCache(ChainParams())
    cache.replay_started()
    cache.replay_started()
    cache.put(blocks[0], ())
    assert not cache.replay_ended() and len(cache) == 1
    assert cache.replay_ended() and len(cache) == 0 and cache.bytes == 0
