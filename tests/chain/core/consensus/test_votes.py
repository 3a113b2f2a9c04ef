"""The vote pool's evidence of double voting, and how the store keeps it."""

from __future__ import annotations

import os
from pathlib import Path

from chain.core.consensus.qc import Finalizer, FinalizerPolicy, Vote, VoteResult
from chain.core.consensus.votes import DoubleVote, VotePool
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName, BlockId
from chain.storage.store import MAX_VOTE_EVIDENCE_PER_FINALIZER, BlockStore

CHAIN = os.urandom(32)
KEYS = [PrivateKey.generate() for _ in range(4)]
POLICY = FinalizerPolicy(
    1, tuple(Finalizer(AccountName(f"fin{'abcd'[i]}"), k.public_key, 1) for i, k in enumerate(KEYS))
)


def _block(num: int) -> BlockId:
    return BlockId(num.to_bytes(4, "big") + os.urandom(28))


def test_votes_on_two_blocks_of_one_slot_are_evidence() -> None:
    """A finalizer that votes for two different blocks of the same slot (two branches) gives
    evidence holding both votes; its votes on blocks of other slots do not."""
    pool = VotePool(CHAIN)
    a, b, later = _block(7), _block(7), _block(8)
    first = Vote.sign(CHAIN, a, True, KEYS[0])
    assert pool.add(first, POLICY, 14, 0).evidence is None
    assert pool.add(Vote.sign(CHAIN, later, True, KEYS[0]), POLICY, 15, 0).evidence is None
    second = Vote.sign(CHAIN, b, True, KEYS[0])
    outcome = pool.add(second, POLICY, 14, 0)
    assert outcome.result is VoteResult.ADDED
    assert outcome.evidence == DoubleVote(KEYS[0].public_key, 14, first, second)
    other = pool.add(Vote.sign(CHAIN, b, True, KEYS[1]), POLICY, 14, 0)
    assert other.evidence is None


def test_the_store_keeps_a_bounded_number_of_double_votes_per_finalizer(tmp_path: Path) -> None:
    """Double votes survive a reopen, oldest slot first; beyond the cap a finalizer's further
    double votes are not written, while another finalizer's still are."""
    store = BlockStore(str(tmp_path / "db"))

    def double(key: PrivateKey, slot: int) -> DoubleVote:
        block = _block(slot)
        strong, weak = (Vote.sign(CHAIN, block, s, key) for s in (True, False))
        return DoubleVote(key.public_key, slot, strong, weak)

    kept = [double(KEYS[0], slot) for slot in range(MAX_VOTE_EVIDENCE_PER_FINALIZER)]
    for evidence in reversed(kept):
        assert store.put_vote_evidence(evidence)
    assert not store.put_vote_evidence(double(KEYS[0], 10_000))
    other = double(KEYS[1], 5)
    assert store.put_vote_evidence(other)
    store.close()
    reopened = BlockStore(str(tmp_path / "db"))
    found = reopened.vote_evidence()
    assert [e for e in found if e.key == KEYS[0].public_key] == kept
    assert other in found and len(found) == len(kept) + 1
