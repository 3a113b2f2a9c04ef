"""Following the header chain from genesis learns the LIB a full node has (by producer marks
on dpos chains, by the QCs blocks carry on votes chains) and the header state it holds
there, and trusts exactly the blocks at or below it; a header that breaks a rule is refused
with those before it kept, and a batch that continues no block held is told apart from one
that switches branch above the LIB."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from chain.controller import Chain
from chain.core.block_transition import process_signed_header
from chain.core.consensus.block import (
    SignedBlock,
    SignedHeader,
    decode_signed_header,
    signed_header_of,
)
from chain.core.execution.actions import Transfer
from chain.core.header_chain import CHECKPOINT_VERSION, HeaderChain, NotContinuing
from chain.core.primitives.crypto import sha256
from chain.core.primitives.encoding import pack, unpack
from chain.core.primitives.errors import EncodingError, InvalidBlock
from chain.core.primitives.params import SLOT_MS, slot_start_ms
from chain.core.primitives.types import AccountName, BlockId
from chain.testing import now_ms
from genesis.testing import DevNet


def _follower(net: DevNet) -> HeaderChain:
    initial = net.genesis.to_initial_state()
    return HeaderChain(initial.header_state(), initial.params, initial.chain_id)


def _headers(chain: Chain, first: int, last: int) -> list[SignedHeader]:
    """The signed headers of ``chain``'s blocks, sent and received as a peer would."""
    return [
        decode_signed_header(signed_header_of(chain.block_by_num(n)).encode())
        for n in range(first, last + 1)
    ]


def test_following_a_dpos_chain_trusts_what_it_made_irreversible(tmp_path: Path) -> None:
    """The followed LIB is the full node's, ids at or below it are trusted, the head and an
    id of another block at a trusted height are not."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    for k in range(12):
        chain.admit_transaction(
            net.tx(chain, Transfer(AccountName("alice"), AccountName("bob"), k + 1)), now_ms()
        )
        net.produce(chain)
    follow = _follower(net)
    assert follow.extend(_headers(chain, 1, 12), now_ms()) == 12
    assert (follow.tip.id, follow.lib) == (chain.head.id, chain.lib)
    assert 0 < chain.lib < 12
    assert follow.trusts(chain.block_by_num(chain.lib).id)
    assert follow.trusts(chain.block_by_num(1).id)
    head, _ = chain.store.lib_state(chain.chain_id)  # what a snapshot of the LIB carries
    assert follow.header_state_digest(head.block.id) == sha256(head.header_state.encode())
    assert not follow.trusts(chain.head.id), "above the LIB: not irreversible yet"
    other = BlockId(chain.block_by_num(1).id[:4] + bytes(28))
    assert not follow.trusts(other)


def test_a_forged_header_is_refused_and_those_before_it_stay(tmp_path: Path) -> None:
    """A header signed by a key other than its slot's producer's raises InvalidBlock; the
    headers before it in the batch stay followed."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    for _ in range(6):
        net.produce(chain)
    headers = _headers(chain, 1, 6)
    wrong = next(k for n, k in net.keys.items() if n != headers[3].header.producer)
    forged = SignedHeader(
        headers[3].header,
        headers[3].header_bytes,
        wrong.sign(b"\x00" * 32),
        headers[3].qc,
    )
    follow = _follower(net)
    with pytest.raises(InvalidBlock, match="not signed by"):
        follow.extend([*headers[:3], forged, *headers[4:]], now_ms())
    assert follow.tip.num == 3
    assert follow.extend(headers[3:], now_ms()) == 3, "the genuine ones go on from there"


def test_a_batch_that_skips_ahead_continues_nothing(tmp_path: Path) -> None:
    """Headers starting past the tip (or below the LIB) raise NotContinuing, and change
    nothing."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    for _ in range(8):
        net.produce(chain)
    follow = _follower(net)
    with pytest.raises(NotContinuing):
        follow.extend(_headers(chain, 3, 8), now_ms())
    assert follow.tip.num == 0
    follow.extend(_headers(chain, 1, 8), now_ms())
    assert follow.lib > 1
    with pytest.raises(NotContinuing):
        follow.extend(_headers(chain, 1, 2), now_ms())


def test_another_branch_above_the_lib_replaces_the_one_followed(tmp_path: Path) -> None:
    """Two branches from genesis, neither irreversible yet: following the second from the
    LIB on switches to it."""
    net = DevNet.create(3, blocks_per_turn=1)
    a, b = net.open(tmp_path / "a"), net.open(tmp_path / "b")
    net.produce(a)
    b.admit_transaction(net.tx(b, Transfer(AccountName("alice"), AccountName("bob"), 1)), now_ms())
    net.produce(b)
    assert a.head.id != b.head.id and a.lib == b.lib == 0
    follow = _follower(net)
    follow.extend(_headers(a, 1, 1), now_ms())
    follow.extend(_headers(b, 1, 1), now_ms())
    assert follow.tip.id == b.head.id


def test_following_a_votes_chain_takes_its_lib_from_the_qcs_blocks_carry(
    tmp_path: Path,
) -> None:
    """On finality = votes, each header's QC is checked against its claim and the LIB comes
    from the claims, as on a node that saw only the blocks; a header whose QC was stripped
    is refused."""
    net = DevNet.create(4, blocks_per_turn=1, finality="votes")
    chain, seen = net.open(tmp_path / "a"), net.open(tmp_path / "b")
    blocks: list[SignedBlock] = []
    for _ in range(8):
        block = net.produce(chain)
        seen.push_block(block, now_ms())  # a node that sees the blocks and no vote
        for vote in net.votes(chain, block.id):
            chain.add_vote(vote, now_ms())
        blocks.append(block)
    follow = _follower(net)
    assert follow.extend(_headers(chain, 1, 8), now_ms()) == 8
    assert follow.lib == 6 and follow.trusts(blocks[5].id)
    head, _ = seen.store.lib_state(seen.chain_id)
    assert head.num == 6
    assert follow.header_state_digest(head.block.id) == sha256(head.header_state.encode()), (
        "the header state followed is the full node's, finality core included"
    )
    stripped = dataclasses.replace(_headers(chain, 2, 2)[0], qc=None)
    bare = _follower(net)
    bare.extend(_headers(chain, 1, 1), now_ms())
    with pytest.raises(InvalidBlock, match="without the QC"):
        process_signed_header(
            bare.tip, stripped, params=bare.params, chain_id=bare.chain_id, now_ms=now_ms()
        )


def test_a_forged_header_on_another_branch_does_not_cost_the_branch_held(
    tmp_path: Path,
) -> None:
    """A header continuing an earlier block, but breaking a rule, is refused before anything
    is dropped: the branch followed stays whole."""
    net = DevNet.create(3, blocks_per_turn=1)
    a, b = net.open(tmp_path / "a"), net.open(tmp_path / "b")
    net.produce(a)
    b.admit_transaction(net.tx(b, Transfer(AccountName("alice"), AccountName("bob"), 1)), now_ms())
    net.produce(b)
    follow = _follower(net)
    follow.extend(_headers(a, 1, 1), now_ms())
    genuine = _headers(b, 1, 1)[0]
    forged = dataclasses.replace(genuine, signature=_headers(a, 1, 1)[0].signature)
    with pytest.raises(InvalidBlock):
        follow.extend([forged], now_ms())
    assert follow.tip.id == a.head.id


def test_a_header_ahead_of_our_clock_stops_the_batch_without_a_fault(tmp_path: Path) -> None:
    """By a clock behind the producers', the newest headers look to be in the future: the
    batch stops before them with no error (the peer is not at fault), and they are followed
    once the clock has caught up."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    for _ in range(6):
        net.produce(chain)
    headers = _headers(chain, 1, 6)
    slow_clock = slot_start_ms(headers[3].header.slot) - 2 * SLOT_MS
    follow = _follower(net)
    assert follow.extend(headers, slow_clock) == 3
    assert follow.extend(headers[3:], now_ms()) == 3


def test_a_checkpoint_resumes_following_from_its_lib_with_the_final_blocks_it_knew(
    tmp_path: Path,
) -> None:
    """``checkpoint`` and ``HeaderChain.resume`` give back the LIB's header state (finality
    core included, on a votes chain) and the final blocks remembered: the chain resumed
    vouches for the same blocks with the same header state digests, and follows the next
    headers from its LIB on to the full node's LIB."""
    net = DevNet.create(4, blocks_per_turn=1, finality="votes")
    chain = net.open(tmp_path)
    for _ in range(12):
        block = net.produce(chain)
        for vote in net.votes(chain, block.id):
            chain.add_vote(vote, now_ms())
    follow = _follower(net)
    follow.extend(_headers(chain, 1, 8), now_ms())
    assert 0 < follow.lib < 8
    resumed = HeaderChain.resume(follow.checkpoint().encode(), follow.params, follow.chain_id)
    assert resumed.lib == resumed.tip.num == follow.lib, "followed on from the LIB"
    for num in range(1, follow.lib + 1):
        block_id = chain.block_by_num(num).id
        assert resumed.header_state_digest(block_id) is not None
        assert resumed.header_state_digest(block_id) == follow.header_state_digest(block_id)
    assert resumed.extend(_headers(chain, resumed.lib + 1, 12), now_ms()) == 12 - follow.lib
    whole = _follower(net)
    whole.extend(_headers(chain, 1, 12), now_ms())
    assert (resumed.lib, resumed.tip.id) == (whole.lib, whole.tip.id) and whole.lib > follow.lib
    lib_id = chain.block_by_num(whole.lib).id
    assert resumed.header_state_digest(lib_id) == whole.header_state_digest(lib_id)


def test_a_damaged_foreign_or_other_version_checkpoint_is_refused(tmp_path: Path) -> None:
    """A checkpoint with a byte changed, of another chain, of another version, or with a
    header state of the wrong types behind a matching digest raises EncodingError naming
    the problem."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    for _ in range(6):
        net.produce(chain)
    follow = _follower(net)
    follow.extend(_headers(chain, 1, 6), now_ms())
    raw = bytearray(follow.checkpoint().encode())
    raw[len(raw) // 2] ^= 1
    with pytest.raises(EncodingError, match="damaged"):
        HeaderChain.resume(bytes(raw), follow.params, follow.chain_id)
    with pytest.raises(EncodingError, match="another chain"):
        HeaderChain.resume(follow.checkpoint().encode(), follow.params, bytes(32))
    fields = unpack(follow.checkpoint().encode()[32:], "checkpoint")
    fields[0] = CHECKPOINT_VERSION + 1
    body = pack(fields)
    with pytest.raises(EncodingError, match="version"):
        HeaderChain.resume(sha256(body) + body, follow.params, follow.chain_id)
    # Written as damaged, with a digest to match: the LIB's block number a string.
    fields[0] = CHECKPOINT_VERSION
    state = unpack(fields[2], "header state")
    state[1] = str(state[1])
    fields[2] = pack(state)
    body = pack(fields)
    with pytest.raises(EncodingError, match="header state block number"):
        HeaderChain.resume(sha256(body) + body, follow.params, follow.chain_id)


def test_judging_changes_nothing_and_adopting_the_judgement_follows_the_headers(
    tmp_path: Path,
) -> None:
    """``judge`` leaves the chain as it was (it may run on another thread) and stops at a
    forged header with its error; ``adopt`` then follows those before it, as ``extend``
    does; a judgement of a block the chain no longer holds is not adopted."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path)
    for _ in range(8):
        net.produce(chain)
    headers = _headers(chain, 1, 8)
    forged = dataclasses.replace(headers[5], signature=headers[6].signature)
    follow = _follower(net)
    before = follow.checkpoint().encode()
    judged = follow.judge([*headers[:5], forged, *headers[6:]], now_ms())
    assert follow.checkpoint().encode() == before and follow.tip.num == 0, "nothing changed"
    assert len(judged.states) == 5 and isinstance(judged.error, InvalidBlock)
    assert follow.adopt(judged) == 5
    twin = _follower(net)
    with pytest.raises(InvalidBlock):
        twin.extend([*headers[:5], forged, *headers[6:]], now_ms())
    assert (follow.tip.id, follow.lib) == (twin.tip.id, twin.lib)
    assert follow.tip.id == headers[4].id
    stale = follow.judge(headers[5:6], now_ms())
    follow.adopt(follow.judge(headers[5:7], now_ms()))
    with pytest.raises(NotContinuing):
        follow.adopt(dataclasses.replace(stale, parent=headers[0].id))
