"""The mempool's caps, de-duplication, expiry and order."""

from __future__ import annotations

import pytest

from chain.core.actions import Transfer
from chain.core.crypto import PrivateKey
from chain.core.errors import DuplicateTransaction, MempoolFull
from chain.core.transaction import SignedTransaction, Transaction
from chain.core.types import AccountName
from chain.mempool import Mempool

KEY = PrivateKey(b"\x03" * 32)


def _tx(sender: str, n: int, expiration: int = 1000) -> SignedTransaction:
    action = Transfer(AccountName(sender), AccountName("bob"), n)
    return SignedTransaction.sign(Transaction(expiration, 0, 0, (action,)), b"c", [KEY])


def test_order_dedup_and_removal() -> None:
    """The mempool keeps arrival order, refuses a duplicate, and keeps the others in order when one
    is removed."""
    pool = Mempool()
    txs = [_tx("alice", i) for i in range(1, 4)]
    for t in txs:
        pool.add(t, frozenset())
    with pytest.raises(DuplicateTransaction):
        pool.add(txs[0], frozenset())
    assert [p.tx for p in pool.pending()] == txs
    pool.remove([txs[1].id])
    assert [p.tx for p in pool.pending()] == [txs[0], txs[2]]


def test_caps_total_and_per_account() -> None:
    """The mempool refuses a transaction beyond the per-account or total cap, and a removed one
    frees its account's slot."""
    pool = Mempool(max_txs=3, max_per_account=2)
    pool.add(_tx("alice", 1), frozenset())
    pool.add(_tx("alice", 2), frozenset())
    with pytest.raises(MempoolFull, match="alice"):
        pool.add(_tx("alice", 3), frozenset())
    pool.add(_tx("carol", 1), frozenset())
    with pytest.raises(MempoolFull):
        pool.add(_tx("dave", 1), frozenset())
    pool.remove([_tx("alice", 1).id])
    pool.add(_tx("alice", 3), frozenset())  # a freed per-account slot is usable again


def test_expiry() -> None:
    """Expiring at a time drops the transactions that expired by then and keeps the later ones."""
    pool = Mempool()
    pool.add(_tx("alice", 1, expiration=10), frozenset())
    pool.add(_tx("alice", 2, expiration=20), frozenset())
    assert pool.expire(15) == 1
    assert len(pool) == 1
