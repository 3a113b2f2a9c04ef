"""Transactions admitted but not yet in a block.

Bounded in total and per account (by first actor), so one busy account cannot crowd out the
rest; de-duplicated by id; expired transactions are dropped. Keeps arrival order, which is
the order the producer includes them in.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from chain.core.errors import DuplicateTransaction, MempoolFull
from chain.core.transaction import SignedTransaction
from chain.core.types import AccountName, PublicKey, TxId


@dataclass(frozen=True, slots=True)
class PendingTx:
    tx: SignedTransaction
    keys: frozenset[PublicKey]  # recovered at admission, so block building skips recovery


class Mempool:
    def __init__(self, max_txs: int = 50_000, max_per_account: int = 5_000) -> None:
        self.max_txs = max_txs
        self.max_per_account = max_per_account
        self._txs: dict[TxId, PendingTx] = {}
        self._per_account: dict[AccountName, int] = {}

    def __len__(self) -> int:
        return len(self._txs)

    def __contains__(self, tx_id: object) -> bool:
        return tx_id in self._txs

    def add(self, stx: SignedTransaction, keys: frozenset[PublicKey]) -> None:
        if stx.id in self._txs:
            raise DuplicateTransaction(f"transaction {stx.id.hex()} is already pending")
        if len(self._txs) >= self.max_txs:
            raise MempoolFull(f"mempool holds {self.max_txs} transactions")
        owner = stx.tx.actors()[0]
        count = self._per_account.get(owner, 0)
        if count >= self.max_per_account:
            raise MempoolFull(f"{owner!r} already has {count} pending transactions")
        self._txs[stx.id] = PendingTx(stx, keys)
        self._per_account[owner] = count + 1

    def remove(self, tx_ids: Iterable[TxId]) -> None:
        for tx_id in tx_ids:
            pending = self._txs.pop(tx_id, None)
            if pending is None:
                continue
            owner = pending.tx.tx.actors()[0]
            left = self._per_account[owner] - 1
            if left:
                self._per_account[owner] = left
            else:
                del self._per_account[owner]

    def expire(self, now_s: int) -> int:
        """Drop transactions that expired before ``now_s``; returns how many."""
        gone = [i for i, p in self._txs.items() if p.tx.tx.expiration < now_s]
        self.remove(gone)
        return len(gone)

    def pending(self) -> Iterator[PendingTx]:
        return iter(list(self._txs.values()))
