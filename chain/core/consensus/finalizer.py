"""A finalizer's safety rules: whether to vote on a block, strong or weak (Savanna's).

The rules keep finality safe as long as finalizers with more than two thirds of the weight
follow them: two conflicting blocks never both become final. What a finalizer must remember
between votes is ``SafetyInfo``, a value: ``decide_vote`` returns the new one, and the
caller makes it durable before the vote leaves the process (a finalizer that forgot its last
vote after a crash could vote against it).

- *Monotony*: vote only on a block with a later slot than the last vote.
- *Lock*: a strong vote on a block locks the finalizer on the block that block claims a QC
  on. Vote only on a block that extends the lock (safety), or whose claim is on a block
  newer than the lock (liveness: a QC proves that a quorum moved on).
- *Strong or weak*: strong when the block's branch holds the last vote, or its claim is at
  least as new as the last vote and as any vote on another branch since the last strong one;
  weak otherwise, so that a QC mixing those votes never makes anything final by itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from chain.core.consensus.finality import BlockRef, FinalityCore, block_ref_from_wire
from chain.core.primitives.crypto import sha256
from chain.core.primitives.encoding import pack, unpack
from chain.core.primitives.errors import EncodingError

__all__ = ["SafetyInfo", "VoteDecision", "decide_vote"]

_MAGIC = "bor-finalizer-safety-v1"


class VoteDecision(Enum):
    NO_VOTE = "no_vote"
    STRONG = "strong"
    WEAK = "weak"


@dataclass(frozen=True, slots=True)
class SafetyInfo:
    """What a finalizer remembers between votes (Spring's ``finalizer_safety_information``).

    ``other_branch_slot``: the slot of the last vote before we voted on a branch that did not
    hold it (zero after a strong vote); while a block's claim is older, we vote weak.
    """

    lock: BlockRef
    last_vote: BlockRef | None = None
    other_branch_slot: int = 0

    @classmethod
    def starting_at(cls, final: BlockRef) -> SafetyInfo:
        """A finalizer that never voted: locked on the last final block it knows."""
        return cls(lock=final)

    def encode(self) -> bytes:
        """Bytes with a checksum, for the finalizer's safety file."""
        body = pack(
            [
                _MAGIC,
                self.lock.to_wire(),
                None if self.last_vote is None else self.last_vote.to_wire(),
                self.other_branch_slot,
            ]
        )
        return sha256(body) + body


def decode_safety_info(data: bytes) -> SafetyInfo:
    """Read what ``SafetyInfo.encode`` wrote; EncodingError if the bytes are damaged."""
    if len(data) < 33 or sha256(data[32:]) != data[:32]:
        raise EncodingError("finalizer safety info", "checksum does not match")
    raw: Any = unpack(data[32:], "finalizer safety info")
    if type(raw) is not list or len(raw) != 4 or raw[0] != _MAGIC:
        raise EncodingError("finalizer safety info", "not a safety record of this version")
    if type(raw[3]) is not int or raw[3] < 0:
        raise EncodingError("finalizer safety info", "bad other-branch slot")
    last = None if raw[2] is None else block_ref_from_wire(raw[2])
    return SafetyInfo(block_ref_from_wire(raw[1]), last, raw[3])


def decide_vote(fsi: SafetyInfo, core: FinalityCore) -> tuple[VoteDecision, SafetyInfo]:
    """Whether to vote on the block whose finality core is ``core``, and the safety info
    after that vote (unchanged when the decision is not to vote)."""
    block = core.current
    if fsi.last_vote is not None and block.slot <= fsi.last_vote.slot:
        return VoteDecision.NO_VOTE, fsi  # monotony
    claimed = core.claimed()
    liveness = claimed.slot > fsi.lock.slot
    safety = core.extends(fsi.lock.id)
    if not (liveness or safety):
        return VoteDecision.NO_VOTE, fsi
    other = fsi.other_branch_slot
    last = fsi.last_vote
    if last is None or last.slot <= claimed.slot:
        decision = VoteDecision.STRONG
    elif core.extends(last.id):
        decision = VoteDecision.STRONG if other <= claimed.slot else VoteDecision.WEAK
    else:
        decision, other = VoteDecision.WEAK, last.slot
    lock = fsi.lock
    if decision is VoteDecision.STRONG:
        other = 0
        if claimed.slot > lock.slot:
            lock = claimed
    return decision, replace(fsi, lock=lock, last_vote=block, other_branch_slot=other)
