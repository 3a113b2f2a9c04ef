"""The vote pool: finalizer votes on reversible blocks, aggregated per block.

The chain owns it (as it owns the mempool) and feeds it every vote from a peer or from a
finalizer of this node. It answers what the producer needs (the best QC to carry in the
next block), what finality needs (a strong QC formed from votes makes the block its target
claimed final at once, before any block carries that QC, as in Spring) and what operators
ask (who voted last on what). An honest finalizer votes once per block and once per slot
(its votes move forward in time): two valid votes of one finalizer on one block (strong and
weak), or on two blocks of one slot, are evidence, which the chain keeps in its store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from chain.core.consensus.qc import (
    FinalizerPolicy,
    QuorumCertificate,
    Vote,
    VoteAggregator,
    VoteResult,
)
from chain.core.primitives.types import BlockId, BlockNum, PublicKey

__all__ = ["DoubleVote", "FinalizerActivity", "VoteOutcome", "VotePool"]


@dataclass(frozen=True, slots=True)
class FinalizerActivity:
    """The last vote this node counted from one finalizer."""

    block_num: BlockNum
    block_id: BlockId
    strong: bool
    at_ms: int
    votes: int  # votes counted from it since this node started


@dataclass(frozen=True, slots=True)
class DoubleVote:
    """Two valid votes of one finalizer that an honest one never casts: of both kinds on one
    block, or on two blocks of the same slot."""

    key: PublicKey
    slot: int
    first: Vote
    second: Vote


@dataclass(frozen=True, slots=True)
class VoteOutcome:
    """What became of one vote: its result, the evidence it completed, and whether it made a
    new QC (a first quorum on its block, or a first strong one)."""

    result: VoteResult
    evidence: DoubleVote | None = None
    new_qc: bool = False


class VotePool:
    def __init__(self, chain_id: bytes) -> None:
        self._chain_id = chain_id
        self._blocks: dict[BlockId, VoteAggregator] = {}
        self._slots: dict[BlockId, int] = {}
        self._by_slot: dict[tuple[PublicKey, int], Vote] = {}
        self.activity: dict[PublicKey, FinalizerActivity] = {}

    def __len__(self) -> int:
        return len(self._blocks)

    def add(self, vote: Vote, policy: FinalizerPolicy, slot: int, now_ms: int) -> VoteOutcome:
        """Count ``vote`` on a known reversible block of ``slot`` under ``policy``."""
        agg = self._blocks.get(vote.block_id)
        if agg is None:
            agg = self._blocks[vote.block_id] = VoteAggregator(
                policy, vote.block_id, self._chain_id
            )
            self._slots[vote.block_id] = slot
        held = agg.held(vote.key)
        quorum, strong_quorum = agg.quorum, agg.strong_quorum
        result = agg.add(vote)
        if result is VoteResult.CONFLICTING and held is not None:
            return VoteOutcome(result, DoubleVote(vote.key, slot, held, vote))
        if result is not VoteResult.ADDED:
            return VoteOutcome(result)
        new_qc = (agg.quorum and not quorum) or (agg.strong_quorum and not strong_quorum)
        before = self.activity.get(vote.key)
        if before is None or before.block_num <= vote.block_num:
            count = 1 if before is None else before.votes + 1
            self.activity[vote.key] = FinalizerActivity(
                vote.block_num, vote.block_id, vote.strong, now_ms, count
            )
        earlier = self._by_slot.setdefault((vote.key, slot), vote)
        if earlier.block_id == vote.block_id:
            return VoteOutcome(result, None, new_qc)
        return VoteOutcome(result, DoubleVote(vote.key, slot, earlier, vote), new_qc)

    def aggregator(self, block_id: BlockId) -> VoteAggregator | None:
        return self._blocks.get(block_id)

    def best_qc(self, branch: Iterable[BlockId]) -> QuorumCertificate | None:
        """The QC on the newest block of ``branch`` (ids, newest first) that has one."""
        for block_id in branch:
            agg = self._blocks.get(block_id)
            qc = None if agg is None else agg.best_qc()
            if qc is not None:
                return qc
        return None

    def prune(self, lib: int, lib_slot: int) -> None:
        """Forget votes on blocks at or below the last irreversible block."""
        for block_id in [b for b in self._blocks if int.from_bytes(b[:4], "big") <= lib]:
            del self._blocks[block_id]
            del self._slots[block_id]
        for key in [k for k in self._by_slot if k[1] <= lib_slot]:
            del self._by_slot[key]
