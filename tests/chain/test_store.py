"""The block store keeps undo records only for reversible blocks, and indexes what it holds."""

from __future__ import annotations

from pathlib import Path

from chain import schema
from chain.actions import Transfer
from chain.testing import now_ms
from chain.types import AccountName
from genesis.testing import DevNet


def test_undo_records_and_header_states_are_pruned_at_lib(tmp_path: Path) -> None:
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    for _ in range(9):
        net.produce(chain)
    lib, head = chain.lib, chain.head.num
    assert 0 < lib < head
    store = chain.store
    undo = sorted(int.from_bytes(k[1:], "big") for k, _ in store.iterate(b"u", b"v"))
    assert undo == list(range(lib + 1, head + 1)), "undo records exist only above the LIB"
    for num in range(1, head + 1):
        block_id = store.block_id_at(num)
        assert block_id is not None and store.block(block_id) is not None
        has_state = store.get(schema.header_state_key(block_id)) is not None
        assert has_state == (num >= lib), f"header state of block {num}"


def test_transaction_index_points_at_the_block(tmp_path: Path) -> None:
    net = DevNet.create(1)
    chain = net.open(tmp_path)
    stx = net.tx(chain, Transfer(AccountName("alice"), AccountName("bob"), 3))
    chain.admit_transaction(stx, now_ms())
    block = net.produce(chain)
    assert chain.store.tx_block_num(stx.id) == block.num
    assert chain.transaction(stx.id) == (stx, block.num)
