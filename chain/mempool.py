"""Transactions admitted but not yet in a block.

Bounded in total and per account (by first actor), in count and in bytes, so one busy
account cannot crowd out the rest, and a few hundred of the largest transactions the chain
admits (a ``setcode`` of a whole module, about 261 KB) cannot take a node's memory;
de-duplicated by id; expired transactions are dropped. Keeps arrival order, which is the order
the producer includes them in.

A refusal (``MempoolFull``) names the node option that would have let the transaction in: the
RPC answers it with ``429 mempool_full``, and an operator who meant to hold more knows which
option to raise.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.errors import DuplicateTransaction, MempoolFull
from chain.core.primitives.types import AccountName, PublicKey, TxId

MIB = 1 << 20
# 64 MiB: more than a producer's whole turn of full blocks (12 blocks of the default 4 MiB
# max_block_bytes, 48 MiB), so the mempool never starves the producer of a turn's work, yet
# few enough that what it holds (each transaction twice: its packed bytes and its decoded
# actions, so about 128 MiB at most) is within the 200 MiB that issue 39 allows a node for
# 600 x 261 KB pending setcodes (scripts/bench_mempool_bytes.py).
DEFAULT_MAX_BYTES = 64 * MIB
# One account's share of the byte bound, unless given: a quarter, so that one account's large
# transactions leave three quarters to the others, and it takes four accounts at their share
# to fill the mempool.
ACCOUNT_SHARE = 4


@dataclass(frozen=True, slots=True)
class PendingTx:
    tx: SignedTransaction
    keys: frozenset[PublicKey]  # recovered at admission, so block building skips recovery


class Mempool:
    def __init__(
        self,
        max_txs: int = 50_000,
        max_per_account: int = 5_000,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_account_bytes: int | None = None,
    ) -> None:
        """``max_account_bytes``: by default ``max_bytes // ACCOUNT_SHARE``."""
        self.max_txs = max_txs
        self.max_per_account = max_per_account
        self.max_bytes = max_bytes
        self.max_account_bytes = (
            max_bytes // ACCOUNT_SHARE if max_account_bytes is None else max_account_bytes
        )
        self._txs: dict[TxId, PendingTx] = {}
        self._per_account: dict[AccountName, int] = {}
        self._account_bytes: dict[AccountName, int] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._txs)

    def __contains__(self, tx_id: object) -> bool:
        return tx_id in self._txs

    @property
    def bytes(self) -> int:
        """The bytes of every pending transaction together (``SignedTransaction.size``: its
        packed bytes and signatures)."""
        return self._bytes

    def refusal(self, stx: SignedTransaction) -> DuplicateTransaction | MempoolFull | None:
        """Why ``add`` would refuse ``stx`` now, or None. Admission asks first, so that what
        cannot go in costs no execution; since the mempool only fills while a batch is
        admitted, a refusal found before a batch still holds at its end."""
        if stx.id in self._txs:
            return DuplicateTransaction(f"transaction {stx.id.hex()} is already pending")
        if len(self._txs) >= self.max_txs:
            return MempoolFull(
                f"mempool holds {self.max_txs} transactions (option max-mempool-txs)"
            )
        size = stx.size
        if self._bytes + size > self.max_bytes:
            return MempoolFull(
                f"mempool holds {self._bytes} bytes; {size} more would pass"
                f" {self.max_bytes} (option max-mempool-bytes)"
            )
        owner = stx.tx.actors()[0]
        count = self._per_account.get(owner, 0)
        if count >= self.max_per_account:
            return MempoolFull(
                f"{owner!r} already has {count} pending transactions"
                " (option max-mempool-per-account)"
            )
        held = self._account_bytes.get(owner, 0)
        if held + size > self.max_account_bytes:
            return MempoolFull(
                f"{owner!r} already has {held} pending bytes; {size} more would pass"
                f" {self.max_account_bytes} (option max-mempool-account-bytes)"
            )
        return None

    def add(self, stx: SignedTransaction, keys: frozenset[PublicKey]) -> None:
        error = self.refusal(stx)
        if error is not None:
            raise error
        owner = stx.tx.actors()[0]
        size = stx.size
        self._txs[stx.id] = PendingTx(stx, keys)
        self._per_account[owner] = self._per_account.get(owner, 0) + 1
        self._account_bytes[owner] = self._account_bytes.get(owner, 0) + size
        self._bytes += size

    def remove(self, tx_ids: Iterable[TxId]) -> None:
        for tx_id in tx_ids:
            pending = self._txs.pop(tx_id, None)
            if pending is None:
                continue
            owner = pending.tx.tx.actors()[0]
            size = pending.tx.size
            self._bytes -= size
            left = self._per_account[owner] - 1
            if left:
                self._per_account[owner] = left
                self._account_bytes[owner] -= size
            else:
                del self._per_account[owner]
                del self._account_bytes[owner]

    def expire(self, now_s: int) -> int:
        """Drop transactions that expired before ``now_s``; returns how many."""
        gone = [i for i, p in self._txs.items() if p.tx.tx.expiration < now_s]
        self.remove(gone)
        return len(gone)

    def pending(self) -> Iterator[PendingTx]:
        return iter(list(self._txs.values()))
