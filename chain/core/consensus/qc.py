"""Finalizer votes and quorum certificates (QCs), after Antelope Savanna.

A finalizer votes on a block it accepted by signing a digest that names the chain, the block
and the kind of vote: *strong* when its safety rules let it back the block's whole branch,
*weak* when it has voted on a conflicting branch since (``chain.core.consensus.finalizer``). Votes
from finalizers holding more than two thirds of the policy's weight make a QC: a strong QC counts
strong votes only, a weak QC counts both kinds. Blocks claim the newest QC on their branch
(``QcClaim``) and carry the QC that proves a new claim; ``chain.core.consensus.finality`` turns
claims into final blocks.

A QC is a bitset of strong voters, a bitset of weak voters (indexes into the policy's
finalizer list) and one recoverable secp256k1 signature per set bit, in index order. With
at most 125 finalizers, checking one costs at most 125 key recoveries of ~80 microseconds,
and 21 finalizers' signatures are 1.4 KB: an aggregate-signature scheme (Spring uses BLS)
would save bytes, not time that matters here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from chain.core.primitives.crypto import SIGNATURE_SIZE, check_public_key, recover, sha256
from chain.core.primitives.encoding import check_bytes, check_list
from chain.core.primitives.errors import (
    BadSignature,
    ChainError,
    DuplicateQcVote,
    EncodingError,
    ForgedQcSignature,
    MalformedQc,
    QcBelowThreshold,
)
from chain.core.primitives.types import AccountName, BlockId, BlockNum, PublicKey, block_num_of

__all__ = [
    "MAX_FINALIZERS",
    "Finalizer",
    "FinalizerPolicy",
    "QcClaim",
    "QuorumCertificate",
    "Vote",
    "VoteAggregator",
    "VoteResult",
    "verify_qc",
    "vote_digest",
]

MAX_FINALIZERS = 125  # as many as a producer schedule may hold
_DOMAIN = b"bor-finality-vote-v1\x00"


def vote_digest(chain_id: bytes, block_id: BlockId, strong: bool) -> bytes:
    """What a finalizer signs: the domain, the chain, the block and the kind of vote.

    The domain prefix keeps a vote from ever being a valid block or handshake signature of
    the same key (producers' keys are finalizer keys by default)."""
    return sha256(_DOMAIN + chain_id + block_id + (b"strong" if strong else b"weak"))


@dataclass(frozen=True, slots=True, order=True)
class QcClaim:
    """A block's claim: the newest block on its branch with a QC, and whether it is strong.

    Claims order by block number, then a strong QC above a weak one on the same block."""

    num: BlockNum
    strong: bool

    def to_wire(self) -> list[Any]:
        return [self.num, self.strong]


def qc_claim_from_wire(raw: Any) -> QcClaim:
    if type(raw) is not list or len(raw) != 2 or type(raw[1]) is not bool:
        raise EncodingError("qc_claim", "expected [block number, strong]")
    if type(raw[0]) is not int or not 0 <= raw[0] < 2**32:
        raise EncodingError("qc_claim.num", "expected a block number")
    return QcClaim(BlockNum(raw[0]), raw[1])


@dataclass(frozen=True, slots=True)
class Finalizer:
    name: AccountName
    key: PublicKey
    weight: int


@dataclass(frozen=True, slots=True)
class FinalizerPolicy:
    """Who votes and how much each vote weighs; a QC needs more than two thirds of the weight.

    ``generation`` tells policies apart (the schedule version when the policy follows the
    producer schedule)."""

    generation: int
    finalizers: tuple[Finalizer, ...]

    def __post_init__(self) -> None:
        assert 0 < len(self.finalizers) <= MAX_FINALIZERS, "policies are validated at genesis"
        assert len({f.key for f in self.finalizers}) == len(self.finalizers), "keys are unique"

    @property
    def total_weight(self) -> int:
        return sum(f.weight for f in self.finalizers)

    @property
    def threshold(self) -> int:
        """The least weight that is more than two thirds of the total."""
        return self.total_weight * 2 // 3 + 1

    def index_of(self, key: bytes) -> int | None:
        for i, f in enumerate(self.finalizers):
            if f.key == key:
                return i
        return None

    @property
    def bitset_size(self) -> int:
        return (len(self.finalizers) + 7) // 8


# --- votes ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Vote:
    """One finalizer's vote on one block (Spring's ``vote_message``)."""

    block_id: BlockId
    strong: bool
    key: PublicKey
    signature: bytes

    @classmethod
    def sign(cls, chain_id: bytes, block_id: BlockId, strong: bool, key: Any) -> Vote:
        """``key`` is a ``chain.core.primitives.crypto.PrivateKey``."""
        digest = vote_digest(chain_id, block_id, strong)
        return cls(block_id, strong, key.public_key, key.sign(digest))

    @property
    def block_num(self) -> BlockNum:
        return block_num_of(self.block_id)

    def to_wire(self) -> list[Any]:
        return [self.block_id, self.strong, self.key, self.signature]

    def signer(self, chain_id: bytes) -> PublicKey | None:
        """The key that made the signature, or None if it does not recover."""
        try:
            return recover(self.signature, vote_digest(chain_id, self.block_id, self.strong))
        except BadSignature:
            return None


def vote_from_wire(raw: Any) -> Vote:
    if type(raw) is not list or len(raw) != 4 or type(raw[1]) is not bool:
        raise EncodingError("vote", "expected [block id, strong, key, signature]")
    try:
        key = check_public_key(check_bytes(raw[2], 33, "vote.key"))
    except ChainError as err:
        raise EncodingError("vote.key", str(err)) from err
    return Vote(
        BlockId(check_bytes(raw[0], 32, "vote.block_id")),
        raw[1],
        key,
        check_bytes(raw[3], SIGNATURE_SIZE, "vote.signature"),
    )


# --- quorum certificates ------------------------------------------------------------------


def _bits(bitset: bytes) -> list[int]:
    return [i for i in range(len(bitset) * 8) if bitset[i // 8] >> (i % 8) & 1]


def _bitset(indexes: list[int], size: int) -> bytes:
    out = bytearray(size)
    for i in indexes:
        out[i // 8] |= 1 << (i % 8)
    return bytes(out)


@dataclass(frozen=True, slots=True)
class QuorumCertificate:
    """Votes on ``block_id`` from enough finalizers: strong and weak voter bitsets, and the
    voters' signatures in finalizer index order (strong and weak voters interleaved)."""

    block_id: BlockId
    strong_bits: bytes
    weak_bits: bytes
    signatures: tuple[bytes, ...]

    @property
    def num(self) -> BlockNum:
        return block_num_of(self.block_id)

    @property
    def strong(self) -> bool:
        """A QC with no weak voter is strong."""
        return not any(self.weak_bits)

    @property
    def claim(self) -> QcClaim:
        return QcClaim(self.num, self.strong)

    def voters(self) -> tuple[list[int], list[int]]:
        """Indexes of the strong voters and of the weak voters."""
        return _bits(self.strong_bits), _bits(self.weak_bits)

    def to_wire(self) -> list[Any]:
        return [self.block_id, self.strong_bits, self.weak_bits, list(self.signatures)]


def qc_from_wire(raw: Any) -> QuorumCertificate:
    if type(raw) is not list or len(raw) != 4:
        raise EncodingError("qc", "expected [block id, strong bits, weak bits, signatures]")
    size = (MAX_FINALIZERS + 7) // 8
    for i, what in ((1, "qc.strong_bits"), (2, "qc.weak_bits")):
        if type(raw[i]) is not bytes or len(raw[i]) > size:
            raise EncodingError(what, f"expected at most {size} bytes")
    sigs = check_list(raw[3], MAX_FINALIZERS, "qc.signatures")
    return QuorumCertificate(
        BlockId(check_bytes(raw[0], 32, "qc.block_id")),
        raw[1],
        raw[2],
        tuple(check_bytes(s, SIGNATURE_SIZE, "qc.signatures") for s in sigs),
    )


def verify_qc(qc: QuorumCertificate, policy: FinalizerPolicy, chain_id: bytes) -> None:
    """Check every signature and the weight of ``qc`` against ``policy``; raises
    ``MalformedQc``, ``DuplicateQcVote``, ``ForgedQcSignature`` or ``QcBelowThreshold``."""
    n, num = len(policy.finalizers), qc.num
    if len(qc.strong_bits) != policy.bitset_size or len(qc.weak_bits) != policy.bitset_size:
        raise MalformedQc(num, f"bitsets must be {policy.bitset_size} bytes for {n} finalizers")
    strong, weak = qc.voters()
    if any(i >= n for i in strong + weak):
        raise MalformedQc(num, "a voter bit beyond the policy's finalizers")
    if set(strong) & set(weak):
        raise DuplicateQcVote(num, "a finalizer counted as both a strong and a weak voter")
    if len(set(qc.signatures)) != len(qc.signatures):
        raise DuplicateQcVote(num, "the same signature appears twice")
    voters = sorted([(i, True) for i in strong] + [(i, False) for i in weak])
    if len(voters) != len(qc.signatures):
        raise MalformedQc(num, f"{len(voters)} voters but {len(qc.signatures)} signatures")
    digests = {s: vote_digest(chain_id, qc.block_id, s) for s in (True, False)}
    for (i, is_strong), signature in zip(voters, qc.signatures, strict=True):
        finalizer = policy.finalizers[i]
        try:
            signer = recover(signature, digests[is_strong])
        except BadSignature as err:
            raise ForgedQcSignature(num, f"{finalizer.name}'s signature: {err}") from err
        if signer != finalizer.key:
            raise ForgedQcSignature(num, f"signature {i} is not by finalizer {finalizer.name}")
    strong_weight = sum(policy.finalizers[i].weight for i in strong)
    weight = strong_weight + sum(policy.finalizers[i].weight for i in weak)
    counted = strong_weight if qc.strong else weight
    if counted < policy.threshold:
        kind = "strong" if qc.strong else "weak"
        raise QcBelowThreshold(num, f"{kind} weight {counted} < threshold {policy.threshold}")


# --- aggregation ------------------------------------------------------------------------------


class VoteResult(Enum):
    """What became of a vote offered to an aggregator (Spring's ``vote_result_t``)."""

    ADDED = "added"
    DUPLICATE = "duplicate"  # expected: votes arrive over several peers
    CONFLICTING = "conflicting"  # a valid vote of the other kind on a block already voted on
    UNKNOWN_KEY = "unknown_key"  # not a finalizer of the block's policy
    INVALID_SIGNATURE = "invalid_signature"
    WRONG_BLOCK = "wrong_block"
    UNKNOWN_BLOCK = "unknown_block"  # not (yet) in the fork database: maybe still on its way
    STALE = "stale"  # on a block at or below the last irreversible one

    @property
    def relay(self) -> bool:
        """Whether the vote is news worth passing on to other peers."""
        return self is VoteResult.ADDED


class VoteAggregator:
    """The votes received on one block, and the best QC they make. Not thread-safe: one
    owner (the chain) feeds it. Signatures are checked as votes arrive, so building a QC
    costs nothing."""

    __slots__ = ("_chain_id", "_sigs", "_strong_weight", "_weight", "block_id", "policy")

    def __init__(self, policy: FinalizerPolicy, block_id: BlockId, chain_id: bytes) -> None:
        self.policy = policy
        self.block_id = block_id
        self._chain_id = chain_id
        self._sigs: dict[int, tuple[bool, bytes]] = {}  # finalizer index -> (strong, signature)
        self._strong_weight = 0
        self._weight = 0

    def add(self, vote: Vote, *, verified: bool = False) -> VoteResult:
        """Count ``vote`` if it is a valid first vote of a finalizer on this block.
        ``verified``: the caller already recovered the signature to ``vote.key``."""
        if vote.block_id != self.block_id:
            return VoteResult.WRONG_BLOCK
        index = self.policy.index_of(vote.key)
        if index is None:
            return VoteResult.UNKNOWN_KEY
        held = self._sigs.get(index)
        if held is not None and held[0] == vote.strong:
            return VoteResult.DUPLICATE
        if not verified and vote.signer(self._chain_id) != vote.key:
            return VoteResult.INVALID_SIGNATURE
        if held is not None:
            return VoteResult.CONFLICTING
        self._sigs[index] = (vote.strong, vote.signature)
        weight = self.policy.finalizers[index].weight
        self._weight += weight
        if vote.strong:
            self._strong_weight += weight
        return VoteResult.ADDED

    def held(self, key: PublicKey) -> Vote | None:
        """The vote counted from the finalizer with ``key``, if any."""
        index = self.policy.index_of(key)
        held = None if index is None else self._sigs.get(index)
        return None if held is None else Vote(self.block_id, held[0], key, held[1])

    @property
    def quorum(self) -> bool:
        return self._weight >= self.policy.threshold

    @property
    def strong_quorum(self) -> bool:
        return self._strong_weight >= self.policy.threshold

    def best_qc(self) -> QuorumCertificate | None:
        """A strong QC if strong votes reach the threshold, else a weak QC if all votes do."""
        if self.strong_quorum:
            chosen = sorted((i, s) for i, (st, s) in self._sigs.items() if st)
        elif self.quorum:
            chosen = sorted((i, s) for i, (_, s) in self._sigs.items())
        else:
            return None
        size = self.policy.bitset_size
        strong = [i for i, _ in chosen if self._sigs[i][0]]
        weak = [i for i, _ in chosen if not self._sigs[i][0]]
        return QuorumCertificate(
            self.block_id, _bitset(strong, size), _bitset(weak, size), tuple(s for _, s in chosen)
        )

    def voters(self) -> dict[PublicKey, bool]:
        """The key of every finalizer counted so far, and whether its vote was strong."""
        return {self.policy.finalizers[i].key: st for i, (st, _) in self._sigs.items()}
