"""Finalizer votes and quorum certificates: signing, aggregation, verification, encoding."""

from __future__ import annotations

import dataclasses
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chain.core.consensus.qc import (
    Finalizer,
    FinalizerPolicy,
    QcClaim,
    QuorumCertificate,
    Vote,
    VoteAggregator,
    VoteResult,
    qc_from_wire,
    verify_qc,
    vote_digest,
    vote_from_wire,
)
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.encoding import pack, unpack
from chain.core.primitives.errors import (
    DuplicateQcVote,
    EncodingError,
    ForgedQcSignature,
    MalformedQc,
    QcBelowThreshold,
)
from chain.core.primitives.types import AccountName, BlockId

CHAIN = os.urandom(32)
BLOCK = BlockId((7).to_bytes(4, "big") + os.urandom(28))
KEYS = [PrivateKey.generate() for _ in range(4)]
POLICY = FinalizerPolicy(
    1, tuple(Finalizer(AccountName(f"fin{'abcd'[i]}"), k.public_key, 1) for i, k in enumerate(KEYS))
)


def _votes(strong: list[bool], block: BlockId = BLOCK) -> list[Vote]:
    return [Vote.sign(CHAIN, block, s, KEYS[i]) for i, s in enumerate(strong)]


def _qc(strong: list[bool]) -> QuorumCertificate:
    agg = VoteAggregator(POLICY, BLOCK, CHAIN)
    for vote in _votes(strong):
        assert agg.add(vote) is VoteResult.ADDED
    qc = agg.best_qc()
    assert qc is not None
    return qc


def test_threshold_is_more_than_two_thirds_of_the_weight() -> None:
    """4 equal finalizers need 3; 21 need 15; weights count, not heads."""
    assert POLICY.threshold == 3
    many = FinalizerPolicy(
        0,
        tuple(Finalizer(AccountName("a"), PrivateKey.generate().public_key, 1) for _ in range(21)),
    )
    assert many.threshold == 15
    heavy = dataclasses.replace(
        POLICY,
        finalizers=(dataclasses.replace(POLICY.finalizers[0], weight=10), *POLICY.finalizers[1:]),
    )
    assert heavy.threshold == 9  # 13 * 2 // 3 + 1


def test_strong_and_weak_votes_sign_different_digests() -> None:
    """A strong vote cannot be replayed as a weak one, nor on another chain or block."""
    assert vote_digest(CHAIN, BLOCK, True) != vote_digest(CHAIN, BLOCK, False)
    assert vote_digest(CHAIN, BLOCK, True) != vote_digest(os.urandom(32), BLOCK, True)
    vote = _votes([True])[0]
    assert vote.signer(CHAIN) == KEYS[0].public_key
    assert dataclasses.replace(vote, strong=False).signer(CHAIN) != KEYS[0].public_key


def test_three_strong_votes_make_a_strong_qc_that_verifies() -> None:
    """Strong votes of 3 of 4 finalizers aggregate into a strong QC; verification accepts it."""
    qc = _qc([True, True, True])
    assert qc.strong and qc.claim == QcClaim(qc.num, True)
    assert qc.voters() == ([0, 1, 2], [])
    verify_qc(qc, POLICY, CHAIN)


def test_mixed_votes_make_a_weak_qc_and_strong_votes_alone_win_when_enough() -> None:
    """Two strong and two weak votes make a weak QC; three strong ones make a strong QC that
    leaves the weak vote out."""
    weak = _qc([True, True, False, False])
    assert not weak.strong and weak.voters() == ([0, 1], [2, 3])
    verify_qc(weak, POLICY, CHAIN)
    strong = _qc([True, True, False, True])
    assert strong.strong and strong.voters() == ([0, 1, 3], [])
    verify_qc(strong, POLICY, CHAIN)


def test_two_votes_of_four_make_no_qc() -> None:
    """Below the threshold the aggregator has nothing to offer."""
    agg = VoteAggregator(POLICY, BLOCK, CHAIN)
    for vote in _votes([True, True]):
        agg.add(vote)
    assert agg.best_qc() is None and not agg.quorum


def test_aggregator_refuses_duplicates_conflicts_strangers_and_forgeries() -> None:
    """Each kind of bad vote gets its own result and counts for nothing."""
    agg = VoteAggregator(POLICY, BLOCK, CHAIN)
    first = _votes([True])[0]
    assert agg.add(first) is VoteResult.ADDED
    assert agg.add(first) is VoteResult.DUPLICATE
    assert agg.add(Vote.sign(CHAIN, BLOCK, False, KEYS[0])) is VoteResult.CONFLICTING
    assert agg.add(Vote.sign(CHAIN, BLOCK, True, PrivateKey.generate())) is VoteResult.UNKNOWN_KEY
    forged = dataclasses.replace(_votes([True, True])[1], signature=first.signature)
    assert agg.add(forged) is VoteResult.INVALID_SIGNATURE
    other = BlockId(os.urandom(32))
    assert agg.add(Vote.sign(CHAIN, other, True, KEYS[1])) is VoteResult.WRONG_BLOCK
    assert agg.voters() == {KEYS[0].public_key: True}


def test_qc_with_a_forged_signature_is_refused() -> None:
    """A signature by another key under a finalizer's bit is a forgery."""
    qc = _qc([True, True, True])
    intruder = PrivateKey.generate().sign(vote_digest(CHAIN, BLOCK, True))
    forged = dataclasses.replace(qc, signatures=(qc.signatures[0], intruder, qc.signatures[2]))
    with pytest.raises(ForgedQcSignature):
        verify_qc(forged, POLICY, CHAIN)


def test_qc_whose_weak_vote_is_relabelled_strong_is_refused() -> None:
    """Moving a weak voter's bit into the strong set breaks its signature."""
    qc = _qc([True, True, False])
    relabelled = dataclasses.replace(qc, strong_bits=bytes([0b0111]), weak_bits=bytes([0]))
    with pytest.raises(ForgedQcSignature):
        verify_qc(relabelled, POLICY, CHAIN)


def test_qc_with_a_duplicate_signature_or_voter_is_refused() -> None:
    """The same signature twice, or one finalizer in both sets, never counts twice."""
    qc = _qc([True, True, True])
    twice = dataclasses.replace(
        qc, signatures=(qc.signatures[0], qc.signatures[0], qc.signatures[2])
    )
    with pytest.raises(DuplicateQcVote):
        verify_qc(twice, POLICY, CHAIN)
    both = dataclasses.replace(qc, weak_bits=bytes([0b0001]))
    with pytest.raises(DuplicateQcVote):
        verify_qc(both, POLICY, CHAIN)


def test_qc_below_threshold_is_refused() -> None:
    """Two strong signatures out of four are valid signatures but not a quorum."""
    qc = _qc([True, True, True])
    short = dataclasses.replace(qc, strong_bits=bytes([0b0011]), signatures=qc.signatures[:2])
    with pytest.raises(QcBelowThreshold):
        verify_qc(short, POLICY, CHAIN)


def test_qc_whose_shape_does_not_fit_the_policy_is_refused() -> None:
    """Bitsets of the wrong size, bits beyond the finalizers, or a missing signature."""
    qc = _qc([True, True, True])
    with pytest.raises(MalformedQc):
        verify_qc(dataclasses.replace(qc, strong_bits=qc.strong_bits + b"\x00"), POLICY, CHAIN)
    with pytest.raises(MalformedQc):
        verify_qc(dataclasses.replace(qc, strong_bits=bytes([0b10111])), POLICY, CHAIN)
    with pytest.raises(MalformedQc):
        verify_qc(dataclasses.replace(qc, signatures=qc.signatures[:2]), POLICY, CHAIN)


def test_qc_and_vote_survive_the_wire() -> None:
    """A QC and a vote decode to what was encoded."""
    qc = _qc([True, False, True, False])
    assert qc_from_wire(unpack(pack(qc.to_wire()), "qc")) == qc
    vote = _votes([False])[0]
    assert vote_from_wire(unpack(pack(vote.to_wire()), "vote")) == vote


@given(st.binary(max_size=300))
def test_qc_and_vote_decoders_refuse_garbage_with_encoding_error(data: bytes) -> None:
    """Whatever bytes arrive, the decoders either decode them or raise EncodingError."""
    for decode in (qc_from_wire, vote_from_wire):
        try:
            raw = unpack(data, "x")
            decode(raw)
        except EncodingError:
            pass


# Pre-signed votes of 6 weighted finalizers, so that Hypothesis only chooses orders and kinds.
W_KEYS = [PrivateKey.generate() for _ in range(6)]
W_POLICY = FinalizerPolicy(
    1,
    tuple(
        Finalizer(AccountName(f"fin{'abcdef'[i]}"), k.public_key, w)
        for i, (k, w) in enumerate(zip(W_KEYS, (1, 2, 3, 1, 5, 1), strict=True))
    ),
)
W_VOTES = {
    (i, strong): Vote.sign(CHAIN, BLOCK, strong, key)
    for i, key in enumerate(W_KEYS)
    for strong in (True, False)
}


@given(
    st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=20),
)
def test_aggregation_of_any_arrival_order_matches_the_weights(
    arrivals: list[tuple[int, bool]],
) -> None:
    """Whatever votes arrive, in any order and repeated: each finalizer's first vote counts
    and a later one of the other kind is a conflict; the QC is strong exactly when the strong
    weight reaches the threshold, weak when only all counted weight does, and it verifies
    with its voters as counted."""
    agg = VoteAggregator(W_POLICY, BLOCK, CHAIN)
    first: dict[int, bool] = {}
    for i, strong in arrivals:
        result = agg.add(W_VOTES[(i, strong)], verified=True)
        if i not in first:
            first[i] = strong
            assert result is VoteResult.ADDED
        else:
            expected = VoteResult.DUPLICATE if first[i] == strong else VoteResult.CONFLICTING
            assert result is expected
    weight = {i: W_POLICY.finalizers[i].weight for i in first}
    strong_weight = sum(w for i, w in weight.items() if first[i])
    qc = agg.best_qc()
    if strong_weight >= W_POLICY.threshold:
        assert qc is not None and qc.strong
        assert qc.voters() == (sorted(i for i in first if first[i]), [])
    elif sum(weight.values()) >= W_POLICY.threshold:
        assert qc is not None and not qc.strong
        assert qc.voters() == (
            sorted(i for i in first if first[i]),
            sorted(i for i in first if not first[i]),
        )
    else:
        assert qc is None
        return
    verify_qc(qc, W_POLICY, CHAIN)
