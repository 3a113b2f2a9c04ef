"""The encoded-block cache: number -> id of our chain's recent blocks across forks, and
JSON made once whose ``irreversible`` flag follows the LIB."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from chain.core.consensus.block import SignedBlock
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import BlockId, BlockNum
from chain.events import BlockStep
from chain.view import ChainView
from genesis.testing import DevNet
from node.api import blockcache
from node.api.blockcache import BlockJsonCache
from node.api.views import block_json

Blocks = list[SignedBlock]
PARAMS = ChainParams()  # the devnet's token: BOR, 4 decimals


def _blocks(tmp_path: Path, name: str, count: int, net: DevNet, gap: int = 1) -> Blocks:
    """``count`` blocks on a fresh chain; after the first, ``gap`` slots apart."""
    chain = net.open(tmp_path / name)
    try:
        blocks = [net.produce(chain)]
        blocks += [net.produce(chain, chain.head.slot + gap) for _ in range(count - 1)]
        return blocks
    finally:
        chain.store.close()


def _applied(blocks: Blocks) -> list[BlockStep]:
    return [BlockStep(b) for b in blocks]


def _at(tmp_path: Path, net: DevNet, head: SignedBlock, lib: int) -> ChainView:
    """A view whose head is ``head`` and whose LIB is ``lib``."""
    chain = net.open(tmp_path / "view")
    try:
        view = chain.view()
    finally:
        chain.store.close()
    at_head = replace(view.head, id=head.id, num=BlockNum(head.num))
    return replace(view, head=at_head, lib_num=BlockNum(lib))


def test_encoded_json_equals_fresh_json_either_side_of_the_lib(tmp_path: Path) -> None:
    """The cached bytes parse to exactly what ``block_json`` makes, flag and all."""
    blocks = _blocks(tmp_path, "a", 2, DevNet.create(1))
    cache = BlockJsonCache(PARAMS)
    block = blocks[1]
    for lib in (1, 2, 1):
        assert json.loads(cache.encode(block, lib)) == block_json(block, lib, PARAMS)
        assert json.loads(cache.encoded(block.id, lib) or b"") == block_json(block, lib, PARAMS)


def test_a_fork_switch_replaces_the_recent_numbers(tmp_path: Path) -> None:
    """After a fork switch pops our blocks and applies another branch at the same numbers,
    numbers map to the new branch, none above its head stays mapped, and the popped
    blocks' JSON is gone (it would call them irreversible once the LIB passed them)."""
    net = DevNet.create(1)
    ours = _blocks(tmp_path, "ours", 3, net)
    theirs = _blocks(tmp_path, "theirs", 2, net, gap=2)  # forks after block 1
    assert theirs[0].id == ours[0].id and theirs[1].id != ours[1].id
    cache = BlockJsonCache(PARAMS)
    cache.follow(_applied(ours))
    for block in ours:
        cache.encode(block, 0)
    at_ours = _at(tmp_path, net, ours[2], 0)
    assert [cache.id_at(n, at_ours) for n in (1, 2, 3)] == [b.id for b in ours]
    cache.follow(
        [BlockStep(ours[2], undo=True), BlockStep(ours[1], undo=True), *_applied(theirs[1:])]
    )
    at_theirs = _at(tmp_path, net, theirs[1], 0)
    assert cache.id_at(2, at_theirs) == theirs[1].id
    assert cache.id_at(3, at_theirs) is None
    assert cache.recent(ours[2].id) is None
    assert cache.encoded(ours[1].id, 3) is None and cache.encoded(ours[2].id, 3) is None
    assert cache.encoded(ours[0].id, 3) is not None


def test_blocks_popped_alone_leave_the_head_at_their_parent(tmp_path: Path) -> None:
    """An update that only pops blocks leaves their numbers unmapped and the map trusted at
    the parent of the lowest one."""
    net = DevNet.create(1)
    blocks = _blocks(tmp_path, "a", 3, net)
    cache = BlockJsonCache(PARAMS)
    cache.follow(_applied(blocks))
    cache.follow([BlockStep(blocks[2], undo=True)])
    at_parent = _at(tmp_path, net, blocks[1], 0)
    assert [cache.id_at(n, at_parent) for n in (1, 2, 3)] == [blocks[0].id, blocks[1].id, None]


def test_numbers_are_not_trusted_while_the_head_is_unknown(tmp_path: Path) -> None:
    """Until the blocks up to the view's head have been handed over, recent numbers are not
    answered from the map (it may still hold an abandoned branch)."""
    net = DevNet.create(1)
    blocks = _blocks(tmp_path, "a", 3, net)
    cache = BlockJsonCache(PARAMS)
    cache.follow(_applied(blocks[:2]))
    assert cache.id_at(1, _at(tmp_path, net, blocks[2], 0)) is None
    assert cache.id_at(1, _at(tmp_path, net, blocks[1], 0)) == blocks[0].id


def test_irreversible_numbers_are_kept_once_learnt(tmp_path: Path) -> None:
    """A number at or below the LIB keeps its id whatever the recent map holds; a reversible
    one is never learnt."""
    net = DevNet.create(1)
    blocks = _blocks(tmp_path, "a", 2, net)
    cache = BlockJsonCache(PARAMS)
    cache.learn(1, blocks[0].id, lib=1)
    cache.learn(2, blocks[1].id, lib=1)
    view = _at(tmp_path, net, blocks[1], 1)
    unknown_head = replace(view, head=replace(view.head, id=BlockId(bytes(32))))
    assert cache.id_at(1, unknown_head) == blocks[0].id
    assert cache.id_at(2, unknown_head) is None


def test_only_the_last_recent_blocks_numbers_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``RECENT_BLOCKS``, the oldest numbers are dropped, whether they came in an
    earlier call or earlier in the same one."""
    monkeypatch.setattr(blockcache, "RECENT_BLOCKS", 3)
    net = DevNet.create(1)
    blocks = _blocks(tmp_path, "a", 7, net)
    cache = BlockJsonCache(PARAMS)
    cache.follow(_applied(blocks[:2]))
    cache.follow(_applied(blocks[2:]))
    at_head = _at(tmp_path, net, blocks[-1], 0)
    assert [cache.id_at(n, at_head) for n in range(1, 8)] == [None] * 4 + [b.id for b in blocks[4:]]


def test_recent_blocks_are_bounded_in_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``RECENT_BYTES`` of block encodings, the oldest numbers are dropped, and the head
    is kept even when it alone is over the bound."""
    net = DevNet.create(1)
    blocks = _blocks(tmp_path, "a", 5, net)
    size = max(len(b.encode()) for b in blocks)
    monkeypatch.setattr(blockcache, "RECENT_BYTES", 2 * size + size // 2)
    cache = BlockJsonCache(PARAMS)
    cache.follow(_applied(blocks))
    at_head = _at(tmp_path, net, blocks[-1], 0)
    assert [cache.id_at(n, at_head) for n in range(1, 6)] == [None] * 3 + [b.id for b in blocks[3:]]
    monkeypatch.setattr(blockcache, "RECENT_BYTES", 1)
    cache.follow([BlockStep(blocks[-1], undo=True), BlockStep(blocks[-1])])
    assert [cache.id_at(n, at_head) for n in range(1, 6)] == [None] * 4 + [blocks[-1].id]


def test_encoded_json_is_bounded_in_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``ENCODED_BYTES`` of JSON, the least recently served blocks' JSON is dropped,
    and the one just encoded is kept even when it alone is over the bound."""
    blocks = _blocks(tmp_path, "a", 4, DevNet.create(1))
    size = max(blockcache.encode_block(b, PARAMS).size for b in blocks)
    monkeypatch.setattr(blockcache, "ENCODED_BYTES", 2 * size + size // 2)
    cache = BlockJsonCache(PARAMS)
    for block in blocks[:3]:
        cache.encode(block, 0)
    cache.encoded(blocks[1].id, 0)  # served again: now the most recent
    cache.encode(blocks[3], 0)
    assert [cache.encoded(b.id, 0) is not None for b in blocks] == [False, True, False, True]
    monkeypatch.setattr(blockcache, "ENCODED_BYTES", 1)
    cache.encode(blocks[0], 0)
    assert [cache.encoded(b.id, 0) is not None for b in blocks] == [True, False, False, False]
