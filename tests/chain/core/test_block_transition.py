"""The block transition is pure: same input, same output; it never writes, reads the clock
it is given, and hands back double-signing evidence instead of storing it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from chain.controller import Chain
from chain.core.block_transition import (
    BlockTransition,
    Evidence,
    HeaderVerdict,
    block_transition,
    process_block_header,
    process_header,
)
from chain.core.consensus.block import ProducerKey, Schedule, SignedBlock
from chain.core.execution.actions import Transfer
from chain.core.execution.state_hash import StateHash
from chain.core.primitives.errors import InvalidBlock
from chain.core.primitives.params import SLOT_MS, slot_start_ms
from chain.core.primitives.types import AccountName, BlockId, BlockNum, PublicKey
from chain.storage.store import BlockStore
from chain.testing import now_ms, state_dump
from genesis.testing import DevNet

A, B = AccountName("alice"), AccountName("bob")


class NoWrites:
    """A block store seen through its reads only; anything else fails the test."""

    def __init__(self, store: BlockStore) -> None:
        self._store = store

    def get(self, key: bytes) -> bytes | None:
        return self._store.get(key)

    def iterate(
        self, start: bytes, stop: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        return self._store.iterate(start, stop, reverse=reverse)

    def state_hash(self) -> StateHash:
        return self._store.state_hash()

    @property
    def tx_filter(self) -> object:
        """Read by the compiled pass: the store's filter of unexpired transaction ids."""
        return self._store.tx_filter

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the block transition reached for store.{name}")


def _everything(chain: Chain) -> dict[bytes, bytes]:
    return dict(chain.store.iterate(b"", b"\xff"))


def _transition(
    chain: Chain, block: SignedBlock, keys: list[frozenset[PublicKey]] | None
) -> BlockTransition:
    """``block`` judged whole on ``chain``'s head state, read through ``NoWrites``."""
    return block_transition(
        NoWrites(chain.store),
        chain.head,
        block,
        keys,
        params=chain.params,
        chain_id=chain.chain_id,
        now_ms=now_ms(),
    )


def _judge(
    chain: Chain, block: SignedBlock, earlier: SignedBlock | None = None, at_ms: int | None = None
) -> HeaderVerdict:
    """``block``'s header judged on ``chain``'s head header state."""
    return process_block_header(
        chain.head,
        block,
        earlier=earlier,
        params=chain.params,
        chain_id=chain.chain_id,
        now_ms=now_ms() if at_ms is None else at_ms,
    )


@pytest.fixture
def net() -> DevNet:
    return DevNet.create(3, blocks_per_turn=1)


def _block_with_a_transfer(net: DevNet, tmp_path: Path) -> tuple[Chain, Chain, SignedBlock]:
    """(producer chain after the block, validator chain still at its parent, the block)."""
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    x.admit_transaction(net.tx(x, Transfer(A, B, 25)), now_ms())
    return x, y, net.produce(x)


def test_same_input_same_output_and_no_writes(net: DevNet, tmp_path: Path) -> None:
    """Run twice on the validator's state, the transition returns equal values and leaves
    the store, head and fork database as they were; committed, it gives the producer's state."""
    x, y, block = _block_with_a_transfer(net, tmp_path)
    keys = y.recover_keys(block.transactions)
    before, head, forks = _everything(y), y.head, y.fork_db_size
    runs = [_transition(y, block, keys) for _ in range(2)]
    assert runs[0] == runs[1]
    assert _everything(y) == before
    assert (y.head, y.fork_db_size) == (head, forks)
    assert runs[0].state == x.head, "validation and production reach the same header state"
    t = runs[0]
    y.store.commit_block(block, block.encode(), t.state, t.changes, t.originals, t.state_hash)
    assert state_dump(y) == state_dump(x), "and the same state: one execution path"


def test_light_validation_reaches_the_same_transition(net: DevNet, tmp_path: Path) -> None:
    """Without signer keys (light mode) a valid block yields exactly the full transition."""
    _, y, block = _block_with_a_transfer(net, tmp_path)
    full = _transition(y, block, y.recover_keys(block.transactions))
    assert _transition(y, block, None) == full


def test_invalid_block_raises_and_writes_nothing(net: DevNet, tmp_path: Path) -> None:
    """A block whose state root disagrees is refused, with the store untouched."""
    _, y, block = _block_with_a_transfer(net, tmp_path)
    forged_header = dataclasses.replace(block.header, state_root=b"\x05" * 32)
    forged = SignedBlock.sign(
        forged_header, block.transactions, y.chain_id, net.keys[block.header.producer]
    )
    before = _everything(y)
    with pytest.raises(InvalidBlock, match="state root"):
        _transition(y, forged, y.recover_keys(forged.transactions))
    assert _everything(y) == before


def test_the_clock_is_the_one_passed_in(net: DevNet, tmp_path: Path) -> None:
    """The same block is from the future at one ``now_ms`` and fine a slot later."""
    _, y, block = _block_with_a_transfer(net, tmp_path)
    start = slot_start_ms(block.header.slot)
    with pytest.raises(InvalidBlock, match="future"):
        _judge(y, block, at_ms=start - SLOT_MS - 1)
    verdict = _judge(y, block, at_ms=start - SLOT_MS)
    assert verdict.state.id == block.id and verdict.evidence is None


def test_double_sign_returns_evidence_without_writing_it(net: DevNet, tmp_path: Path) -> None:
    """A second block of a producer's slot comes back with the evidence; nothing is stored."""
    x, z, y = (net.open(tmp_path / n) for n in ("x", "z", "y"))
    slot = x.head.slot + 1
    first = net.produce(x, slot)
    z.admit_transaction(net.tx(z, Transfer(A, B, 1)), now_ms())
    second = net.produce(z, slot)
    before = _everything(y)
    verdict = _judge(y, second, earlier=first)
    assert verdict.evidence == Evidence(first, second)
    assert verdict.state.id == second.id
    assert _everything(y) == before and y.evidence() == []
    assert _judge(y, second, earlier=second).evidence is None
    assert _judge(y, second).evidence is None


def _schedule(version: int) -> Schedule:
    return Schedule(version, (ProducerKey(A, PublicKey(b"\x02" * 33)),))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"previous": BlockId(b"\x00" * 32)}, "previous id"),
        ({"num": BlockNum(7)}, "number must be"),
        ({"slot": 0}, "is not after the parent"),
        ({"producer": AccountName("nobody")}, "belongs to"),
        ({"schedule_version": 3}, "schedule version"),
        ({"new_producers": _schedule(5)}, "wrong version"),
    ],
    ids=["previous", "num", "slot", "producer", "schedule_version", "proposal_version"],
)
def test_each_header_rule_refuses_on_its_own(
    net: DevNet, tmp_path: Path, change: dict[str, object], reason: str
) -> None:
    """Breaking any one header rule of a good header is enough to refuse it."""
    _, y, block = _block_with_a_transfer(net, tmp_path)
    assert process_header(y.head, block.header, block.id, y.params).id == block.id
    header = dataclasses.replace(block.header, **change)  # type: ignore[arg-type]
    with pytest.raises(InvalidBlock, match=reason):
        process_header(y.head, header, block.id, y.params)


def test_a_proposal_while_one_is_pending_is_refused(net: DevNet, tmp_path: Path) -> None:
    """A header may not propose a schedule while another waits to become active."""
    _, y, block = _block_with_a_transfer(net, tmp_path)
    pending = dataclasses.replace(y.head, pending=_schedule(1), pending_num=1)
    header = dataclasses.replace(block.header, new_producers=_schedule(1))
    with pytest.raises(InvalidBlock, match="already pending"):
        process_header(pending, header, block.id, y.params)
