"""Every wire message, one frozen dataclass each, in one closed union.

The message set follows EOSIO's net_plugin (handshake, go_away with typed reasons, time,
notice, request, sync_request, signed block, packed transaction) plus ``Hello``, which
carries the nonce the other side must sign: EOSIO signs only a timestamp, which a recorder
could replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from chain.core.consensus.block import SignedBlock
from chain.core.consensus.qc import Vote
from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.types import BlockId, TxId

# 2: handshakes say the first block a node holds (nodes started from a snapshot).
# 3: the de-duplication set in the state commitment as one id list per block.
# 4: transactions relayed on are announced by id and fetched (tx_announce, tx_request).
PROTOCOL_VERSION = 4
# Transaction ids a tx_announce or a tx_request carries at most.
MAX_TX_IDS = 1024


class GoAwayReason(IntEnum):
    """Why a peer is sent away (EOSIO's values, plus BANNED)."""

    NO_REASON = 0
    SELF = 1
    DUPLICATE = 2
    WRONG_CHAIN = 3
    WRONG_VERSION = 4
    FORKED = 5
    UNLINKABLE = 6
    BAD_TRANSACTION = 7
    VALIDATION = 8
    BENIGN_OTHER = 9
    FATAL_OTHER = 10
    AUTHENTICATION = 11
    BANNED = 12
    TLS_MISMATCH = 13  # one side has p2p-tls = on, the other off (``p2p.transport.tls``)

    @property
    def retry(self) -> bool:
        """Whether the dialing side may reconnect later (EOSIO: benign and version only; a TLS
        mismatch, like a version, lasts until an operator changes one side)."""
        return self in (
            GoAwayReason.BENIGN_OTHER,
            GoAwayReason.WRONG_VERSION,
            GoAwayReason.BANNED,
            GoAwayReason.TLS_MISMATCH,
        )


class IdListMode(IntEnum):
    NONE = 0
    CATCH_UP = 1
    LAST_IRR_CATCH_UP = 2
    NORMAL = 3


@dataclass(frozen=True, slots=True)
class Hello:
    """First message on a connection: who we are and the nonce the peer must sign."""

    version: int
    chain_id: bytes
    node_id: bytes
    nonce: bytes


@dataclass(frozen=True, slots=True)
class Handshake:
    """Our chain position and a signature by ``key`` over the peer's nonce and
    ``tls_binding``: the SHA-256 of the listener's TLS certificate as the signer saw it, or
    empty where the connection runs without TLS (``p2p.transport.tls``)."""

    version: int
    chain_id: bytes
    node_id: bytes
    key: bytes
    signature: bytes
    p2p_address: str
    lib_num: int
    lib_id: BlockId
    head_num: int
    head_id: BlockId
    agent: str
    generation: int
    rdma: bool = False
    tls_binding: bytes = b""
    first_block: int = 1  # the lowest block the peer holds: never ask it for older ones


@dataclass(frozen=True, slots=True)
class GoAway:
    reason: GoAwayReason
    node_id: bytes
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Time:
    """Keepalive and RTT, NTP style (nanoseconds): origin, receive, transmit, destination."""

    org: int
    rec: int
    xmt: int
    dst: int = 0


@dataclass(frozen=True, slots=True)
class Notice:
    """What we have: a mode, a pending block number (head or LIB) and block ids."""

    mode: IdListMode
    pending: int
    ids: tuple[BlockId, ...] = ()


@dataclass(frozen=True, slots=True)
class Request:
    """Ask for the branch ending in ``ids`` (catch_up) from the peer's fork point."""

    mode: IdListMode
    ids: tuple[BlockId, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """Blocks ``start``..``end`` inclusive; (0, 0) cancels."""

    start: int
    end: int


@dataclass(frozen=True, slots=True)
class BlockMessage:
    """A signed block and its canonical bytes (encoded once, sent to every peer as is)."""

    block: SignedBlock
    raw: bytes

    @classmethod
    def of(cls, block: SignedBlock) -> BlockMessage:
        return cls(block, block.encode())


@dataclass(frozen=True, slots=True)
class RawBlock:
    """Outbound only: a block served from our store as the bytes we hold, without decoding
    it first (serving a range would otherwise cost a full decode per block). The receiver
    decodes it as a ``BlockMessage``."""

    raw: bytes


@dataclass(frozen=True, slots=True)
class TransactionMessage:
    tx: SignedTransaction
    raw: bytes

    @classmethod
    def of(cls, tx: SignedTransaction) -> TransactionMessage:
        return cls(tx, tx.encode())


@dataclass(frozen=True, slots=True)
class TxAnnounce:
    """Ids of transactions the sender holds (Ethereum's eth/68 announcements): a transaction
    one node relays on to another goes as its id, which the other asks for (``TxRequest``)
    only if it lacks it. Only the first hop carries the whole transaction, so a full mesh of
    n nodes moves each one n - 1 times instead of (n - 1)^2."""

    ids: tuple[TxId, ...]


@dataclass(frozen=True, slots=True)
class TxRequest:
    """Send me these transactions of those you announced (the ones you still hold)."""

    ids: tuple[TxId, ...]


@dataclass(frozen=True, slots=True)
class VoteMessage:
    """A finalizer's vote on a block (Spring's ``vote_message``; ``p2p.relay.votes``)."""

    vote: Vote


@dataclass(frozen=True, slots=True)
class SnapshotOffer:
    """A snapshot a peer serves: its block, its size, how it is cut into chunks, and the
    BLAKE3 of the chunks' BLAKE3 hashes in order (the root a manifest must hash to)."""

    block_id: BlockId
    size: int
    chunk_size: int
    root: bytes

    @property
    def chunks(self) -> int:
        return -(-self.size // self.chunk_size)


@dataclass(frozen=True, slots=True)
class SnapshotListRequest:
    """Which snapshots do you serve? (state sync, ``p2p.statesync.reactor``)"""


@dataclass(frozen=True, slots=True)
class SnapshotList:
    offers: tuple[SnapshotOffer, ...]


@dataclass(frozen=True, slots=True)
class SnapshotManifestRequest:
    block_id: BlockId


@dataclass(frozen=True, slots=True)
class SnapshotManifest:
    """The chunk hashes of a snapshot, in order."""

    block_id: BlockId
    hashes: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class SnapshotChunkRequest:
    block_id: BlockId
    index: int


@dataclass(frozen=True, slots=True)
class SnapshotChunk:
    block_id: BlockId
    index: int
    data: bytes


@dataclass(frozen=True, slots=True)
class HeaderRangeRequest:
    """The signed headers of blocks ``start`` .. ``start + count - 1``: what a node that
    follows the header chain to learn a block it can trust asks (``p2p.blocksync.headers``)."""

    start: int
    count: int


@dataclass(frozen=True, slots=True)
class HeaderRange:
    """Encoded ``chain.core.consensus.block.SignedHeader``s of consecutive blocks from ``start`` on;
    fewer than asked when the sender holds no more."""

    start: int
    headers: tuple[bytes, ...]


class RdmaStep(IntEnum):
    OFFER = 1  # the dialling side: here is my queue pair and ring
    ACCEPT = 2  # the listening side: and here is mine
    DECLINE = 3  # the listening side: not now (``detail`` says why); stay on TCP


@dataclass(frozen=True, slots=True)
class RdmaSetup:
    """Moving a connection to RDMA, on the TCP channel right after the handshakes, when both
    advertised ``rdma``: the endpoint is ``p2p.rdma.channel.Endpoint.to_wire()``."""

    step: RdmaStep
    endpoint: tuple[int | str, ...] = ()
    detail: str = ""


@dataclass(frozen=True, slots=True)
class RdmaSyncRequest:
    """A sync_request over RDMA, naming where the blocks should be written: a landing zone
    of ``units`` KiB at ``addr`` (rkey ``rkey``) in the requester's registered memory. The
    RDMA channel makes and consumes it; above the channel it is a plain ``SyncRequest``."""

    start: int
    end: int
    addr: int
    rkey: int
    units: int


@dataclass(frozen=True, slots=True)
class RdmaChunkRequest:
    """A snapshot_chunk_request over RDMA, naming the requester's landing zone as
    ``RdmaSyncRequest`` does, so the chunk is written straight into it. The RDMA channel
    makes and consumes it; above the channel it is a plain ``SnapshotChunkRequest``."""

    block_id: BlockId
    index: int
    addr: int
    rkey: int
    units: int


Message = (
    Hello
    | Handshake
    | GoAway
    | Time
    | Notice
    | Request
    | SyncRequest
    | BlockMessage
    | TransactionMessage
    | TxAnnounce
    | TxRequest
    | VoteMessage
    | RdmaSetup
    | RdmaSyncRequest
    | RdmaChunkRequest
    | SnapshotListRequest
    | SnapshotList
    | SnapshotManifestRequest
    | SnapshotManifest
    | SnapshotChunkRequest
    | SnapshotChunk
    | HeaderRangeRequest
    | HeaderRange
)
Outbound = Message | RawBlock
