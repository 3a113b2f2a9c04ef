"""The codec: every message type round-trips (Hypothesis), and random or mutated frames
either decode to a message or raise MalformedMessage."""

from __future__ import annotations

import contextlib
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chain.core.consensus.block import BlockHeader, ProducerKey, Schedule, SignedBlock
from chain.core.consensus.qc import MAX_FINALIZERS, QcClaim, QuorumCertificate, Vote
from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.encoding import pack
from chain.core.primitives.merkle import merkle_root
from chain.core.primitives.types import BlockId, BlockNum, TxId
from p2p.errors import MalformedMessage
from p2p.wire.codec import (
    _TYPES,
    HANDSHAKE_MAX_FRAME,
    I64,
    MAX_HEADERS,
    U32,
    decode_frame,
    encode_frame,
)
from p2p.wire.messages import (
    MAX_TX_IDS,
    BlockMessage,
    GoAway,
    GoAwayReason,
    Handshake,
    HeaderRange,
    HeaderRangeRequest,
    Hello,
    IdListMode,
    Message,
    Notice,
    RawBlock,
    RdmaChunkRequest,
    RdmaSetup,
    RdmaStep,
    RdmaSyncRequest,
    Request,
    SnapshotChunk,
    SnapshotChunkRequest,
    SnapshotList,
    SnapshotListRequest,
    SnapshotManifest,
    SnapshotManifestRequest,
    SnapshotOffer,
    SyncRequest,
    Time,
    TransactionMessage,
    TxAnnounce,
    TxRequest,
    VoteMessage,
)
from tests.chain.core.primitives.test_encoding import names, transactions
from tests.p2p.transport.test_channel_contract import sample_messages

FRAMES = [encode_frame(m) for m in sample_messages()]


@given(st.binary(max_size=2000))
def test_random_bytes(data: bytes) -> None:
    """Random bytes decode to a message or raise MalformedMessage, never another exception."""
    with contextlib.suppress(MalformedMessage):
        decode_frame(data)


@given(st.integers(0, 255), st.binary(max_size=400))
def test_random_payload_of_every_type(kind: int, payload: bytes) -> None:
    """A well-framed random payload under any type byte decodes or raises MalformedMessage."""
    frame = (len(payload) + 1).to_bytes(4, "big") + bytes([kind]) + payload
    with contextlib.suppress(MalformedMessage):
        decode_frame(frame)


@given(st.sampled_from(FRAMES), st.data())
@settings(max_examples=500)
def test_mutated_frames(frame: bytes, data: st.DataObject) -> None:
    """A valid frame with up to four bytes changed is refused or decodes to a message that
    re-encodes to those bytes."""
    mutated = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(5, len(mutated) - 1))
        mutated[index] = data.draw(st.integers(0, 255))
    try:
        message = decode_frame(bytes(mutated))
    except MalformedMessage:
        return
    assert encode_frame(message) == bytes(mutated), "what decodes re-encodes to the same bytes"


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_sync_request_round_trip_or_refusal(start: int, end: int) -> None:
    """A SyncRequest round-trips through its frame; one whose end is below its start is refused."""
    frame = encode_frame(SyncRequest(start, end))
    if end < start:
        try:
            decode_frame(frame)
        except MalformedMessage:
            return
        raise AssertionError("a backwards range was accepted")
    assert decode_frame(frame) == SyncRequest(start, end)


# --- round trips ------------------------------------------------------------------------------

KEY = PrivateKey(b"\x08" * 32)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, U32)
u64 = st.integers(0, 2**64 - 1)
hash32 = st.binary(min_size=32, max_size=32)
block_ids = hash32.map(BlockId)
id_lists = st.lists(block_ids, max_size=2).map(tuple)


@st.composite
def ordered(draw: st.DrawFn, bound: int = U32) -> tuple[int, int]:
    """Two numbers, the first at most the second (a range, or a LIB and a head)."""
    low, high = sorted((draw(st.integers(0, bound)), draw(st.integers(0, bound))))
    return low, high


offers = st.builds(
    SnapshotOffer,
    block_ids,
    st.integers(1, 800_000_000),  # at most 200,000 chunks of the smallest size
    st.integers(4096, 4 << 20),
    hash32,
)


@st.composite
def handshakes(draw: st.DrawFn) -> Handshake:
    lib, head = draw(ordered())
    return Handshake(
        version=draw(u16),
        chain_id=draw(hash32),
        node_id=draw(hash32),
        key=draw(st.sampled_from([b"", KEY.public_key])),
        signature=draw(st.sampled_from([b"", b"\x01" * 65])),
        p2p_address=draw(st.text(max_size=384)),
        lib_num=lib,
        lib_id=draw(block_ids),
        head_num=head,
        head_id=draw(block_ids),
        agent=draw(st.text(max_size=384)),
        generation=draw(u16),
        rdma=draw(st.booleans()),
        tls_binding=draw(st.sampled_from([b"", b"\x07" * 32])),
        first_block=draw(st.integers(1, max(1, lib))),
    )


signed_transactions = transactions.map(lambda tx: SignedTransaction.sign(tx, b"c" * 32, [KEY]))
schedules = st.builds(
    Schedule,
    u32,
    st.lists(names.map(lambda n: ProducerKey(n, KEY.public_key)), min_size=1, max_size=3).map(
        tuple
    ),
)


@st.composite
def blocks(draw: st.DrawFn) -> SignedBlock:
    txs = tuple(draw(st.lists(signed_transactions, max_size=3)))
    header = BlockHeader(
        num=BlockNum(draw(st.integers(1, U32))),
        previous=draw(block_ids),
        slot=draw(u32),
        producer=draw(names),
        schedule_version=draw(u32),
        tx_root=merkle_root([t.id for t in txs]),
        state_root=draw(hash32),
        new_producers=draw(st.none() | schedules),
        qc_claim=draw(st.none() | st.builds(QcClaim, u32.map(BlockNum), st.booleans())),
    )
    qc = None
    if header.qc_claim is not None:
        qc = draw(st.none() | qcs)
    return SignedBlock.sign(header, txs, b"c" * 32, KEY, qc)


bitsets = st.binary(max_size=(MAX_FINALIZERS + 7) // 8)
qcs = st.builds(
    QuorumCertificate,
    block_ids,
    bitsets,
    bitsets,
    st.lists(st.binary(min_size=65, max_size=65), max_size=5).map(tuple),
)
votes = st.builds(
    lambda block_id, strong: Vote.sign(b"c" * 32, block_id, strong, KEY), block_ids, st.booleans()
)


# One strategy per type of the Message union: a new message type fails the coverage test
# below until it gets one here.
STRATEGIES: dict[type[Any], st.SearchStrategy[Message]] = {
    Hello: st.builds(Hello, u16, hash32, hash32, hash32),
    Handshake: handshakes(),
    GoAway: st.builds(GoAway, st.sampled_from(GoAwayReason), hash32, st.text(max_size=1024)),
    Time: st.builds(Time, *[st.integers(0, I64)] * 4),
    Notice: st.builds(Notice, st.sampled_from(IdListMode), u32, id_lists),
    Request: st.builds(Request, st.sampled_from(IdListMode), id_lists),
    SyncRequest: ordered().map(lambda r: SyncRequest(*r)),
    BlockMessage: blocks().map(BlockMessage.of),
    TransactionMessage: signed_transactions.map(TransactionMessage.of),
    VoteMessage: votes.map(VoteMessage),
    RdmaSetup: st.builds(
        RdmaSetup,
        st.sampled_from(RdmaStep),
        st.lists(u64 | st.text(max_size=64), max_size=16).map(tuple),
        st.text(max_size=256),
    ),
    RdmaSyncRequest: st.builds(
        lambda r, addr, rkey, units: RdmaSyncRequest(r[0], r[1], addr, rkey, units),
        ordered(),
        u64,
        u32,
        st.integers(1, 0xFFFF),
    ),
    RdmaChunkRequest: st.builds(
        RdmaChunkRequest, block_ids, st.integers(0, 199_999), u64, u32, st.integers(1, 0xFFFF)
    ),
    SnapshotListRequest: st.just(SnapshotListRequest()),
    SnapshotList: st.lists(offers, max_size=8).map(lambda o: SnapshotList(tuple(o))),
    SnapshotManifestRequest: st.builds(SnapshotManifestRequest, block_ids),
    SnapshotManifest: st.builds(
        SnapshotManifest, block_ids, st.lists(hash32, min_size=1, max_size=20).map(tuple)
    ),
    SnapshotChunkRequest: st.builds(SnapshotChunkRequest, block_ids, st.integers(0, 199_999)),
    SnapshotChunk: st.builds(
        SnapshotChunk, block_ids, st.integers(0, 199_999), st.binary(min_size=1, max_size=64)
    ),
    HeaderRangeRequest: st.builds(HeaderRangeRequest, st.integers(1, U32), st.integers(1, 500)),
    HeaderRange: st.builds(
        HeaderRange, st.integers(1, U32), st.lists(st.binary(max_size=64), max_size=20).map(tuple)
    ),
    TxAnnounce: st.lists(hash32.map(TxId), min_size=1, max_size=20).map(
        lambda ids: TxAnnounce(tuple(ids))
    ),
    TxRequest: st.lists(hash32.map(TxId), min_size=1, max_size=20).map(
        lambda ids: TxRequest(tuple(ids))
    ),
}


def test_every_message_type_has_a_round_trip_strategy() -> None:
    """The round trip below covers the whole Message union."""
    assert set(STRATEGIES) == set(get_args(Message))


@given(st.one_of(*STRATEGIES.values()))
@settings(max_examples=500)
def test_every_message_round_trips(message: Message) -> None:
    """Any valid message of any type decodes from its frame to an equal message, and that
    re-encodes to the same bytes."""
    frame = encode_frame(message)
    assert decode_frame(frame) == message
    assert encode_frame(decode_frame(frame)) == frame


@given(blocks())
@settings(max_examples=50)
def test_a_raw_block_arrives_as_the_block_message(block: SignedBlock) -> None:
    """A block served as its stored bytes (RawBlock) decodes as the BlockMessage of the block."""
    assert decode_frame(encode_frame(RawBlock(block.encode()))) == BlockMessage.of(block)


def test_the_largest_handshake_phase_messages_fit_the_handshake_frame_limit() -> None:
    """Every message a peer sends before it is authenticated (hello, handshake, go_away,
    rdma_setup), with each field at its limit in 4-byte characters, fits HANDSHAKE_MAX_FRAME
    with room to spare, so the small limit refuses only what no honest peer sends."""
    wide = "\U0001f600"
    handshake = Handshake(
        0xFFFF, b"c" * 32, b"n" * 32, KEY.public_key, b"\x01" * 65, wide * 384,
        U32, BlockId(b"\x02" * 32), U32, BlockId(b"\x03" * 32), wide * 384, 0xFFFF, True,
        b"\x04" * 32,
    )  # fmt: skip
    largest: list[Message] = [
        Hello(0xFFFF, b"c" * 32, b"n" * 32, b"r" * 32),
        handshake,
        GoAway(GoAwayReason.FATAL_OTHER, b"n" * 32, wide * 1024),
        RdmaSetup(RdmaStep.OFFER, (wide * 64,) * 16, wide * 256),
    ]
    for message in largest:
        frame = encode_frame(message)
        assert decode_frame(frame) == message
        assert len(frame) * 3 < HANDSHAKE_MAX_FRAME, type(message).__name__


def test_a_tls_binding_of_another_size_is_refused() -> None:
    """A handshake's TLS binding is empty or a SHA-256; anything else is malformed."""
    zero = BlockId(b"\x00" * 32)
    hs = Handshake(1, b"c" * 32, b"n" * 32, b"", b"", "", 0, zero, 0, zero, "", 1, False, b"x" * 31)
    with pytest.raises(MalformedMessage, match="tls_binding"):
        decode_frame(encode_frame(hs))


def test_a_first_block_above_the_lib_is_refused() -> None:
    """A peer cannot hold fewer blocks than its LIB (a snapshot starts at an irreversible
    block): a handshake saying so is malformed."""
    zero = BlockId(b"\x00" * 32)
    hs = Handshake(2, b"c" * 32, b"n" * 32, b"", b"", "", 10, zero, 20, zero, "", 1, False, b"", 11)
    with pytest.raises(MalformedMessage, match="first block above the LIB"):
        decode_frame(encode_frame(hs))


def test_a_snapshot_offer_of_too_many_chunks_and_an_empty_chunk_are_refused() -> None:
    """A peer cannot make us expect a manifest of millions of hashes, nor send empty chunks."""
    zero = BlockId(b"\x00" * 32)
    huge = SnapshotList((SnapshotOffer(zero, 2**40, 4096, b"r" * 32),))
    with pytest.raises(MalformedMessage, match="too many chunks"):
        decode_frame(encode_frame(huge))
    with pytest.raises(MalformedMessage, match="snapshot_chunk"):
        decode_frame(encode_frame(SnapshotChunk(zero, 0, b"")))


def test_a_header_range_beyond_its_bound_is_refused() -> None:
    """A peer cannot ask for, nor send, more than MAX_HEADERS headers at once, nor headers
    that are not bytes."""
    with pytest.raises(MalformedMessage, match=r"header_range_request\.count"):
        decode_frame(encode_frame(HeaderRangeRequest(1, MAX_HEADERS + 1)))
    with pytest.raises(MalformedMessage, match="at most"):
        decode_frame(encode_frame(HeaderRange(1, (b"h",) * (MAX_HEADERS + 1))))
    payload = pack([1, ["a header as text"]])
    frame = (len(payload) + 1).to_bytes(4, "big") + bytes([_TYPES[HeaderRange]]) + payload
    with pytest.raises(MalformedMessage, match="must be bytes"):
        decode_frame(frame)


def test_tx_ids_beyond_the_bound_none_or_not_whole_are_refused() -> None:
    """A tx_announce or tx_request of more than MAX_TX_IDS ids, of none, or of bytes that are
    not whole 32-byte ids is refused as malformed."""
    ids = tuple(TxId(i.to_bytes(32, "big")) for i in range(MAX_TX_IDS + 1))
    for message in (TxAnnounce(ids), TxRequest(ids), TxAnnounce(()), TxRequest(())):
        with pytest.raises(MalformedMessage):
            decode_frame(encode_frame(message))
    payload = pack([b"\x01" * 33])
    frame = (len(payload) + 1).to_bytes(4, "big") + bytes([_TYPES[TxAnnounce]]) + payload
    with pytest.raises(MalformedMessage):
        decode_frame(frame)
