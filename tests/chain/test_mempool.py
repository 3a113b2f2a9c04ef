"""The mempool's caps, de-duplication, expiry and order."""

from __future__ import annotations

import pytest

from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.errors import DuplicateTransaction, MempoolFull
from chain.core.primitives.types import AccountName
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


def _memo_tx(sender: str, n: int, memo_bytes: int, expiration: int = 1000) -> SignedTransaction:
    """A transfer whose memo makes it about ``memo_bytes`` larger than a bare one."""
    action = Transfer(AccountName(sender), AccountName("bob"), n, "m" * memo_bytes)
    return SignedTransaction.sign(Transaction(expiration, 0, 0, (action,)), b"c", [KEY])


def test_byte_bound_in_all() -> None:
    """A transaction that would take the pending bytes past max_bytes is refused with a
    message naming max-mempool-bytes, though the count bounds have room."""
    first = _memo_tx("alice", 1, 200)
    pool = Mempool(max_bytes=2 * first.size + 100, max_account_bytes=10_000)
    pool.add(first, frozenset())
    pool.add(_memo_tx("carol", 1, 200), frozenset())
    assert pool.bytes == 2 * first.size
    with pytest.raises(MempoolFull, match="max-mempool-bytes"):
        pool.add(_memo_tx("dave", 1, 200), frozenset())
    assert len(pool) == 2 and pool.bytes == 2 * first.size
    pool.add(_tx("dave", 1), frozenset())  # a small one still fits the bytes left


def test_byte_share_per_account() -> None:
    """One account's transactions fill at most its byte share (refused naming
    max-mempool-account-bytes) while another account still gets in; by default the share
    is a quarter of max_bytes."""
    one = _memo_tx("alice", 1, 200)
    pool = Mempool(max_bytes=100 * one.size, max_account_bytes=2 * one.size + 10)
    pool.add(one, frozenset())
    pool.add(_memo_tx("alice", 2, 200), frozenset())
    with pytest.raises(MempoolFull, match=r"alice.*max-mempool-account-bytes"):
        pool.add(_memo_tx("alice", 3, 200), frozenset())
    pool.add(_memo_tx("carol", 1, 200), frozenset())
    assert Mempool(max_bytes=4096).max_account_bytes == 1024


def test_count_refusals_name_their_options() -> None:
    """The count bounds' refusals name max-mempool-txs and max-mempool-per-account."""
    pool = Mempool(max_txs=2, max_per_account=1)
    pool.add(_tx("alice", 1), frozenset())
    with pytest.raises(MempoolFull, match="max-mempool-per-account"):
        pool.add(_tx("alice", 2), frozenset())
    pool.add(_tx("carol", 1), frozenset())
    with pytest.raises(MempoolFull, match="max-mempool-txs"):
        pool.add(_tx("dave", 1), frozenset())


def test_remove_and_expire_release_bytes() -> None:
    """Removing or expiring transactions gives their bytes back, in all and to their
    account's share, so the account can fill its share again."""
    one = _memo_tx("alice", 1, 200, expiration=10)
    pool = Mempool(max_bytes=100 * one.size, max_account_bytes=2 * one.size + 10)
    pool.add(one, frozenset())
    later = _memo_tx("alice", 2, 200, expiration=20)
    pool.add(later, frozenset())
    assert pool.expire(15) == 1
    assert pool.bytes == later.size
    pool.add(_memo_tx("alice", 3, 200), frozenset())  # the expired one's share is free again
    pool.remove([later.id, _memo_tx("alice", 3, 200).id])
    assert pool.bytes == 0 and len(pool) == 0
    pool.add(_memo_tx("alice", 4, 200), frozenset())
    pool.add(_memo_tx("alice", 5, 200), frozenset())
    assert pool.bytes == sum(p.tx.size for p in pool.pending())
