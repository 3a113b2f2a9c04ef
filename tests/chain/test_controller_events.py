"""The chain's record of what each call changed (``Chain.take_events``), in order."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from chain.controller import Chain
from chain.core.consensus.block import SignedBlock
from chain.core.execution.actions import Transfer
from chain.core.primitives.errors import InvalidBlock
from chain.core.primitives.types import AccountName
from chain.events import NO_EVENTS, BlockStep
from chain.testing import now_ms
from genesis.testing import DevNet

A, B, C = AccountName("alice"), AccountName("bob"), AccountName("carol")


def _forked(tmp_path: Path) -> tuple[DevNet, Chain, SignedBlock, list[SignedBlock]]:
    """x with a block of its own (a transfer to bob) and y's rival branch of three blocks,
    the first with a transfer to carol, which has the higher LIB once x holds all three."""
    net = DevNet.create(3, blocks_per_turn=1)
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    for _ in range(3):
        y.push_block(net.produce(x), now_ms())
    base_slot = x.head.slot
    x.admit_transaction(net.tx(x, Transfer(A, B, 100)), now_ms())
    x_block = net.produce(x, base_slot + 1)
    y.admit_transaction(net.tx(y, Transfer(A, C, 7)), now_ms())
    y_blocks = [net.produce(y, base_slot + 2 + i) for i in range(3)]
    x.take_events()
    return net, x, x_block, y_blocks


def test_nothing_changed_is_no_events(tmp_path: Path) -> None:
    """A call that changes nothing leaves NO_EVENTS, and taking the events forgets them."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    assert chain.take_events() is NO_EVENTS
    block = net.produce(chain)
    events = chain.take_events()
    assert events.steps == (BlockStep(block),) and events.produced is block
    assert chain.take_events() is NO_EVENTS
    chain.push_block(block, now_ms())  # a duplicate
    assert chain.take_events() is NO_EVENTS


def test_a_peer_block_is_applied_not_produced(tmp_path: Path) -> None:
    """A block pushed from a peer is an applied step, with no produced block."""
    net = DevNet.create(3, blocks_per_turn=1)
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    block = net.produce(x)
    y.take_events()  # y records from here on, as on the chain thread
    y.push_block(block, now_ms())
    events = y.take_events()
    assert events.applied == [block] and events.popped == [] and events.produced is None


def test_a_fork_switch_pops_highest_first_then_applies_lowest_first(tmp_path: Path) -> None:
    """A fork switch is recorded as its popped blocks, highest first, then the new branch,
    lowest first, with the abandoned transaction requeued."""
    _, x, x_block, y_blocks = _forked(tmp_path)
    for block in y_blocks[:2]:
        x.push_block(block, now_ms())
    assert x.take_events() is NO_EVENTS, "y's first two blocks do not beat x's branch yet"
    x.push_block(y_blocks[2], now_ms())
    events = x.take_events()
    assert events.steps == (
        BlockStep(x_block, undo=True),
        *(BlockStep(b) for b in y_blocks),
    )
    assert [t.id for t in events.requeued] == [t.id for t in x_block.transactions]
    assert events.produced is None


def test_a_longer_pop_is_recorded_highest_first(tmp_path: Path) -> None:
    """Two blocks of ours popped by a switch are recorded head first, then its parent."""
    net = DevNet.create(3, blocks_per_turn=1)
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    for _ in range(3):
        y.push_block(net.produce(x), now_ms())
    slot = x.head.slot
    ours = [net.produce(x, slot + 1), net.produce(x, slot + 2)]
    theirs = [net.produce(y, slot + 3 + i) for i in range(4)]
    x.take_events()
    steps: list[BlockStep] = []
    for block in theirs:
        x.push_block(block, now_ms())
        steps.extend(x.take_events().steps)
    assert x.head.id == theirs[-1].id
    assert steps == [*(BlockStep(b, undo=True) for b in ours[::-1]), *map(BlockStep, theirs)]


def test_an_invalid_block_in_a_switch_is_recorded_with_the_way_back(tmp_path: Path) -> None:
    """A switch that meets an invalid block records every step it took: our block popped,
    the rival's valid blocks applied, then popped again, and our block applied again."""
    net, x, x_block, y_blocks = _forked(tmp_path)
    for block in y_blocks[:2]:
        x.push_block(block, now_ms())
    last = y_blocks[2]
    header = dataclasses.replace(last.header, state_root=b"\x01" * 32)
    forged = SignedBlock.sign(header, last.transactions, x.chain_id, net.keys[header.producer])
    with pytest.raises(InvalidBlock):
        x.push_block(forged, now_ms())
    events = x.take_events()
    first, second = y_blocks[:2]
    assert events.steps == (
        BlockStep(x_block, undo=True),
        BlockStep(first),
        BlockStep(second),
        BlockStep(second, undo=True),
        BlockStep(first, undo=True),
        BlockStep(x_block),
    )
    assert x.head.id == x_block.id
    assert [t.id for t in events.requeued] == [t.id for t in first.transactions]


def test_a_chain_whose_events_nobody_takes_holds_none(tmp_path: Path) -> None:
    """Until events are first taken (the chain thread does at once), nothing is recorded: an
    offline import that never takes them does not keep every block it applied."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    for _ in range(5):
        net.produce(chain)
    assert chain.take_events() is NO_EVENTS
    block = net.produce(chain)
    assert chain.take_events().steps == (BlockStep(block),)
