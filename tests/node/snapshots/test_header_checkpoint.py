"""The header checkpoint file: what is saved loads back as the chain followed; a damaged or
foreign file is dropped (the node follows from genesis again), never trusted."""

from __future__ import annotations

import asyncio
from pathlib import Path

from chain.core.header_chain import HeaderChain
from chain.testing import now_ms
from genesis.testing import DevNet
from node.snapshots.header_checkpoint import HeaderCheckpointFile
from tests.chain.core.test_header_chain import _follower, _headers


def _followed(net: DevNet, path: Path) -> HeaderChain:
    chain = net.open(path)
    for _ in range(8):
        net.produce(chain)
    follow = _follower(net)
    follow.extend(_headers(chain, 1, 8), now_ms())
    assert follow.lib > 0
    return follow


def test_a_saved_checkpoint_loads_back_and_a_damaged_one_is_dropped(tmp_path: Path) -> None:
    """Saved, the chain loads back at its LIB; with no file, None; a file with a byte
    changed, or kept for another chain, loads as None and is removed."""
    net = DevNet.create(3, blocks_per_turn=1)
    follow = _followed(net, tmp_path / "chain")
    kept = HeaderCheckpointFile(tmp_path / "state-sync-headers")
    assert kept.load(follow.params, follow.chain_id) is None
    asyncio.run(kept.save(follow.checkpoint()))
    loaded = kept.load(follow.params, follow.chain_id)
    assert loaded is not None and loaded.lib == follow.lib
    assert kept.load(follow.params, bytes(32)) is None, "another chain's"
    assert not kept.path.exists()
    asyncio.run(kept.save(follow.checkpoint()))
    raw = bytearray(kept.path.read_bytes())
    raw[-1] ^= 1
    kept.path.write_bytes(bytes(raw))
    assert kept.load(follow.params, follow.chain_id) is None
    assert not kept.path.exists()


def test_a_save_that_cannot_be_written_keeps_the_previous_checkpoint(tmp_path: Path) -> None:
    """A save whose write fails (its temporary file's place is taken by a directory) is
    logged, and the checkpoint saved before still loads."""
    net = DevNet.create(3, blocks_per_turn=1)
    follow = _followed(net, tmp_path / "chain")
    kept = HeaderCheckpointFile(tmp_path / "state-sync-headers")
    asyncio.run(kept.save(follow.checkpoint()))
    (tmp_path / "state-sync-headers.part").mkdir()
    asyncio.run(kept.save(follow.checkpoint()))
    loaded = kept.load(follow.params, follow.chain_id)
    assert loaded is not None and loaded.lib == follow.lib
