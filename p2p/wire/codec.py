"""The only place where bytes from the network become messages, and back.

A frame is ``length (4 bytes, big-endian) || type (1 byte) || payload``; ``length`` counts
type and payload. Blocks and transactions travel as their canonical chain encoding; the other
messages as msgpack arrays. Decoding checks every field and raises ``MalformedMessage``;
the frame length is checked against the limit before anything is read or allocated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chain.core.consensus.block import decode_block
from chain.core.consensus.qc import vote_from_wire
from chain.core.execution.transaction import decode_signed_transaction
from chain.core.primitives.encoding import (
    check_bytes,
    check_int,
    check_list,
    check_str,
    pack,
    unpack,
)
from chain.core.primitives.errors import ChainError
from chain.core.primitives.types import BlockId, TxId
from p2p.errors import MalformedMessage, OversizedFrame
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
    Outbound,
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

HEADER_SIZE = 5
# EOSIO's limit; a block of 5,000 transfers is about 0.6 MB.
MAX_FRAME_SIZE = 8 * 1024 * 1024
# Until a peer has authenticated: the largest message of the handshake phase (an rdma_setup
# with every text field at its limit in 4-byte characters) is 5.1 KiB; three times that.
HANDSHAKE_MAX_FRAME = 16 * 1024
MAX_IDS = 2  # ids per notice or request, as in EOSIO
U32 = 2**32 - 1
I64 = 2**63 - 1

_TYPES: dict[type[Any], int] = {
    Hello: 0,
    Handshake: 1,
    GoAway: 2,
    Time: 3,
    Notice: 4,
    Request: 5,
    SyncRequest: 6,
    BlockMessage: 7,
    RawBlock: 7,
    TransactionMessage: 8,
    RdmaSetup: 9,
    RdmaSyncRequest: 10,
    VoteMessage: 11,
    SnapshotListRequest: 12,
    SnapshotList: 13,
    SnapshotManifestRequest: 14,
    SnapshotManifest: 15,
    SnapshotChunkRequest: 16,
    SnapshotChunk: 17,
    RdmaChunkRequest: 18,
    HeaderRangeRequest: 19,
    HeaderRange: 20,
    TxAnnounce: 21,
    TxRequest: 22,
}
MAX_HEADERS = 500  # signed headers a header_range carries at most
MAX_OFFERS = 8
MAX_CHUNKS = 200_000  # a manifest of 6.4 MB: a 200 GB snapshot in 1 MiB chunks
MIN_CHUNK, MAX_CHUNK = 4096, 4 << 20


def _payload(msg: Outbound) -> bytes:
    if isinstance(msg, BlockMessage | TransactionMessage | RawBlock):
        return msg.raw
    if isinstance(msg, Hello):
        fields: list[Any] = [msg.version, msg.chain_id, msg.node_id, msg.nonce]
    elif isinstance(msg, Handshake):
        fields = [
            msg.version,
            msg.chain_id,
            msg.node_id,
            msg.key,
            msg.signature,
            msg.p2p_address,
            msg.lib_num,
            msg.lib_id,
            msg.head_num,
            msg.head_id,
            msg.agent,
            msg.generation,
            msg.rdma,
            msg.tls_binding,
            msg.first_block,
        ]
    elif isinstance(msg, GoAway):
        fields = [int(msg.reason), msg.node_id, msg.detail]
    elif isinstance(msg, Time):
        fields = [msg.org, msg.rec, msg.xmt, msg.dst]
    elif isinstance(msg, Notice):
        fields = [int(msg.mode), msg.pending, list(msg.ids)]
    elif isinstance(msg, Request):
        fields = [int(msg.mode), list(msg.ids)]
    elif isinstance(msg, RdmaSetup):
        fields = [int(msg.step), list(msg.endpoint), msg.detail]
    elif isinstance(msg, RdmaSyncRequest):
        fields = [msg.start, msg.end, msg.addr, msg.rkey, msg.units]
    elif isinstance(msg, VoteMessage):
        fields = msg.vote.to_wire()
    elif isinstance(msg, SnapshotListRequest):
        fields = []
    elif isinstance(msg, SnapshotList):
        fields = [[o.block_id, o.size, o.chunk_size, o.root] for o in msg.offers]
    elif isinstance(msg, SnapshotManifestRequest):
        fields = [msg.block_id]
    elif isinstance(msg, SnapshotManifest):
        fields = [msg.block_id, b"".join(msg.hashes)]
    elif isinstance(msg, SnapshotChunkRequest):
        fields = [msg.block_id, msg.index]
    elif isinstance(msg, SnapshotChunk):
        fields = [msg.block_id, msg.index, msg.data]
    elif isinstance(msg, RdmaChunkRequest):
        fields = [msg.block_id, msg.index, msg.addr, msg.rkey, msg.units]
    elif isinstance(msg, HeaderRangeRequest):
        fields = [msg.start, msg.count]
    elif isinstance(msg, HeaderRange):
        fields = [msg.start, list(msg.headers)]
    elif isinstance(msg, TxAnnounce | TxRequest):
        fields = [b"".join(msg.ids)]
    else:
        fields = [msg.start, msg.end]
    return pack(fields)


def encode_frame(msg: Outbound) -> bytes:
    payload = _payload(msg)
    length = len(payload) + 1
    if length > MAX_FRAME_SIZE:
        raise OversizedFrame(f"message of {length} bytes exceeds the {MAX_FRAME_SIZE} limit")
    return length.to_bytes(4, "big") + bytes([_TYPES[type(msg)]]) + payload


def frame_length(header: bytes, limit: int = MAX_FRAME_SIZE) -> tuple[int, int]:
    """(message type, payload length) from a 5-byte header; refuses oversized frames."""
    length = int.from_bytes(header[:4], "big")
    if length < 1:
        raise MalformedMessage("empty frame")
    if length > limit:
        raise OversizedFrame(f"frame of {length} bytes exceeds the {limit} limit")
    return header[4], length - 1


# --- decoding -----------------------------------------------------------------------------


def _fields(payload: bytes, what: str, count: int) -> list[Any]:
    raw = unpack(payload, what)
    if type(raw) is not list or len(raw) != count:
        raise MalformedMessage(f"{what}: expected {count} fields")
    return raw


def _ids(value: Any, what: str) -> tuple[BlockId, ...]:
    return tuple(BlockId(check_bytes(v, 32, what)) for v in check_list(value, MAX_IDS, what))


def _hello(payload: bytes) -> Hello:
    r = _fields(payload, "hello", 4)
    return Hello(
        check_int(r[0], 0, 0xFFFF, "hello.version"),
        check_bytes(r[1], 32, "hello.chain_id"),
        check_bytes(r[2], 32, "hello.node_id"),
        check_bytes(r[3], 32, "hello.nonce"),
    )


def _handshake(payload: bytes) -> Handshake:
    r = _fields(payload, "handshake", 15)
    if type(r[3]) is not bytes or len(r[3]) not in (0, 33):
        raise MalformedMessage("handshake.key: expected 0 or 33 bytes")
    if type(r[4]) is not bytes or len(r[4]) not in (0, 65):
        raise MalformedMessage("handshake.signature: expected 0 or 65 bytes")
    if type(r[12]) is not bool:
        raise MalformedMessage("handshake.rdma: expected a boolean")
    if type(r[13]) is not bytes or len(r[13]) not in (0, 32):
        raise MalformedMessage("handshake.tls_binding: expected 0 or 32 bytes")
    hs = Handshake(
        version=check_int(r[0], 0, 0xFFFF, "handshake.version"),
        chain_id=check_bytes(r[1], 32, "handshake.chain_id"),
        node_id=check_bytes(r[2], 32, "handshake.node_id"),
        key=r[3],
        signature=r[4],
        p2p_address=check_str(r[5], 384, "handshake.p2p_address"),
        lib_num=check_int(r[6], 0, U32, "handshake.lib_num"),
        lib_id=BlockId(check_bytes(r[7], 32, "handshake.lib_id")),
        head_num=check_int(r[8], 0, U32, "handshake.head_num"),
        head_id=BlockId(check_bytes(r[9], 32, "handshake.head_id")),
        agent=check_str(r[10], 384, "handshake.agent"),
        generation=check_int(r[11], 0, 0xFFFF, "handshake.generation"),
        rdma=r[12],
        tls_binding=r[13],
        first_block=check_int(r[14], 1, U32, "handshake.first_block"),
    )
    if hs.lib_num > hs.head_num:
        raise MalformedMessage("handshake: LIB above head")
    if hs.first_block > max(1, hs.lib_num):
        raise MalformedMessage("handshake: first block above the LIB")
    return hs


def _go_away(payload: bytes) -> GoAway:
    r = _fields(payload, "go_away", 3)
    reason = check_int(r[0], 0, 255, "go_away.reason")
    if reason not in GoAwayReason._value2member_map_:
        raise MalformedMessage(f"go_away: unknown reason {reason}")
    return GoAway(
        GoAwayReason(reason),
        check_bytes(r[1], 32, "go_away.node_id"),
        check_str(r[2], 1024, "go_away.detail"),
    )


def _time(payload: bytes) -> Time:
    r = _fields(payload, "time", 4)
    return Time(*(check_int(v, 0, I64, "time") for v in r))


def _mode(value: Any, what: str) -> IdListMode:
    return IdListMode(check_int(value, 0, 3, what))


def _notice(payload: bytes) -> Notice:
    r = _fields(payload, "notice", 3)
    return Notice(
        _mode(r[0], "notice.mode"),
        check_int(r[1], 0, U32, "notice.pending"),
        _ids(r[2], "notice.ids"),
    )


def _request(payload: bytes) -> Request:
    r = _fields(payload, "request", 2)
    return Request(_mode(r[0], "request.mode"), _ids(r[1], "request.ids"))


def _sync_request(payload: bytes) -> SyncRequest:
    r = _fields(payload, "sync_request", 2)
    start = check_int(r[0], 0, U32, "sync_request.start")
    end = check_int(r[1], 0, U32, "sync_request.end")
    if end < start:
        raise MalformedMessage("sync_request: end before start")
    return SyncRequest(start, end)


def _block(payload: bytes) -> BlockMessage:
    return BlockMessage(decode_block(payload), payload)


def _transaction(payload: bytes) -> TransactionMessage:
    return TransactionMessage(decode_signed_transaction(payload), payload)


def _rdma_setup(payload: bytes) -> RdmaSetup:
    r = _fields(payload, "rdma_setup", 3)
    step = RdmaStep(check_int(r[0], 1, 3, "rdma_setup.step"))
    endpoint = r[1]
    if type(endpoint) is not list or len(endpoint) > 16:
        raise MalformedMessage("rdma_setup: bad endpoint")
    for value in endpoint:
        if isinstance(value, int):
            check_int(value, 0, 2**64 - 1, "rdma_setup.endpoint")
        elif not isinstance(value, str) or len(value) > 64:
            raise MalformedMessage("rdma_setup: bad endpoint")
    return RdmaSetup(step, tuple(endpoint), check_str(r[2], 256, "rdma_setup.detail"))


def _rdma_sync_request(payload: bytes) -> RdmaSyncRequest:
    r = _fields(payload, "rdma_sync_request", 5)
    start = check_int(r[0], 0, U32, "rdma_sync_request.start")
    end = check_int(r[1], 0, U32, "rdma_sync_request.end")
    if end < start:
        raise MalformedMessage("rdma_sync_request: end before start")
    return RdmaSyncRequest(
        start,
        end,
        check_int(r[2], 0, 2**64 - 1, "rdma_sync_request.addr"),
        check_int(r[3], 0, U32, "rdma_sync_request.rkey"),
        check_int(r[4], 1, 0xFFFF, "rdma_sync_request.units"),
    )


def _vote(payload: bytes) -> VoteMessage:
    return VoteMessage(vote_from_wire(unpack(payload, "vote")))


def _snapshot_list_request(payload: bytes) -> SnapshotListRequest:
    _fields(payload, "snapshot_list_request", 0)
    return SnapshotListRequest()


def _offer(value: Any) -> SnapshotOffer:
    if type(value) is not list or len(value) != 4:
        raise MalformedMessage("snapshot_list: an offer needs 4 fields")
    offer = SnapshotOffer(
        BlockId(check_bytes(value[0], 32, "snapshot_offer.block_id")),
        check_int(value[1], 1, 2**48, "snapshot_offer.size"),
        check_int(value[2], MIN_CHUNK, MAX_CHUNK, "snapshot_offer.chunk_size"),
        check_bytes(value[3], 32, "snapshot_offer.root"),
    )
    if offer.chunks > MAX_CHUNKS:
        raise MalformedMessage("snapshot_offer: too many chunks")
    return offer


def _snapshot_list(payload: bytes) -> SnapshotList:
    raw = unpack(payload, "snapshot_list")
    if type(raw) is not list or len(raw) > MAX_OFFERS:
        raise MalformedMessage(f"snapshot_list: at most {MAX_OFFERS} offers")
    return SnapshotList(tuple(_offer(o) for o in raw))


def _snapshot_manifest_request(payload: bytes) -> SnapshotManifestRequest:
    r = _fields(payload, "snapshot_manifest_request", 1)
    return SnapshotManifestRequest(BlockId(check_bytes(r[0], 32, "snapshot_manifest.block_id")))


def _snapshot_manifest(payload: bytes) -> SnapshotManifest:
    r = _fields(payload, "snapshot_manifest", 2)
    joined = r[1]
    if type(joined) is not bytes or len(joined) % 32 or not 0 < len(joined) <= 32 * MAX_CHUNKS:
        raise MalformedMessage("snapshot_manifest: hashes must be 1 to 200,000 times 32 bytes")
    hashes = tuple(joined[i : i + 32] for i in range(0, len(joined), 32))
    return SnapshotManifest(BlockId(check_bytes(r[0], 32, "snapshot_manifest.block_id")), hashes)


def _snapshot_chunk_request(payload: bytes) -> SnapshotChunkRequest:
    r = _fields(payload, "snapshot_chunk_request", 2)
    return SnapshotChunkRequest(
        BlockId(check_bytes(r[0], 32, "snapshot_chunk_request.block_id")),
        check_int(r[1], 0, MAX_CHUNKS - 1, "snapshot_chunk_request.index"),
    )


def _snapshot_chunk(payload: bytes) -> SnapshotChunk:
    r = _fields(payload, "snapshot_chunk", 3)
    data = r[2]
    if type(data) is not bytes or not 0 < len(data) <= MAX_CHUNK:
        raise MalformedMessage("snapshot_chunk: data must be 1 byte to 4 MiB")
    return SnapshotChunk(
        BlockId(check_bytes(r[0], 32, "snapshot_chunk.block_id")),
        check_int(r[1], 0, MAX_CHUNKS - 1, "snapshot_chunk.index"),
        data,
    )


def _rdma_chunk_request(payload: bytes) -> RdmaChunkRequest:
    r = _fields(payload, "rdma_chunk_request", 5)
    return RdmaChunkRequest(
        BlockId(check_bytes(r[0], 32, "rdma_chunk_request.block_id")),
        check_int(r[1], 0, MAX_CHUNKS - 1, "rdma_chunk_request.index"),
        check_int(r[2], 0, 2**64 - 1, "rdma_chunk_request.addr"),
        check_int(r[3], 0, U32, "rdma_chunk_request.rkey"),
        check_int(r[4], 1, 0xFFFF, "rdma_chunk_request.units"),
    )


def _header_range_request(payload: bytes) -> HeaderRangeRequest:
    r = _fields(payload, "header_range_request", 2)
    return HeaderRangeRequest(
        check_int(r[0], 1, U32, "header_range_request.start"),
        check_int(r[1], 1, MAX_HEADERS, "header_range_request.count"),
    )


def _header_range(payload: bytes) -> HeaderRange:
    r = _fields(payload, "header_range", 2)
    headers = r[1]
    if type(headers) is not list or len(headers) > MAX_HEADERS:
        raise MalformedMessage(f"header_range: headers must be a list of at most {MAX_HEADERS}")
    if any(type(h) is not bytes for h in headers):
        raise MalformedMessage("header_range: every header must be bytes")
    return HeaderRange(check_int(r[0], 1, U32, "header_range.start"), tuple(headers))


def _tx_ids(payload: bytes, what: str) -> tuple[TxId, ...]:
    joined = _fields(payload, what, 1)[0]
    if type(joined) is not bytes or len(joined) % 32 or not 0 < len(joined) <= 32 * MAX_TX_IDS:
        raise MalformedMessage(f"{what}: ids must be 1 to {MAX_TX_IDS} times 32 bytes")
    return tuple(TxId(joined[i : i + 32]) for i in range(0, len(joined), 32))


def _tx_announce(payload: bytes) -> TxAnnounce:
    return TxAnnounce(_tx_ids(payload, "tx_announce"))


def _tx_request(payload: bytes) -> TxRequest:
    return TxRequest(_tx_ids(payload, "tx_request"))


_DECODERS: dict[int, Callable[[bytes], Message]] = {
    0: _hello,
    1: _handshake,
    2: _go_away,
    3: _time,
    4: _notice,
    5: _request,
    6: _sync_request,
    7: _block,
    8: _transaction,
    9: _rdma_setup,
    10: _rdma_sync_request,
    11: _vote,
    12: _snapshot_list_request,
    13: _snapshot_list,
    14: _snapshot_manifest_request,
    15: _snapshot_manifest,
    16: _snapshot_chunk_request,
    17: _snapshot_chunk,
    18: _rdma_chunk_request,
    19: _header_range_request,
    20: _header_range,
    21: _tx_announce,
    22: _tx_request,
}


def decode_message(kind: int, payload: bytes) -> Message:
    """The message of type ``kind``; raises MalformedMessage for anything else."""
    decoder = _DECODERS.get(kind)
    if decoder is None:
        raise MalformedMessage(f"unknown message type {kind}")
    try:
        return decoder(payload)
    except ChainError as err:  # EncodingError and friends from the chain decoders
        raise MalformedMessage(str(err)) from err
    except ValueError as err:  # an IntEnum given a value it lacks
        raise MalformedMessage(str(err)) from err


def decode_frame(frame: bytes, limit: int = MAX_FRAME_SIZE) -> Message:
    """Decode one whole frame (header included)."""
    if len(frame) < HEADER_SIZE:
        raise MalformedMessage("frame shorter than its header")
    kind, length = frame_length(frame[:HEADER_SIZE], limit)
    if len(frame) - HEADER_SIZE != length:
        raise MalformedMessage("frame length does not match its header")
    return decode_message(kind, frame[HEADER_SIZE:])
