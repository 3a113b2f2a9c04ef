"""Blocks: producer schedules, headers, signed blocks and their canonical encoding.

The header's ``state_root`` commits to the whole state after the block
(``chain.core.execution.state_hash``), so two nodes whose states diverge disagree on the next
header, and a snapshot of the state at a block can be checked against that block's header. The block
id is ``num (4 bytes, big-endian) || SHA-256(header)[4:]``, as in EOSIO, so ids sort by height and
a peer can read the height from an id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack

from chain.core.consensus.qc import QcClaim, QuorumCertificate, qc_claim_from_wire, qc_from_wire
from chain.core.execution import engine
from chain.core.execution.transaction import (
    SignedTransaction,
    decoded_kept,
    signed_transaction_from_wire,
)
from chain.core.primitives.crypto import SIGNATURE_SIZE, PrivateKey, check_public_key, sha256
from chain.core.primitives.encoding import (
    check_bytes,
    check_int,
    check_list,
    check_str,
    pack,
    unpack,
)
from chain.core.primitives.errors import ChainError, EncodingError
from chain.core.primitives.types import AccountName, BlockId, BlockNum, PublicKey, is_valid_name

MAX_SCHEDULE = 125  # EOSIO's protocol cap on producers in a schedule
MAX_BLOCK_TXS = 10_000
U32 = 2**32 - 1


@dataclass(frozen=True, slots=True)
class ProducerKey:
    name: AccountName
    key: PublicKey


@dataclass(frozen=True, slots=True)
class Schedule:
    """A versioned, ordered list of producers and the keys that sign their blocks."""

    version: int
    producers: tuple[ProducerKey, ...]

    def to_wire(self) -> list[Any]:
        return [self.version, [[p.name, p.key] for p in self.producers]]

    def names(self) -> tuple[AccountName, ...]:
        return tuple(p.name for p in self.producers)


def schedule_from_wire(raw: Any) -> Schedule:
    if type(raw) is not list or len(raw) != 2:
        raise EncodingError("schedule", "expected [version, producers]")
    version = check_int(raw[0], 0, U32, "schedule.version")
    items = check_list(raw[1], MAX_SCHEDULE, "schedule.producers")
    producers = []
    for item in items:
        if type(item) is not list or len(item) != 2:
            raise EncodingError("schedule.producer", "expected [name, key]")
        name = check_str(item[0], 12, "schedule.producer.name")
        if not is_valid_name(name):
            raise EncodingError("schedule.producer.name", "not an account name")
        try:
            key = check_public_key(check_bytes(item[1], 33, "schedule.producer.key"))
        except ChainError as err:
            raise EncodingError("schedule.producer.key", str(err)) from err
        producers.append(ProducerKey(AccountName(name), key))
    if not producers:
        raise EncodingError("schedule.producers", "a schedule needs a producer")
    return Schedule(version, tuple(producers))


@dataclass(frozen=True, slots=True)
class BlockHeader:
    num: BlockNum
    previous: BlockId
    slot: int
    producer: AccountName
    schedule_version: int
    tx_root: bytes
    state_root: bytes
    new_producers: Schedule | None = None
    # The newest QC on this block's branch (``chain.core.consensus.finality``); only on finality =
    # votes chains, whose headers have this ninth field: a dpos chain's headers and ids are as
    # before.
    qc_claim: QcClaim | None = None

    def pack(self) -> bytes:
        fields = [
            self.num,
            self.previous,
            self.slot,
            self.producer,
            self.schedule_version,
            self.tx_root,
            self.state_root,
            None if self.new_producers is None else self.new_producers.to_wire(),
        ]
        if self.qc_claim is not None:
            fields.append(self.qc_claim.to_wire())
        return pack(fields)


def decode_header(data: bytes) -> BlockHeader:
    raw = unpack(data, "block header")
    if type(raw) is not list or len(raw) not in (8, 9):
        raise EncodingError("block header", "expected 8 or 9 fields")
    producer = check_str(raw[3], 12, "header.producer")
    if not is_valid_name(producer):
        raise EncodingError("header.producer", "not an account name")
    header = BlockHeader(
        num=BlockNum(check_int(raw[0], 1, U32, "header.num")),
        previous=BlockId(check_bytes(raw[1], 32, "header.previous")),
        slot=check_int(raw[2], 0, U32, "header.slot"),
        producer=AccountName(producer),
        schedule_version=check_int(raw[4], 0, U32, "header.schedule_version"),
        tx_root=check_bytes(raw[5], 32, "header.tx_root"),
        state_root=check_bytes(raw[6], 32, "header.state_root"),
        new_producers=None if raw[7] is None else schedule_from_wire(raw[7]),
        qc_claim=qc_claim_from_wire(raw[8]) if len(raw) == 9 else None,
    )
    if pack(raw) != data:  # fields were type-checked: re-packing gives the canonical bytes
        raise EncodingError("block header", "not in canonical encoding")
    return header


def make_block_id(num: int, header_bytes: bytes) -> BlockId:
    return BlockId(num.to_bytes(4, "big") + sha256(header_bytes)[4:])


def header_digest(chain_id: bytes, header_bytes: bytes) -> bytes:
    return sha256(chain_id + header_bytes)


@dataclass(frozen=True, slots=True)
class SignedBlock:
    """A header, the producer's signature over it, the transactions it commits to, and the QC
    that proves a new claim of its header (Spring's QC block extension): the QC is checked
    against the claim, so the signature need not cover it."""

    header: BlockHeader
    header_bytes: bytes
    signature: bytes
    transactions: tuple[SignedTransaction, ...]
    qc: QuorumCertificate | None = None
    id: BlockId = field(init=False)
    # Its canonical bytes: the ones it was decoded from (checked by decode_block), or the
    # first encoding, so that storing, relaying and measuring a block (its size is a rule)
    # encode it once. Not an init field: dataclasses.replace makes a block that encodes itself.
    _encoded: bytes | None = field(init=False, default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", make_block_id(self.header.num, self.header_bytes))

    @property
    def num(self) -> BlockNum:
        return self.header.num

    @classmethod
    def sign(
        cls,
        header: BlockHeader,
        transactions: tuple[SignedTransaction, ...],
        chain_id: bytes,
        key: PrivateKey,
        qc: QuorumCertificate | None = None,
    ) -> SignedBlock:
        header_bytes = header.pack()
        signature = key.sign(header_digest(chain_id, header_bytes))
        return cls(header, header_bytes, signature, transactions, qc)

    def encode(self) -> bytes:
        if self._encoded is not None:
            return self._encoded
        fields = [self.header_bytes, self.signature, [t.to_wire() for t in self.transactions]]
        if self.qc is not None:
            fields.append(self.qc.to_wire())
        encoded = pack(fields)
        object.__setattr__(self, "_encoded", encoded)
        return encoded


@dataclass(frozen=True, slots=True)
class SignedHeader:
    """A block without its transactions: the header, the producer's signature and the QC.
    What a node following the header chain checks (``chain.core.header_chain``): the signature
    and the QC cover no transaction, so the header's rules, its producer's signature, its
    schedule changes and its finality all hold without the body."""

    header: BlockHeader
    header_bytes: bytes
    signature: bytes
    qc: QuorumCertificate | None = None
    id: BlockId = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", make_block_id(self.header.num, self.header_bytes))

    @property
    def num(self) -> BlockNum:
        return self.header.num

    def encode(self) -> bytes:
        fields: list[Any] = [self.header_bytes, self.signature]
        if self.qc is not None:
            fields.append(self.qc.to_wire())
        return pack(fields)


def signed_header_of(block: SignedBlock) -> SignedHeader:
    return SignedHeader(block.header, block.header_bytes, block.signature, block.qc)


def decode_signed_header(data: bytes) -> SignedHeader:
    raw = unpack(data, "signed header")
    if type(raw) is not list or len(raw) not in (2, 3) or type(raw[0]) is not bytes:
        raise EncodingError("signed header", "expected [header, signature, qc?]")
    signed = SignedHeader(
        decode_header(raw[0]),
        raw[0],
        check_bytes(raw[1], SIGNATURE_SIZE, "header.signature"),
        qc_from_wire(raw[2]) if len(raw) == 3 else None,
    )
    if pack(raw) != data:
        raise EncodingError("signed header", "not in canonical encoding")
    return signed


def header_of_encoded_block(data: bytes) -> bytes:
    """The encoded ``SignedHeader`` of an encoded block (one held, so well formed): its
    header, signature and QC cut out of the block's bytes as they are, the transactions
    skipped unread. What a peer following the header chain is sent."""
    fields = msgpack.Unpacker(max_buffer_size=len(data))
    fields.feed(data)
    count = fields.read_array_header()
    parts = []
    for index in range(count):
        start = fields.tell()
        fields.skip()
        if index != 2:  # the transactions
            parts.append(data[start : fields.tell()])
    return bytes([0x90 | len(parts)]) + b"".join(parts)


def decode_transactions(wire: list[Any]) -> tuple[SignedTransaction, ...]:
    """A block's transactions from their wire form: by the compiled decoder where it runs
    (the same transactions and errors; the reference decodes what it does not)."""
    fast = engine.decoder()
    if fast is None:
        return tuple([signed_transaction_from_wire(t) for t in wire])
    return fast(wire, decoded_kept(), signed_transaction_from_wire)


def decode_block(data: bytes) -> SignedBlock:
    raw = unpack(data, "block")
    if type(raw) is not list or len(raw) not in (3, 4) or type(raw[0]) is not bytes:
        raise EncodingError("block", "expected [header, signature, transactions, qc?]")
    header = decode_header(raw[0])
    signature = check_bytes(raw[1], SIGNATURE_SIZE, "block.signature")
    txs = check_list(raw[2], MAX_BLOCK_TXS, "block.transactions")
    qc = qc_from_wire(raw[3]) if len(raw) == 4 else None
    block = SignedBlock(header, raw[0], signature, decode_transactions(txs), qc)
    if pack(raw) != data:  # fields were type-checked: re-packing gives the canonical bytes
        raise EncodingError("block", "not in canonical encoding")
    if type(data) is bytes:  # not a view of a buffer that will be written over
        object.__setattr__(block, "_encoded", data)
    return block
