"""A finalizer's safety rules, alone and in a network of finalizers on a forking block tree."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from chain.core.consensus.finality import BlockRef, FinalityCore
from chain.core.consensus.finalizer import SafetyInfo, VoteDecision, decide_vote, decode_safety_info
from chain.core.consensus.qc import QcClaim
from chain.core.primitives.errors import EncodingError
from chain.core.primitives.types import BlockId, BlockNum


def ref(num: int, slot: int, branch: int = 0) -> BlockRef:
    return BlockRef(BlockId(num.to_bytes(4, "big") + bytes([branch]) * 28), slot, 0)


GENESIS = FinalityCore.genesis(ref(0, 0))


def grow(core: FinalityCore, slot: int, branch: int, claim: QcClaim | None = None) -> FinalityCore:
    return core.next(ref(core.current.num + 1, slot, branch), claim or core.claim)


def test_first_vote_is_strong_and_locks_on_the_claimed_block() -> None:
    """A fresh finalizer votes strong on a block extending its lock; a block claiming a QC
    newer than the lock moves the lock there."""
    b1 = grow(GENESIS, 1, 0)
    b2 = grow(b1, 2, 0, QcClaim(BlockNum(1), True))
    fsi = SafetyInfo.starting_at(GENESIS.current)
    decision, fsi = decide_vote(fsi, b1)
    assert decision is VoteDecision.STRONG and fsi.last_vote == b1.current
    decision, fsi = decide_vote(fsi, b2)
    assert decision is VoteDecision.STRONG and fsi.lock == b1.current


def test_no_second_vote_at_or_before_the_last_voted_slot() -> None:
    """Monotony: a block of the same or an earlier slot gets no vote, whichever branch."""
    b1 = grow(GENESIS, 5, 0)
    other = grow(GENESIS, 5, 1)
    earlier = grow(GENESIS, 4, 2)
    _, fsi = decide_vote(SafetyInfo.starting_at(GENESIS.current), b1)
    assert decide_vote(fsi, b1)[0] is VoteDecision.NO_VOTE
    assert decide_vote(fsi, other)[0] is VoteDecision.NO_VOTE
    assert decide_vote(fsi, earlier) == (VoteDecision.NO_VOTE, fsi)


def test_switching_branch_without_a_newer_qc_is_a_weak_vote() -> None:
    """After voting on one branch, a later block of another branch claiming nothing newer
    than our last vote gets a weak vote, and so does its child until a newer QC shows up."""
    a1 = grow(GENESIS, 1, 0)
    b1 = grow(GENESIS, 2, 1)
    b2 = grow(b1, 3, 1)
    _, fsi = decide_vote(SafetyInfo.starting_at(GENESIS.current), a1)
    decision, fsi = decide_vote(fsi, b1)
    assert decision is VoteDecision.WEAK and fsi.other_branch_slot == 1
    decision, fsi = decide_vote(fsi, b2)
    assert decision is VoteDecision.WEAK, "the branch holds the last vote, not a newer QC"
    b3 = grow(b2, 4, 1, QcClaim(BlockNum(2), True))
    decision, fsi = decide_vote(fsi, b3)
    assert decision is VoteDecision.STRONG and fsi.other_branch_slot == 0


def test_a_locked_finalizer_refuses_a_conflicting_branch_without_a_newer_qc() -> None:
    """Locked on block 1 of branch A, a block of branch B that claims nothing newer than the
    lock gets no vote at all; once B claims a QC on a block later than our last vote, a
    quorum has moved on and the vote is strong."""
    a1 = grow(GENESIS, 1, 0)
    a2 = grow(a1, 2, 0, QcClaim(BlockNum(1), True))
    _, fsi = decide_vote(SafetyInfo.starting_at(GENESIS.current), a1)
    _, fsi = decide_vote(fsi, a2)
    assert fsi.lock == a1.current
    b1 = grow(GENESIS, 3, 1)
    assert decide_vote(fsi, b1)[0] is VoteDecision.NO_VOTE
    b2 = grow(b1, 4, 1)
    b3 = grow(b2, 5, 1, QcClaim(BlockNum(2), True))
    decision, after = decide_vote(fsi, b3)
    assert decision is VoteDecision.STRONG and after.lock == b2.current


def test_safety_info_survives_its_encoding_and_detects_damage() -> None:
    """The safety file's bytes decode to the same value; a flipped byte is refused."""
    _, fsi = decide_vote(SafetyInfo.starting_at(GENESIS.current), grow(GENESIS, 1, 0))
    data = fsi.encode()
    assert decode_safety_info(data) == fsi
    with pytest.raises(EncodingError):
        decode_safety_info(data[:-1] + bytes([data[-1] ^ 1]))


# --- a network of finalizers on a block tree ------------------------------------------------

N_FINALIZERS = 4  # threshold 3; one of them may be Byzantine
THRESHOLD = 3


class FinalityNetwork(RuleBasedStateMachine):
    """Producers build blocks anywhere on a tree (forks at will), carrying any QC their branch
    has; honest finalizers see blocks in any order and vote by the safety rules; one
    Byzantine finalizer votes strong on everything. Whatever happens, the blocks made final
    — by a block's claims or by a strong quorum of votes — lie on one chain."""

    def __init__(self) -> None:
        super().__init__()
        self.slot = 0
        self.blocks: dict[BlockId, FinalityCore] = {GENESIS.current.id: GENESIS}
        self.order: list[BlockId] = [GENESIS.current.id]
        self.parent: dict[BlockId, BlockId | None] = {GENESIS.current.id: None}
        self.fsi = [SafetyInfo.starting_at(GENESIS.current) for _ in range(N_FINALIZERS - 1)]
        self.voted_slots: list[list[int]] = [[] for _ in range(N_FINALIZERS - 1)]
        self.strong: dict[BlockId, set[int]] = {}
        self.weak: dict[BlockId, set[int]] = {}
        self.byzantine = True

    def _qc_of(self, block_id: BlockId) -> QcClaim | None:
        strong = self.strong.get(block_id, set())
        votes = strong | self.weak.get(block_id, set())
        num = self.blocks[block_id].current.num
        if len(strong) >= THRESHOLD:
            return QcClaim(num, True)
        if len(votes) >= THRESHOLD:
            return QcClaim(num, False)
        return None

    @rule(data=st.data(), gap=st.integers(1, 3))
    def produce(self, data: st.DataObject, gap: int) -> None:
        parent_id = data.draw(st.sampled_from(self.order))
        parent = self.blocks[parent_id]
        claims = [parent.claim]
        for r in parent.refs:
            qc = self._qc_of(r.id)
            if qc is not None and qc > parent.claim:
                claims.append(qc)
        claim = data.draw(st.sampled_from(claims))
        self.slot += gap
        core = parent.next(ref(parent.current.num + 1, self.slot, len(self.order) % 256), claim)
        block_id = core.current.id
        assert block_id not in self.blocks
        self.blocks[block_id] = core
        self.order.append(block_id)
        self.parent[block_id] = parent_id
        if self.byzantine:
            self.strong.setdefault(block_id, set()).add(N_FINALIZERS - 1)

    @precondition(lambda self: len(self.order) > 1)
    @rule(data=st.data(), who=st.integers(0, N_FINALIZERS - 2))
    def deliver(self, data: st.DataObject, who: int) -> None:
        self._deliver(data.draw(st.sampled_from(self.order[1:])), who)

    @precondition(lambda self: len(self.order) > 1)
    @rule(data=st.data(), newest=st.booleans())
    def deliver_everywhere(self, data: st.DataObject, newest: bool) -> None:
        """The common case: a block reaches every honest finalizer."""
        block_id = self.order[-1] if newest else data.draw(st.sampled_from(self.order[1:]))
        for who in data.draw(st.permutations(range(N_FINALIZERS - 1))):
            self._deliver(block_id, who)

    def _deliver(self, block_id: BlockId, who: int) -> None:
        core = self.blocks[block_id]
        before = self.fsi[who]
        decision, after = decide_vote(before, core)
        if decision is VoteDecision.NO_VOTE:
            assert after == before
            return
        self.fsi[who] = after
        self.voted_slots[who].append(core.current.slot)
        votes = self.strong if decision is VoteDecision.STRONG else self.weak
        votes.setdefault(block_id, set()).add(who)

    def _ancestors(self, block_id: BlockId) -> set[BlockId]:
        out: set[BlockId] = set()
        cursor: BlockId | None = block_id
        while cursor is not None:
            out.add(cursor)
            cursor = self.parent[cursor]
        return out

    def _final_blocks(self) -> set[BlockId]:
        final = {core.final.id for core in self.blocks.values()}
        for block_id, core in self.blocks.items():
            if len(self.strong.get(block_id, set())) >= THRESHOLD:
                final.add(core.claimed().id)  # the fast path: a strong QC from votes
        return final

    @invariant()
    def final_blocks_lie_on_one_chain(self) -> None:
        final = sorted(self._final_blocks(), key=lambda b: self.blocks[b].current.num)
        if final:
            assert final[0] in self._ancestors(final[-1]) or len(final) == 1
            newest = self._ancestors(final[-1])
            assert all(b in newest for b in final), "two conflicting blocks are both final"

    @invariant()
    def honest_votes_move_forward_in_time(self) -> None:
        for slots in self.voted_slots:
            assert slots == sorted(set(slots)), "an honest finalizer voted twice in a slot"


TestFinalityNetwork = FinalityNetwork.TestCase
TestFinalityNetwork.settings = settings(max_examples=200, stateful_step_count=60, deadline=None)
