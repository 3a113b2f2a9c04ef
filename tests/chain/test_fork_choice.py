"""Fork choice on the chain core: competing branches, a switch, and an exact state rewind."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.controller import Pushed
from chain.core.execution.actions import Transfer
from chain.core.primitives.errors import StaleBlock
from chain.core.primitives.types import AccountName
from chain.events import NO_EVENTS
from chain.testing import now_ms, state_dump
from genesis.testing import DevNet

A, B, C = AccountName("alice"), AccountName("bob"), AccountName("carol")


def test_switch_to_branch_with_higher_lib_and_rewind_state_exactly(tmp_path: Path) -> None:
    """A node switches to a branch once it has the higher LIB, popping its own block, rewinding its
    state exactly and requeueing the dropped transaction."""
    net = DevNet.create(3, blocks_per_turn=1)
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    for _ in range(3):  # a common history, produced on x and relayed to y
        y.push_block(net.produce(x), now_ms())
    fork_point = x.head
    base_slot = fork_point.slot

    # x: one block at the next slot, with a transfer to bob.
    to_bob = net.tx(x, Transfer(A, B, 100))
    x.admit_transaction(to_bob, now_ms())
    x_block = net.produce(x, base_slot + 1)
    assert x.account(B).balance == y.account(B).balance + 100

    # y: misses that slot and builds three blocks, with a transfer to carol.
    y.admit_transaction(net.tx(y, Transfer(A, C, 7)), now_ms())
    y_blocks = [net.produce(y, base_slot + 2 + i) for i in range(3)]
    assert y.lib > x.lib  # three more producers built on y's branch

    x.take_events()
    verdicts = [x.push_block(b, now_ms()) for b in y_blocks[:-1]]
    assert verdicts == [Pushed.ADDED] * 2, "x keeps its branch until y's LIB is higher"
    assert x.take_events() is NO_EVENTS
    assert x.push_block(y_blocks[-1], now_ms()) is Pushed.APPLIED
    switch = x.take_events()
    assert switch.popped == [x_block]
    assert switch.applied == y_blocks
    assert x.head.id == y.head.id
    assert x.lib == y.lib
    assert state_dump(x) == state_dump(y), "x's transfer to bob was rewound exactly"
    assert to_bob.id in x.mempool, "the abandoned transaction gets another chance"


def test_longer_branch_wins_when_lib_is_equal(tmp_path: Path) -> None:
    """Two branches at the same LIB: the longer one wins and the shorter one is rewound."""
    net = DevNet.create(3, blocks_per_turn=1)
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    for _ in range(3):  # all three produce once: block 1 becomes irreversible on both
        y.push_block(net.produce(x), now_ms())
    assert x.lib == y.lib == 1
    # A block by block 1's producer would move the LIB; both branches leave that producer out.
    laggard = x.block_by_num(1).header.producer
    slots = [
        s
        for s in range(x.head.slot + 1, x.head.slot + 10)
        if x.head.scheduled(s, x.params)[0] != laggard
    ]

    x.admit_transaction(net.tx(x, Transfer(A, B, 100)), now_ms())
    x_block = net.produce(x, slots[0])  # x: one block
    y.admit_transaction(net.tx(y, Transfer(A, C, 7)), now_ms())
    y_blocks = [net.produce(y, slot) for slot in slots[1:3]]  # y: two blocks, later slots
    assert x.lib == y.lib == 1, "neither branch moves the LIB"

    x.take_events()
    # At equal length the tie-break may or may not take y's first block; the second, making
    # y's branch longer, decides either way.
    x.push_block(y_blocks[0], now_ms())
    assert x.push_block(y_blocks[1], now_ms()) is Pushed.APPLIED, "the longer branch decides"
    events = x.take_events()
    assert events.popped == [x_block]
    assert events.applied == y_blocks
    assert x.head.id == y.head.id and x.lib == 1
    assert state_dump(x) == state_dump(y), "x's transfer to bob was rewound exactly"


def test_first_branch_seen_stays_when_every_block_is_irreversible(tmp_path: Path) -> None:
    """With one producer every block is irreversible at once, so no later branch replaces it."""
    net = DevNet.create(1)
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    first = net.produce(x, x.head.slot + 1)
    y.push_block(first, now_ms())
    assert y.lib == 1 and y.head.id == first.id
    rival = net.produce(y, first.header.slot + 1)  # y builds on; x builds a rival instead
    x.admit_transaction(net.tx(x, Transfer(A, B, 1)), now_ms())
    net.produce(x, first.header.slot + 2)
    with pytest.raises(StaleBlock):
        x.push_block(rival, now_ms())


def test_pop_block_restores_every_state_key(tmp_path: Path) -> None:
    """Popping a block restores every state key, drops its transaction index entries and moves the
    head back to its parent."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    net.produce(chain)
    before = state_dump(chain)
    chain.admit_transaction(net.tx(chain, Transfer(A, B, 9)), now_ms())
    block = net.produce(chain)
    assert state_dump(chain) != before
    chain.store.pop_block(block)
    assert state_dump(chain) == before
    assert chain.store.tx_block_num(block.transactions[0].id) is None
    assert chain.store.head_id() == block.header.previous


def test_a_block_abandoned_after_a_restart_gives_its_transactions_another_chance(
    tmp_path: Path,
) -> None:
    """As above, but x restarts between producing its block and switching branches: the
    abandoned transfer still goes back to the mempool (its block is in x's store)."""
    net = DevNet.create(3, blocks_per_turn=1)
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    for _ in range(3):
        y.push_block(net.produce(x), now_ms())
    base_slot = x.head.slot
    to_bob = net.tx(x, Transfer(A, B, 100))
    x.admit_transaction(to_bob, now_ms())
    x_block = net.produce(x, base_slot + 1)
    y_blocks = [net.produce(y, base_slot + 2 + i) for i in range(3)]
    x.store.close()
    x = net.open(tmp_path / "x")  # the node restarts: its signer key cache is empty
    x.take_events()
    for b in y_blocks:
        x.push_block(b, now_ms())
    events = x.take_events()
    assert events.popped == [x_block]
    assert to_bob.id in x.mempool, "the abandoned transaction gets another chance"
    assert [t.id for t in events.requeued] == [to_bob.id], "and is reported to be relayed"


def test_an_abandoned_transaction_that_no_longer_fits_the_mempool_is_dropped(
    tmp_path: Path,
) -> None:
    """A transaction of a popped block that would pass the mempool's byte bound (filled since
    by another account) is dropped, not requeued, and the branch switch goes through."""
    net = DevNet.create(3, blocks_per_turn=1)
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    for _ in range(3):
        y.push_block(net.produce(x), now_ms())
    base_slot = x.head.slot
    to_bob = net.tx(x, Transfer(A, B, 100))
    x.admit_transaction(to_bob, now_ms())
    x_block = net.produce(x, base_slot + 1)
    y_blocks = [net.produce(y, base_slot + 2 + i) for i in range(3)]
    filler = net.tx(x, Transfer(C, B, 1, "f" * 200))
    x.mempool.max_bytes = x.mempool.max_account_bytes = filler.size + to_bob.size - 1
    x.admit_transaction(filler, now_ms())
    x.take_events()
    for b in y_blocks:
        x.push_block(b, now_ms())
    events = x.take_events()
    assert events.popped == [x_block] and x.head.id == y.head.id
    assert to_bob.id not in x.mempool and events.requeued == ()
    assert list(p.tx.id for p in x.mempool.pending()) == [filler.id]
