"""Fork choice on the chain core: competing branches, a switch, and an exact state rewind."""

from __future__ import annotations

from pathlib import Path

from chain.actions import Transfer
from chain.testing import now_ms, state_dump
from chain.types import AccountName
from genesis.testing import DevNet

A, B, C = AccountName("alice"), AccountName("bob"), AccountName("carol")


def test_switch_to_branch_with_higher_lib_and_rewind_state_exactly(tmp_path: Path) -> None:
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

    results = [x.push_block(b, now_ms()) for b in y_blocks]
    assert all(not r.forked for r in results[:-1]), "x keeps its branch until y's LIB is higher"
    switch = results[-1]
    assert switch.popped == [x_block]
    assert switch.applied == y_blocks
    assert x.head.id == y.head.id
    assert x.lib == y.lib
    assert state_dump(x) == state_dump(y), "x's transfer to bob was rewound exactly"
    assert to_bob.id in x.mempool, "the abandoned transaction gets another chance"


def test_longer_branch_wins_when_lib_is_equal(tmp_path: Path) -> None:
    net = DevNet.create(1)
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    # One producer: every block is irreversible at once, so forks cannot happen; the rule
    # 'never revert past LIB' means the first branch seen stays.
    first = net.produce(x, x.head.slot + 1)
    y.push_block(first, now_ms())
    assert y.lib == 1 and y.head.id == first.id


def test_pop_block_restores_every_state_key(tmp_path: Path) -> None:
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
