"""Production pauses when finality by votes stops moving, and resumes when it moves."""

from __future__ import annotations

import asyncio
from pathlib import Path

from chain.controller import Chain
from chain.core.consensus.qc import VoteResult
from chain.core.consensus.votes import VoteOutcome
from chain.core.primitives.types import PublicKey
from chain.events import ChainUpdate
from genesis.testing import DevNet
from node.liveness import FinalityProgress
from node.metrics import NodeMetrics
from node.producer import ProducerLoop
from node.runner import ChainRunner


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Feed:
    """Hands a tracker the chain's updates as the node's runner would."""

    def __init__(self, chain: Chain, progress: FinalityProgress) -> None:
        self.chain, self.progress, self.lib = chain, progress, chain.lib

    def __call__(self) -> None:
        view = self.chain.view()
        self.progress.chain_updated(ChainUpdate(view, self.chain.take_events(), self.lib))
        self.lib = view.lib_num


def test_a_block_unanswered_for_the_timeout_pauses_and_a_new_qc_resumes(tmp_path: Path) -> None:
    """Time with no blocks at all pauses nothing (a crashed producer's turn); once a block
    has waited longer than the timeout without a LIB rise, a newer claim or a QC from votes,
    production pauses; a vote that completes a QC ends the pause, as a LIB rise does."""
    net = DevNet.create(4, blocks_per_turn=1, finality="votes")
    chain = net.open(tmp_path / "chain")
    clock = Clock()
    ages: list[float] = []
    progress = FinalityProgress(6000, True, lambda lib, age: ages.append(age), clock)
    feed = Feed(chain, progress)
    feed()
    clock.now += 60
    assert not progress.paused and progress.idle_ms == 0, "no block waits"
    net.produce(chain)
    feed()
    clock.now += 5.9
    assert not progress.paused
    clock.now += 0.2
    assert progress.paused
    progress.vote_counted(VoteOutcome(VoteResult.ADDED))
    assert progress.paused, "a vote that completes no QC is not progress"
    progress.vote_counted(VoteOutcome(VoteResult.ADDED, new_qc=True))
    assert not progress.paused
    clock.now += 7
    assert not progress.paused, "the QC answered the block that waited"
    for vote in net.votes(chain, chain.head.id):
        chain.add_vote(vote, 0)
    net.produce(chain)
    for vote in net.votes(chain, chain.head.id):
        chain.add_vote(vote, 0)
    assert chain.lib >= 1
    feed()
    assert not progress.paused and len(ages) == 1


def test_a_dpos_chain_or_a_zero_timeout_never_pauses() -> None:
    """The pause belongs to finality by votes, and 0 turns it off."""
    clock = Clock()
    for progress in (
        FinalityProgress(6000, False, clock=clock),
        FinalityProgress(0, True, clock=clock),
    ):
        clock.now += 60
        assert not progress.paused


def test_a_paused_producer_skips_its_slots_then_resumes(tmp_path: Path) -> None:
    """While votes are missing the producer makes nothing; when they are back it produces."""
    net = DevNet.create(1, finality="votes")
    chain = net.open(tmp_path / "chain")
    name, _ = chain.head.scheduled(chain.head.slot + 1, chain.params)
    runner = ChainRunner(chain)
    missing = [True]
    producer = ProducerLoop(
        runner,
        (name,),
        {PublicKey(k.public_key): k for k in net.keys.values()},
        NodeMetrics(),
        votes_missing=lambda: missing[0],
    )

    async def main() -> None:
        slot = runner.view.head.slot + 1
        assert await producer.maybe_produce(slot) is None and producer.paused
        missing[0] = False
        block = await producer.maybe_produce(slot)
        assert block is not None and not producer.paused

    try:
        asyncio.run(main())
    finally:
        runner.close()


def test_a_peer_joining_gives_a_paused_producer_a_fresh_timeout(tmp_path: Path) -> None:
    """After a partition heals with equal heads on both sides, no block would ever come for
    the joined finalizers to vote on: a new peer lifts the pause for one timeout."""
    net = DevNet.create(4, blocks_per_turn=1, finality="votes")
    chain = net.open(tmp_path / "chain")
    clock = Clock()
    progress = FinalityProgress(6000, True, clock=clock)
    feed = Feed(chain, progress)
    feed()
    net.produce(chain)
    feed()
    clock.now += 7
    assert progress.paused
    progress.peer_joined()
    assert not progress.paused
    net.produce(chain)
    feed()
    clock.now += 7
    assert progress.paused, "unanswered again, it pauses again"


def test_a_paused_producer_sends_one_probe_block_per_period_so_votes_can_resume(
    tmp_path: Path,
) -> None:
    """Paused for good (votes on its head lost), the producer still makes one block every
    probe period, and none in between: the finalizers always get a new head to vote on."""
    net = DevNet.create(1, finality="votes")
    chain = net.open(tmp_path / "chain")
    name, _ = chain.head.scheduled(chain.head.slot + 1, chain.params)
    runner = ChainRunner(chain)
    clock = Clock()
    producer = ProducerLoop(
        runner,
        (name,),
        {PublicKey(k.public_key): k for k in net.keys.values()},
        NodeMetrics(),
        votes_missing=lambda: True,
        probe_every=6.0,
        clock=clock,
    )

    async def main() -> None:
        slot = runner.view.head.slot + 1
        assert await producer.maybe_produce(slot) is None and producer.paused
        clock.now += 5.9
        assert await producer.maybe_produce(slot) is None, "not before the period is up"
        clock.now += 0.2
        probe = await producer.maybe_produce(slot)
        assert probe is not None and producer.paused, "one block, still paused"
        assert await producer.maybe_produce(slot + 1) is None, "then the pause again"
        clock.now += 6.1
        assert await producer.maybe_produce(slot + 1) is not None

    try:
        asyncio.run(main())
    finally:
        runner.close()
