"""Signer keys come out the same whether recovered here, from a prefetched block's job or from
the cache, and a bad signature is reported for its own transaction only."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction
from chain.core.primitives.crypto import PrivateKey, recover_many, sha256
from chain.core.primitives.errors import BadSignature
from chain.core.primitives.types import AccountName, PublicKey
from chain.signatures import signers as signers_module
from chain.signatures.signers import MAX_SHARE, SignerKeys
from chain.signatures.sigpool import ParallelRecoverer, Waiter

CHAIN_ID = sha256(b"signers test chain")


def _txs(n: int, signers: int = 1) -> tuple[SignedTransaction, ...]:
    out = []
    for i in range(n):
        tx = Transaction(1_000 + i, 0, 0, (Transfer(AccountName("alice"), AccountName("bob"), 1),))
        keys = [PrivateKey(sha256(b"%d/%d" % (i, k))) for k in range(signers)]
        out.append(SignedTransaction.sign(tx, CHAIN_ID, keys))
    return tuple(out)


def _forged(stx: SignedTransaction) -> SignedTransaction:
    """``stx`` with its first signature's s set to zero: it recovers to no key."""
    sig = stx.signatures[0]
    return SignedTransaction(stx.tx, stx.packed, (sig[:32] + bytes(32) + sig[64:],))


class _CountingPool(ParallelRecoverer):
    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self.submitted = 0

    def submit(self, items: list[tuple[bytes, bytes]]) -> Waiter:
        self.submitted += 1
        return super().submit(items)


@pytest.fixture(scope="module")
def pool() -> Iterator[_CountingPool]:
    workers = _CountingPool(1)
    yield workers
    workers.close()


def test_a_prefetched_block_gets_the_keys_recovered_here(pool: _CountingPool) -> None:
    """Keys of a block whose transactions were prefetched as a whole equal those recovered
    in this process, for one and for two signatures a transaction."""
    for signers in (1, 2):
        txs = _txs(70, signers)
        expected = SignerKeys(CHAIN_ID, recover_many)
        keys = SignerKeys(CHAIN_ID, pool)
        keys.prefetch(txs)
        assert keys.recover(txs) == expected.recover(txs)
        assert all(len(k) == signers for k in keys.recover(txs))


def test_a_bad_signature_in_a_prefetched_block_is_its_own_transactions_fault(
    pool: _CountingPool,
) -> None:
    """One forged transaction among good ones in a prefetched block: recover_each answers a
    BadSignature naming it and the others' keys, and recover raises it."""
    txs = list(_txs(80))
    txs[33] = _forged(txs[33])
    block = tuple(txs)
    keys = SignerKeys(CHAIN_ID, pool)
    keys.prefetch(block)
    answers = keys.recover_each(block)
    assert [i for i, a in enumerate(answers) if isinstance(a, BadSignature)] == [33]
    assert block[33].id.hex() in str(answers[33])
    assert answers[:33] == SignerKeys(CHAIN_ID, recover_many).recover_each(block[:33])
    with pytest.raises(BadSignature):
        keys.recover(block)


def test_a_block_prefetched_twice_is_recovered_once(pool: _CountingPool) -> None:
    """Prefetching the same transactions again while their job is under way submits nothing."""
    txs = _txs(70)
    keys = SignerKeys(CHAIN_ID, pool)
    before = pool.submitted
    keys.prefetch(txs)
    keys.prefetch(txs)
    assert pool.submitted == before + 1
    assert keys.recover(txs) == SignerKeys(CHAIN_ID, recover_many).recover(txs)


def test_known_transactions_are_not_recovered_again(pool: _CountingPool) -> None:
    """Transactions whose keys are cached (admitted earlier) are left out of a block's job; the
    block's keys still come out whole and right."""
    txs = _txs(90)
    keys = SignerKeys(CHAIN_ID, pool)
    keys.recover(txs[:40])  # as admission does
    assert all(keys.cached(stx) is not None for stx in txs[:40])
    keys.prefetch(txs)
    assert keys.recover(txs) == SignerKeys(CHAIN_ID, recover_many).recover(txs)
    assert all(keys.cached(stx) is not None for stx in txs[40:])


class _SlowPool(_CountingPool):
    """Workers whose answer comes ``delay`` seconds after it is asked for, on the clock
    ``now`` (which the test makes the signers' clock)."""

    def __init__(self, delay: float, now: list[float]) -> None:
        super().__init__(1)
        self.delay = delay
        self.now = now
        self.sent = 0

    def submit(self, items: list[tuple[bytes, bytes]]) -> Waiter:
        self.sent += len(items)
        answer = recover_many(items)

        def wait() -> list[PublicKey | None]:
            self.now[0] += self.delay
            return answer

        return wait


def test_the_share_recovered_here_follows_the_workers_lag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Workers that keep the caller waiting get a growing part of each block recovered here
    instead (never over half), workers that answer at once get all of it back, and the keys
    are right either way."""
    now = [0.0]
    monkeypatch.setattr(signers_module, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    slow = _SlowPool(0.005, now)
    try:
        keys = SignerKeys(CHAIN_ID, slow)
        expected = SignerKeys(CHAIN_ID, recover_many)
        for _ in range(40):
            txs = _txs(50)
            keys.prefetch(txs)
            assert keys.recover(txs) == expected.recover(txs)
        assert keys._share == MAX_SHARE
        before = slow.sent
        txs = _txs(50)
        keys.prefetch(txs)
        assert slow.sent - before == 25  # half of the block went to the workers
        keys.recover(txs)
        slow.delay = 0.0
        for _ in range(120):
            txs = _txs(50)
            keys.prefetch(txs)
            assert keys.recover(txs) == expected.recover(txs)
        assert keys._share == 0.0, "back to nothing"
    finally:
        slow.close()


def test_keys_learnt_from_the_caller_are_not_recovered_again() -> None:
    """Keys a caller recovered already (the RPC's batch) are taken as the transaction's: the
    recoverer is asked only for the others, and a transaction learnt with other signatures
    is still recovered (and refused) on its own."""
    asked: list[int] = []

    def recoverer(items: list[tuple[bytes, bytes]]) -> list[PublicKey | None]:
        asked.append(len(items))
        return recover_many(items)

    txs = _txs(4)
    expected = SignerKeys(CHAIN_ID, recover_many).recover(txs)
    keys = SignerKeys(CHAIN_ID, recoverer)
    for stx, known in zip(txs[:3], expected[:3], strict=True):
        keys.learn(stx, known)
    assert keys.recover(txs) == expected
    assert asked == [1]
    forged = _forged(txs[0])
    assert isinstance(keys.recover_each([forged])[0], BadSignature)
