"""Who signed a transaction: recovered keys, cached, optionally prefetched by workers.

Keys are cached by (transaction id, signatures). The signatures are part of the key because
they are not part of the id: the same transaction may arrive again with other (bad)
signatures, and those must be checked on their own. The cache is filled at admission, so a
block made of transactions this node already admitted needs no signature work at all.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from chain.errors import BadSignature
from chain.sigpool import ParallelRecoverer
from chain.transaction import SignedTransaction, signing_digest
from chain.types import PublicKey, TxId

Recoverer = Callable[[list[tuple[bytes, bytes]]], list[PublicKey | None]]

KEY_CACHE_SIZE = 200_000
# Prefetched recovery jobs held at most; past this the oldest is collected. Bounds memory
# when blocks are prefetched but never pushed.
MAX_PREFETCH_JOBS = 16

_SigKey = tuple[TxId, tuple[bytes, ...]]


def _sig_key(stx: SignedTransaction) -> _SigKey:
    return stx.id, stx.signatures


@dataclass(slots=True)
class _RecoveryJob:
    """Signatures of some transactions being recovered in worker processes."""

    txs: list[SignedTransaction]
    wait: Callable[[], list[PublicKey | None]]


class SignerKeys:
    def __init__(self, chain_id: bytes, recoverer: Recoverer) -> None:
        self.chain_id = chain_id
        self._recoverer = recoverer
        self._keys: OrderedDict[_SigKey, frozenset[PublicKey]] = OrderedDict()
        self._pending: dict[_SigKey, _RecoveryJob] = {}
        self._jobs: list[_RecoveryJob] = []

    def cached(self, stx: SignedTransaction) -> frozenset[PublicKey] | None:
        return self._keys.get(_sig_key(stx))

    def recover(self, txs: Sequence[SignedTransaction]) -> list[frozenset[PublicKey]]:
        """Signer keys of each transaction; raises BadSignature for any bad one."""
        out: list[frozenset[PublicKey]] = []
        for keys in self.recover_each(txs):
            if isinstance(keys, BadSignature):
                raise keys
            out.append(keys)
        return out

    def recover_each(
        self, txs: Sequence[SignedTransaction]
    ) -> list[frozenset[PublicKey] | BadSignature]:
        """Signer keys of each transaction, or the BadSignature that stops it."""
        for stx in txs:
            job = self._pending.get(_sig_key(stx))
            if job is not None:
                self._collect(job)
        missing = [stx for stx in txs if _sig_key(stx) not in self._keys]
        bad: dict[_SigKey, BadSignature] = {}
        if missing:
            recovered = iter(self._recoverer(self._signed_digests(missing)))
            for stx in missing:
                keys = [next(recovered) for _ in stx.signatures]
                if any(k is None for k in keys):
                    bad[_sig_key(stx)] = BadSignature(f"transaction {stx.id.hex()}: bad signature")
                else:
                    self._remember(_sig_key(stx), frozenset(k for k in keys if k is not None))
        return [bad.get(_sig_key(stx)) or self._keys[_sig_key(stx)] for stx in txs]

    def prefetch(self, txs: Sequence[SignedTransaction]) -> None:
        """Start recovering ``txs`` in worker processes (a no-op without a worker pool)."""
        if not isinstance(self._recoverer, ParallelRecoverer):
            return
        todo = [
            stx
            for stx in txs
            if _sig_key(stx) not in self._keys and _sig_key(stx) not in self._pending
        ]
        if not todo:
            return
        job = _RecoveryJob(todo, self._recoverer.submit(self._signed_digests(todo)))
        for stx in todo:
            self._pending[_sig_key(stx)] = job
        self._jobs.append(job)
        if len(self._jobs) > MAX_PREFETCH_JOBS:
            self._collect(self._jobs[0])

    def _signed_digests(self, txs: Sequence[SignedTransaction]) -> list[tuple[bytes, bytes]]:
        items: list[tuple[bytes, bytes]] = []
        for stx in txs:
            digest = signing_digest(self.chain_id, stx.packed)
            items.extend((sig, digest) for sig in stx.signatures)
        return items

    def _collect(self, job: _RecoveryJob) -> None:
        """Wait for ``job`` and cache what it recovered; bad signatures are left uncached so
        that ``recover_each`` recovers them again and reports them."""
        recovered = iter(job.wait())
        for stx in job.txs:
            self._pending.pop(_sig_key(stx), None)
            keys = [next(recovered) for _ in stx.signatures]
            if all(k is not None for k in keys):
                self._remember(_sig_key(stx), frozenset(k for k in keys if k is not None))
        self._jobs.remove(job)

    def _remember(self, key: _SigKey, keys: frozenset[PublicKey]) -> None:
        self._keys[key] = keys
        if len(self._keys) > KEY_CACHE_SIZE:
            self._keys.popitem(last=False)
