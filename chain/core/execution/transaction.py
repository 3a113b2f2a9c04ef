"""Transactions: header fields for replay protection, actions, signatures.

The signed bytes are the canonical encoding of the unsigned transaction (``packed``); the id
is its SHA-256, and signatures cover SHA-256(chain id || packed), so a signature is only valid
on one chain. A signed transaction travels as ``[packed, [signature, ...]]``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from chain.core.execution.actions import Action, action_to_json, decode_action, encode_action
from chain.core.primitives.crypto import SIGNATURE_SIZE, PrivateKey, sha256
from chain.core.primitives.encoding import check_bytes, check_int, check_list, pack, unpack
from chain.core.primitives.errors import EncodingError
from chain.core.primitives.types import AccountName, BlockId, TxId

MAX_ACTIONS = 16
MAX_SIGNATURES = 16
U32 = 2**32 - 1
# Transactions decoded on their own lately (relayed by a peer, pushed over the RPC) are kept by
# their packed bytes, this many at most: the block that includes one carries the same bytes,
# and on a node of a live network the block's decoding then finds each of its transactions
# here instead of decoding it a second time (a tenth of a producer's CPU under load). Only
# what decoding gave for exactly those bytes is kept, so what a block decodes to is the same.
# Bounded in packed bytes too: 600 setcodes of 261 KB pushed at once were all kept (with their
# decoded code, twice the bytes) long after the mempool had refused or included them. 16 MiB
# is four blocks of the default max_block_bytes, while 20,000 transfers take about 4 MiB.
DECODED_KEPT = 20_000
DECODED_KEPT_BYTES = 16 << 20
_decoded: dict[bytes, Transaction] = {}
_decoded_bytes = 0
_decoded_lock = threading.Lock()  # the RPC's and the network's threads both decode


@dataclass(frozen=True, slots=True)
class Transaction:
    """An unsigned transaction. ``expiration`` is in unix seconds."""

    expiration: int
    ref_block_num: int
    ref_block_prefix: int
    actions: tuple[Action, ...]

    def pack(self) -> bytes:
        return pack(
            [
                self.expiration,
                self.ref_block_num,
                self.ref_block_prefix,
                [encode_action(a) for a in self.actions],
            ]
        )

    def actors(self) -> tuple[AccountName, ...]:
        """Every account that must sign, in first-appearance order."""
        if len(self.actions) == 1:
            return self.actions[0].actors()
        seen: dict[AccountName, None] = {}
        for action in self.actions:
            for actor in action.actors():
                seen[actor] = None
        return tuple(seen)


def tapos_of(block_id: BlockId) -> tuple[int, int]:
    """The (ref_block_num, ref_block_prefix) pair that names ``block_id`` (EOSIO's rule)."""
    num = int.from_bytes(block_id[:4], "big")
    return num & 0xFFFF, int.from_bytes(block_id[8:12], "little")


def signing_digest(chain_id: bytes, packed: bytes) -> bytes:
    return sha256(chain_id + packed)


@dataclass(frozen=True, slots=True)
class SignedTransaction:
    """A transaction with its canonical bytes, signatures and id."""

    tx: Transaction
    packed: bytes
    signatures: tuple[bytes, ...]
    id: TxId = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", TxId(sha256(self.packed)))

    @classmethod
    def sign(cls, tx: Transaction, chain_id: bytes, keys: list[PrivateKey]) -> SignedTransaction:
        packed = tx.pack()
        digest = signing_digest(chain_id, packed)
        return cls(tx, packed, tuple(k.sign(digest) for k in keys))

    def to_wire(self) -> list[Any]:
        return [self.packed, list(self.signatures)]

    def encode(self) -> bytes:
        return pack(self.to_wire())

    @property
    def size(self) -> int:
        return len(self.packed) + SIGNATURE_SIZE * len(self.signatures)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id.hex(),
            "expiration": self.tx.expiration,
            "ref_block_num": self.tx.ref_block_num,
            "ref_block_prefix": self.tx.ref_block_prefix,
            "actions": [action_to_json(a) for a in self.tx.actions],
            "signatures": [s.hex() for s in self.signatures],
        }


def decode_transaction(packed: bytes) -> Transaction:
    """Decode and check an unsigned transaction. Runs for every transaction of every block
    synced, so the checks are written out (each as ``check_int`` and the others would do it,
    with their errors) rather than called: 4.7 against 3.4 microseconds a transfer (measured)."""
    raw = unpack(packed, "transaction")
    if type(raw) is not list or len(raw) != 4:
        raise EncodingError("transaction", "expected [expiration, ref_num, ref_prefix, actions]")
    expiration, ref_num, ref_prefix, actions = raw
    if type(expiration) is not int or not 0 <= expiration <= U32:
        check_int(expiration, 0, U32, "transaction.expiration")
    if type(ref_num) is not int or not 0 <= ref_num <= 0xFFFF:
        check_int(ref_num, 0, 0xFFFF, "transaction.ref_block_num")
    if type(ref_prefix) is not int or not 0 <= ref_prefix <= U32:
        check_int(ref_prefix, 0, U32, "transaction.ref_block_prefix")
    if type(actions) is not list or not 1 <= len(actions) <= MAX_ACTIONS:
        check_list(actions, MAX_ACTIONS, "transaction.actions")
        raise EncodingError("transaction.actions", "a transaction needs at least one action")
    decoded = (
        (decode_action(actions[0]),)
        if len(actions) == 1
        else tuple([decode_action(a) for a in actions])
    )
    tx = Transaction(expiration, ref_num, ref_prefix, decoded)
    # Every field was type-checked above, so re-packing what was unpacked gives the canonical
    # bytes: a cheaper test than re-encoding the objects.
    if pack(raw) != packed:
        raise EncodingError("transaction", "not in canonical encoding")
    return tx


def signed_transaction_from_wire(raw: Any) -> SignedTransaction:
    if type(raw) is not list or len(raw) != 2 or type(raw[0]) is not bytes:
        raise EncodingError("signed transaction", "expected [packed, [signatures]]")
    sigs = raw[1]
    if type(sigs) is list and len(sigs) == 1:  # the common case, checked inline
        sig = sigs[0]
        if type(sig) is not bytes or len(sig) != SIGNATURE_SIZE:
            check_bytes(sig, SIGNATURE_SIZE, "transaction.signature")
        signatures: tuple[bytes, ...] = (sig,)
    else:
        check_list(sigs, MAX_SIGNATURES, "transaction.signatures")
        signatures = tuple([check_bytes(s, SIGNATURE_SIZE, "transaction.signature") for s in sigs])
    packed = raw[0]
    tx = _decoded.get(packed)
    return SignedTransaction(decode_transaction(packed) if tx is None else tx, packed, signatures)


def decode_signed_transaction(data: bytes) -> SignedTransaction:
    """Decode a transaction sent on its own, and keep it for the block that will include it
    (``DECODED_KEPT``)."""
    raw = unpack(data, "signed transaction")
    stx = signed_transaction_from_wire(raw)
    if pack(raw) != data:
        raise EncodingError("signed transaction", "not in canonical encoding")
    _keep_decoded(stx)
    return stx


def decode_signed_parts(packed: bytes, signatures: list[bytes]) -> SignedTransaction:
    """``decode_signed_transaction`` of ``[packed, signatures]`` without encoding them first
    (the RPC has the two parts already): the same checks, errors and kept decoding. Its
    canonical-encoding check is of the parts' wrapper, which one built from parts always
    passes; the transaction's own bytes are checked by ``decode_transaction`` as there, or
    by the compiled decoder, which gives the same transaction or leaves it to the former."""
    # Imported here: the compiled decoder imports this module, and engine imports it.
    from chain.core.execution import engine

    fast = engine.decoder()
    raw = [packed, signatures]
    if fast is None:
        stx = signed_transaction_from_wire(raw)
    else:
        stx = fast([raw], _decoded, signed_transaction_from_wire)[0]
    _keep_decoded(stx)
    return stx


def decoded_kept() -> dict[bytes, Transaction]:
    """The transactions decoded on their own lately, by packed bytes (``DECODED_KEPT``):
    read, never written, by a block's decoder."""
    return _decoded


def _keep_decoded(stx: SignedTransaction) -> None:
    """Keep ``stx``'s decoding for its block, forgetting the oldest beyond the bounds."""
    global _decoded_bytes
    if len(stx.packed) > DECODED_KEPT_BYTES:
        return
    with _decoded_lock:
        if stx.packed in _decoded:
            return
        _decoded[stx.packed] = stx.tx
        _decoded_bytes += len(stx.packed)
        while len(_decoded) > 1 and (
            len(_decoded) > DECODED_KEPT or _decoded_bytes > DECODED_KEPT_BYTES
        ):
            oldest = next(iter(_decoded))
            del _decoded[oldest]
            _decoded_bytes -= len(oldest)
