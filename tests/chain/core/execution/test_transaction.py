"""A transaction decoded on its own is kept for the block that includes it: the block's
decoding reuses it, gives what a fresh decoding gives, and the kept ones stay bounded."""

from __future__ import annotations

import pytest

from chain.core.consensus.block import BlockHeader, SignedBlock, decode_block
from chain.core.execution import transaction
from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import (
    SignedTransaction,
    Transaction,
    decode_signed_transaction,
    decode_transaction,
)
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.merkle import merkle_root
from chain.core.primitives.types import AccountName, BlockId, BlockNum

KEY = PrivateKey(b"\x01" * 32)
CHAIN = b"c" * 32


def signed(amount: int) -> SignedTransaction:
    transfer = Transfer(AccountName("alice"), AccountName("bob"), amount)
    return SignedTransaction.sign(Transaction(100, 1, 2, (transfer,)), CHAIN, [KEY])


def block_of(txs: tuple[SignedTransaction, ...]) -> bytes:
    header = BlockHeader(
        BlockNum(5),
        BlockId(b"\x01" * 32),
        10,
        AccountName("pa"),
        0,
        merkle_root([t.id for t in txs]),
        b"\x02" * 32,
    )
    return SignedBlock.sign(header, txs, CHAIN, KEY).encode()


def test_a_block_reuses_the_transactions_decoded_on_their_own() -> None:
    """A block's transaction whose bytes were decoded on their own is that same decoded
    object, equal to a fresh decoding; the others are decoded as usual."""
    relayed, other = signed(1), signed(2)
    kept = decode_signed_transaction(relayed.encode())
    block = decode_block(block_of((relayed, other)))
    assert block.transactions[0].tx is kept.tx
    assert block.transactions[0] == relayed and block.transactions[1] == other
    assert block.transactions[0].tx == decode_transaction(relayed.packed)


def test_the_transactions_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """No more than DECODED_KEPT transactions are kept, the oldest dropped first."""
    monkeypatch.setattr(transaction, "DECODED_KEPT", 3)
    monkeypatch.setattr(transaction, "_decoded", {})
    monkeypatch.setattr(transaction, "_decoded_bytes", 0)
    txs = [signed(n) for n in range(1, 6)]
    for stx in txs:
        decode_signed_transaction(stx.encode())
    assert list(transaction._decoded) == [t.packed for t in txs[2:]]


def test_the_transactions_kept_are_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past DECODED_KEPT_BYTES of packed bytes the oldest kept transactions are dropped, so
    large transactions decoded on their own are not all held after they are gone."""
    txs = [signed(n) for n in range(1, 6)]
    monkeypatch.setattr(transaction, "DECODED_KEPT_BYTES", 3 * len(txs[0].packed))
    monkeypatch.setattr(transaction, "_decoded", {})
    monkeypatch.setattr(transaction, "_decoded_bytes", 0)
    for stx in txs:
        decode_signed_transaction(stx.encode())
    assert list(transaction._decoded) == [t.packed for t in txs[2:]]
