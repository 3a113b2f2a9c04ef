"""DPoS rules: producer of a slot, the 2/3+1 LIB rule, and schedule changes at LIB."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.core.consensus.block import ProducerKey, Schedule
from chain.core.consensus.dpos import irreversible_candidate, producer_of_slot
from chain.core.execution.actions import Stake, VoteProducer
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName
from genesis.testing import DevNet


def _schedule(n: int) -> Schedule:
    key = PrivateKey(b"\x01" * 32).public_key
    return Schedule(0, tuple(ProducerKey(AccountName(f"p{i}"), key) for i in range(n)))


def test_each_producer_makes_consecutive_blocks() -> None:
    """With 12 blocks per turn, producers own runs of 12 slots in schedule order, wrapping round."""
    schedule = _schedule(3)
    owners = [producer_of_slot(schedule, slot, 12) for slot in range(72)]
    assert owners == [0] * 12 + [1] * 12 + [2] * 12 + [0] * 12 + [1] * 12 + [2] * 12


@pytest.mark.parametrize(("n", "needed"), [(1, 1), (3, 3), (4, 3), (21, 15)])
def test_lib_needs_more_than_two_thirds(n: int, needed: int) -> None:
    """The LIB candidate is the highest block that more than two thirds of the producers have built
    on; one producer fewer is not enough."""
    schedule = _schedule(n)
    # `needed` producers have built up to block 100, the rest are at block 10.
    marks = {AccountName(f"p{i}"): (100 if i < needed else 10) for i in range(n)}
    assert irreversible_candidate(schedule, marks) == 100
    if needed > 1:
        marks[AccountName("p0")] = 10
        assert irreversible_candidate(schedule, marks) == 10


def test_lib_advances_only_after_all_three_produce(tmp_path: Path) -> None:
    """With three producers no block is irreversible until all three have produced; then the LIB is
    the lowest of their latest blocks."""
    net = DevNet.create(3, blocks_per_turn=2)
    chain = net.open(tmp_path)
    last: dict[str, int] = {}
    while len(last) < 3:
        assert chain.lib == 0, "no block is irreversible before all three have produced"
        block = net.produce(chain)
        last[block.header.producer] = block.num
    # All three have now built on the blocks up to the first producer's last one.
    assert chain.lib == min(last.values())
    assert chain.lib > 0


def test_producing_with_a_key_the_slot_does_not_schedule_is_refused(tmp_path: Path) -> None:
    """Producing for a slot with another producer's key than the scheduled one's raises
    WrongProducerKey."""
    net = DevNet.create(3)
    chain = net.open(tmp_path)
    slot = chain.head.slot + 1
    owner, _ = chain.head.scheduled(slot, chain.params)
    intruder = next(n for n in ("producera", "producerb", "producerc") if n != owner)
    from chain.core.primitives.errors import WrongProducerKey

    with pytest.raises(WrongProducerKey):
        chain.produce_block(slot, net.keys[intruder])


def test_elected_schedule_becomes_active_once_its_block_is_irreversible(tmp_path: Path) -> None:
    """A schedule won by votes is carried in the election block and becomes active (version 1) once
    that block is irreversible; its producer signs the next block."""
    net = DevNet.create(1, election_interval_blocks=4)
    chain = net.open(tmp_path)
    # bob votes producera in: same set, no change. Then carol registers and wins.
    chain.admit_transaction(net.tx(chain, Stake(AccountName("bob"), 10)), 0 or _now())
    net.produce(chain)
    from chain.core.execution.actions import ApproveProducer, RegProducer

    carol_key = net.keys["carol"].public_key
    chain.admit_transaction(net.tx(chain, RegProducer(AccountName("carol"), carol_key, "")), _now())
    net.produce(chain)
    chain.admit_transaction(
        net.tx(chain, ApproveProducer(AccountName("bor.gov"), AccountName("carol"))), _now()
    )
    net.produce(chain)
    chain.admit_transaction(
        net.tx(chain, VoteProducer(AccountName("bob"), (AccountName("carol"),))), _now()
    )
    block = net.produce(chain)  # block 4: election block
    assert block.num == 4
    assert block.header.new_producers is not None
    assert block.header.new_producers.names() == ("carol",)
    # One producer: block 4 is irreversible at once, so carol is active for block 5.
    assert chain.head.active.names() == ("carol",)
    assert chain.head.active.version == 1
    nxt = net.produce(chain)
    assert nxt.header.producer == "carol"
    assert nxt.header.schedule_version == 1


def _now() -> int:
    from chain.testing import now_ms

    return now_ms()
