"""Finality by votes in the chain manager: QCs in blocks, the LIB they give, fork choice."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest

from chain.controller import Chain, Pushed
from chain.core.consensus.block import SignedBlock
from chain.core.consensus.qc import QcClaim, Vote, VoteResult, vote_digest
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.errors import InvalidBlock, StaleBlock
from chain.core.primitives.types import BlockNum
from chain.testing import now_ms
from genesis.testing import DevNet


@pytest.fixture
def net() -> DevNet:
    return DevNet.create(4, blocks_per_turn=1, finality="votes")


def vote_all(net: DevNet, chain: Chain, block: SignedBlock, *, strong: bool = True) -> None:
    for vote in net.votes(chain, block.id, strong=strong):
        assert chain.add_vote(vote, now_ms()).result is VoteResult.ADDED


def finalized_run(net: DevNet, x: Chain, y: Chain, blocks: int) -> list[SignedBlock]:
    """``blocks`` blocks made on x with every finalizer voting on each, relayed to y (which
    sees no vote: its LIB comes from the claims blocks carry)."""
    out = []
    for _ in range(blocks):
        block = net.produce(x)
        y.push_block(block, now_ms())
        vote_all(net, x, block)
        out.append(block)
    return out


def test_votes_make_blocks_final_two_behind_the_head(net: DevNet, tmp_path: Path) -> None:
    """Each block carries a strong QC on its parent; a node that only sees the blocks has its
    LIB two blocks behind its head, and the node that saw the votes one block closer."""
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    blocks = finalized_run(net, x, y, 8)
    assert blocks[0].header.qc_claim == QcClaim(BlockNum(0), False) and blocks[0].qc is None
    for parent, block in itertools.pairwise(blocks):
        assert block.header.qc_claim == QcClaim(parent.num, True)
        assert block.qc is not None and block.qc.block_id == parent.id
    assert y.head.id == x.head.id
    assert y.lib == y.head.num - 2
    assert x.lib == x.head.num - 1, "a strong quorum of votes on 8 makes the block it claims final"


def test_without_votes_nothing_becomes_final(net: DevNet, tmp_path: Path) -> None:
    """Blocks keep coming, but with no votes the LIB stays at genesis (no 2/3+1 producer rule)."""
    x = net.open(tmp_path)
    for _ in range(12):
        net.produce(x)
    assert x.head.num == 12 and x.lib == 0
    assert x.head.core is not None
    assert x.head.core.claim == QcClaim(BlockNum(0), False)


def test_weak_votes_make_a_weak_qc_which_finalizes_nothing_alone(
    net: DevNet, tmp_path: Path
) -> None:
    """A weak QC is carried and claimed, but only a strong QC on a later block finalizes."""
    x = net.open(tmp_path)
    first = net.produce(x)
    vote_all(net, x, first, strong=False)
    second = net.produce(x)
    assert second.header.qc_claim == QcClaim(first.num, False)
    assert x.lib == 0
    vote_all(net, x, second)
    assert x.lib == first.num, "a strong QC on 2, which claimed 1, makes 1 final"


def _with_qc(block: SignedBlock, **changes: object) -> SignedBlock:
    assert block.qc is not None
    qc = dataclasses.replace(block.qc, **changes)  # type: ignore[arg-type]
    return SignedBlock(block.header, block.header_bytes, block.signature, block.transactions, qc)


def _carrier(net: DevNet, tmp_path: Path) -> tuple[Chain, Chain, SignedBlock]:
    """x made blocks 1 and 2 (which carries a QC on 1); y holds block 1 only."""
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    first = net.produce(x)
    y.push_block(first, now_ms())
    vote_all(net, x, first)
    return x, y, net.produce(x)


def test_a_qc_with_a_forged_signature_is_refused(net: DevNet, tmp_path: Path) -> None:
    """A signature by a stranger in the carried QC makes the block invalid."""
    _, y, block = _carrier(net, tmp_path)
    assert block.qc is not None
    intruder = PrivateKey.generate().sign(vote_digest(y.chain_id, block.qc.block_id, True))
    forged = _with_qc(block, signatures=(intruder, *block.qc.signatures[1:]))
    with pytest.raises(InvalidBlock, match="forged_qc_signature"):
        y.push_block(forged, now_ms())
    assert y.push_block(block, now_ms()) is Pushed.APPLIED, "the genuine block still applies"


def test_a_qc_with_a_duplicate_signature_is_refused(net: DevNet, tmp_path: Path) -> None:
    """One finalizer's signature counted twice makes the block invalid."""
    _, y, block = _carrier(net, tmp_path)
    assert block.qc is not None
    sigs = block.qc.signatures
    with pytest.raises(InvalidBlock, match="duplicate_qc_vote"):
        y.push_block(_with_qc(block, signatures=(sigs[0], sigs[0], *sigs[2:])), now_ms())


def test_a_qc_below_threshold_is_refused(net: DevNet, tmp_path: Path) -> None:
    """Two signatures of four finalizers are no quorum."""
    _, y, block = _carrier(net, tmp_path)
    assert block.qc is not None
    short = _with_qc(block, strong_bits=bytes([0b0011]), signatures=block.qc.signatures[:2])
    with pytest.raises(InvalidBlock, match="qc_below_threshold"):
        y.push_block(short, now_ms())


def test_a_new_claim_without_its_qc_or_a_qc_without_a_claim_is_refused(
    net: DevNet, tmp_path: Path
) -> None:
    """The QC and the header's claim come together or not at all."""
    x, y, block = _carrier(net, tmp_path)
    stripped = SignedBlock(block.header, block.header_bytes, block.signature, block.transactions)
    with pytest.raises(InvalidBlock, match="without the QC"):
        y.push_block(stripped, now_ms())
    y.push_block(block, now_ms())
    plain = net.produce(x)  # no votes on block 2: it repeats the claim and carries no QC
    assert plain.qc is None
    extra = SignedBlock(plain.header, plain.header_bytes, plain.signature, (), block.qc)
    with pytest.raises(InvalidBlock, match="proves no new claim"):
        y.push_block(extra, now_ms())


def test_a_block_without_a_claim_is_refused_on_a_votes_chain(net: DevNet, tmp_path: Path) -> None:
    """Every block of a finality = votes chain claims a QC."""
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    block = net.produce(x)
    header = dataclasses.replace(block.header, qc_claim=None)
    key = net.keys[header.producer]
    with pytest.raises(InvalidBlock, match="no QC claim"):
        y.push_block(SignedBlock.sign(header, (), y.chain_id, key), now_ms())


def test_fork_choice_prefers_the_newer_qc_then_the_later_slot(net: DevNet, tmp_path: Path) -> None:
    """With equal claims the branch with the later head slot wins, even if shorter; a
    branch whose head claims a newer QC beats both."""
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    base = net.produce(x)
    y.push_block(base, now_ms())
    slot = base.header.slot
    short_first = net.produce(y, slot + 1)
    vote_all(net, y, short_first)
    short_second = net.produce(y, slot + 2)
    assert short_second.header.qc_claim == QcClaim(short_first.num, True)
    late = [net.produce(x, slot + 4 + i) for i in range(2)]
    x.push_block(short_first, now_ms())
    assert x.head.id == late[-1].id, "same claim: the later slot stays"
    x.take_events()
    x.push_block(short_second, now_ms())
    assert x.take_events().popped == late[::-1] and x.head.id == short_second.id


def test_a_final_block_is_never_reverted(net: DevNet, tmp_path: Path) -> None:
    """Once votes make a block final, a conflicting block at its height is stale."""
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    first = net.produce(x)
    vote_all(net, x, first)
    second = net.produce(x)
    vote_all(net, x, second)
    assert x.lib == first.num
    rival = net.produce(y, first.header.slot + 10)
    with pytest.raises(StaleBlock):
        x.push_block(rival, now_ms())


def test_votes_on_unknown_stale_or_foreign_blocks_are_not_counted(
    net: DevNet, tmp_path: Path
) -> None:
    """A vote counts only on a reversible block we hold, by one of its finalizers."""
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    blocks = finalized_run(net, x, y, 3)
    stale = net.votes(x, blocks[0].id)[0]
    assert x.add_vote(stale, now_ms()).result is VoteResult.STALE
    unknown = net.produce(y, x.head.slot + 3)
    assert x.add_vote(net.votes(x, unknown.id)[0], now_ms()).result is VoteResult.UNKNOWN_BLOCK
    head = x.block_by_id(x.head.id)
    stranger = Vote.sign(x.chain_id, head.id, True, net.keys["alice"])
    assert x.add_vote(stranger, now_ms()).result is VoteResult.UNKNOWN_KEY


def test_a_strong_and_a_weak_vote_on_one_block_are_kept_as_evidence(
    net: DevNet, tmp_path: Path
) -> None:
    """An honest finalizer votes once per block: both kinds from one key are evidence, kept
    in the store across a restart, and only the first vote counts."""
    x = net.open(tmp_path)
    block = net.produce(x)
    key = net.keys["producera"]
    strong, weak = (Vote.sign(x.chain_id, block.id, s, key) for s in (True, False))
    assert x.add_vote(strong, now_ms()).result is VoteResult.ADDED
    outcome = x.add_vote(weak, now_ms())
    evidence = outcome.evidence
    assert outcome.result is VoteResult.CONFLICTING
    assert evidence is not None and (evidence.first, evidence.second) == (strong, weak)
    assert x.vote_evidence() == [evidence]
    forged = dataclasses.replace(weak, signature=strong.signature)
    assert x.add_vote(forged, now_ms()).result is VoteResult.INVALID_SIGNATURE
    x.store.close()
    assert net.open(tmp_path).vote_evidence() == [evidence]


def test_finality_state_survives_a_restart(net: DevNet, tmp_path: Path) -> None:
    """Reopened, a node keeps its LIB and the claims of its reversible blocks, and goes on."""
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    finalized_run(net, x, y, 5)
    head, lib = y.head, y.lib
    y.store.close()
    y = net.open(tmp_path / "y")
    assert y.head == head and y.lib == lib
    more = finalized_run(net, x, y, 2)
    assert y.head.id == more[-1].id and y.lib == y.head.num - 2
