"""Block validation in the chain manager: every rule rejects a forged block, keeps state."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from chain.controller import Chain, Pushed
from chain.core.consensus.block import BlockHeader, SignedBlock
from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.errors import (
    DoubleSign,
    DuplicateTransaction,
    InvalidBlock,
    MissingAuthority,
    StaleBlock,
    UnlinkableBlock,
)
from chain.core.primitives.merkle import merkle_root
from chain.core.primitives.params import slot_of_ms
from chain.core.primitives.types import AccountName, BlockId
from chain.testing import now_ms, state_dump
from genesis.testing import DevNet

A, B = AccountName("alice"), AccountName("bob")


@pytest.fixture
def net() -> DevNet:
    return DevNet.create(3, blocks_per_turn=1)


def _pair(net: DevNet, tmp_path: Path) -> tuple[Chain, Chain]:
    return net.open(tmp_path / "x"), net.open(tmp_path / "y")


def _forge(
    net: DevNet,
    chain: Chain,
    txs: tuple[SignedTransaction, ...] = (),
    *,
    slot: int | None = None,
    **changes: object,
) -> SignedBlock:
    """A block on ``chain``'s head signed by the slot's producer, with fields overridden."""
    slot = chain.head.slot + 1 if slot is None else slot
    producer, _ = chain.head.scheduled(slot, chain.params)
    header = BlockHeader(
        num=chain.head.num + 1,  # type: ignore[arg-type]
        previous=chain.head.id,
        slot=slot,
        producer=producer,
        schedule_version=chain.head.active.version,
        tx_root=merkle_root([t.id for t in txs]),
        state_root=b"\x00" * 32,
    )
    header = dataclasses.replace(header, **changes)  # type: ignore[arg-type]
    return SignedBlock.sign(header, txs, chain.chain_id, net.keys[header.producer])


def test_block_from_a_peer_is_applied_like_our_own(net: DevNet, tmp_path: Path) -> None:
    """A block made on one node is applied on another to the same head and state; pushing it again
    adds nothing."""
    x, y = _pair(net, tmp_path)
    x.admit_transaction(net.tx(x, Transfer(A, B, 5)), now_ms())
    block = net.produce(x)
    assert y.push_block(block, now_ms()) is Pushed.APPLIED
    assert y.head.id == x.head.id
    assert state_dump(y) == state_dump(x)
    assert y.push_block(block, now_ms()) is Pushed.DUPLICATE


def test_bad_producer_signature(net: DevNet, tmp_path: Path) -> None:
    """A block whose signature is not the producer's is refused as invalid and the head stays at
    genesis."""
    x, y = _pair(net, tmp_path)
    block = net.produce(x)
    other = net.keys["alice"].sign(b"\x00" * 32)
    forged = SignedBlock(block.header, block.header_bytes, other, block.transactions)
    with pytest.raises(InvalidBlock, match="signed"):
        y.push_block(forged, now_ms())
    assert y.head.num == 0


def test_block_from_the_wrong_producer(net: DevNet, tmp_path: Path) -> None:
    """A block naming a producer other than the slot's scheduled one is refused as invalid."""
    y = net.open(tmp_path)
    slot = y.head.slot + 1
    owner, _ = y.head.scheduled(slot, y.params)
    intruder = next(n for n in ("producera", "producerb", "producerc") if n != owner)
    with pytest.raises(InvalidBlock, match="belongs to"):
        y.push_block(_forge(net, y, producer=AccountName(intruder)), now_ms())


def test_block_from_the_future(net: DevNet, tmp_path: Path) -> None:
    """A block for a slot ten slots ahead of the clock is refused as invalid."""
    y = net.open(tmp_path)
    future_slot = slot_of_ms(now_ms()) + 10
    with pytest.raises(InvalidBlock, match="future"):
        y.push_block(_forge(net, y, slot=future_slot), now_ms())


def test_wrong_merkle_root(net: DevNet, tmp_path: Path) -> None:
    """A block whose Merkle root does not match its transactions is refused as invalid."""
    y = net.open(tmp_path)
    with pytest.raises(InvalidBlock, match="Merkle"):
        y.push_block(_forge(net, y, tx_root=b"\x01" * 32), now_ms())


def test_wrong_state_root_is_detected(net: DevNet, tmp_path: Path) -> None:
    """A block with a wrong state root is refused; state, head and fork database stay unchanged."""
    x, y = _pair(net, tmp_path)
    before = state_dump(y)
    with pytest.raises(InvalidBlock, match="state root"):
        y.push_block(_forge(net, x), now_ms())
    assert state_dump(y) == before
    assert y.head.num == 0 and y.fork_db_size == 1


def test_invalid_transaction_poisons_the_block(net: DevNet, tmp_path: Path) -> None:
    """A block carrying an unaffordable transfer is refused as a whole and changes no state."""
    y = net.open(tmp_path)
    broke = net.tx(y, Transfer(A, B, 10**15))
    before = state_dump(y)
    with pytest.raises(InvalidBlock, match="insufficient_funds"):
        y.push_block(_forge(net, y, (broke,)), now_ms())
    assert state_dump(y) == before


def test_unlinkable_block(net: DevNet, tmp_path: Path) -> None:
    """A block whose previous id is unknown is refused as unlinkable."""
    y = net.open(tmp_path)
    block = _forge(net, y, previous=BlockId(b"\x00\x00\x00\x00" + b"\x09" * 28))
    with pytest.raises(UnlinkableBlock):
        y.push_block(block, now_ms())


def test_double_signing_is_refused_and_kept_as_evidence(net: DevNet, tmp_path: Path) -> None:
    """A second, different block by one producer for one slot is refused as a double sign; both are
    kept as evidence."""
    x, z, y = net.open(tmp_path / "x"), net.open(tmp_path / "z"), net.open(tmp_path / "y")
    slot = x.head.slot + 1
    first = net.produce(x, slot)
    z.admit_transaction(net.tx(z, Transfer(A, B, 1)), now_ms())
    second = net.produce(z, slot)
    assert first.id != second.id
    y.push_block(first, now_ms())
    with pytest.raises(DoubleSign):
        y.push_block(second, now_ms())
    assert {b.id for b in y.evidence()} == {first.id, second.id}


def test_restart_resumes_with_state_and_replay_protection(net: DevNet, tmp_path: Path) -> None:
    """A reopened chain has the same head, LIB, state and transaction index, refuses a replayed
    transaction and produces on."""
    chain = net.open(tmp_path)
    stx = net.tx(chain, Transfer(A, B, 42))
    chain.admit_transaction(stx, now_ms())
    for _ in range(5):
        net.produce(chain)
    head, lib, dump = chain.head, chain.lib, state_dump(chain)
    chain.store.close()
    again = net.open(tmp_path)
    assert (again.head, again.lib) == (head, lib)
    assert state_dump(again) == dump
    assert again.transaction(stx.id)[1] == 1
    with pytest.raises(DuplicateTransaction):
        again.admit_transaction(stx, now_ms())
    net.produce(again)  # and it carries on producing
    assert again.head.num == head.num + 1


def test_block_below_lib_on_another_branch_is_stale(net: DevNet, tmp_path: Path) -> None:
    """A block on a branch that forks off below our LIB is refused as stale."""
    x, y = _pair(net, tmp_path)
    slot = x.head.slot + 1
    x_block = net.produce(x, slot)
    y.admit_transaction(net.tx(y, Transfer(A, B, 3)), now_ms())
    net.produce(y, slot)
    for _ in range(6):  # y's branch becomes irreversible
        net.produce(y)
    assert y.lib >= 1
    with pytest.raises(StaleBlock):
        y.push_block(x_block, now_ms())


def test_same_transaction_with_other_signatures_is_checked_on_its_own(
    net: DevNet, tmp_path: Path
) -> None:
    """Authority is checked per signature set, not per id: a refused forgery does not block the
    genuine transaction, nor does the cached genuine one let in a block carrying the forgery."""
    chain = net.open(tmp_path / "c")
    forged = net.tx(chain, Transfer(A, B, 1), signers=["bob"])
    with pytest.raises(MissingAuthority):
        chain.admit_transaction(forged, now_ms())
    genuine = SignedTransaction(
        forged.tx, forged.packed, net.tx(chain, Transfer(A, B, 1)).signatures
    )
    assert genuine.id == forged.id
    chain.admit_transaction(genuine, now_ms())  # not refused on the strength of bob's keys
    x = net.open(tmp_path / "x")
    x.admit_transaction(genuine, now_ms())
    block = net.produce(x)
    # The same block carrying bob's signatures must fail even though alice's are cached.
    bad = SignedBlock.sign(block.header, (forged,), x.chain_id, net.keys[block.header.producer])
    with pytest.raises(InvalidBlock, match="missing_authority"):
        chain.push_block(bad, now_ms())
