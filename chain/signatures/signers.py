"""Who signed a transaction: recovered keys, cached, optionally prefetched by workers.

Keys are cached by (transaction id, signatures). The signatures are part of the key because
they are not part of the id: the same transaction may arrive again with other (bad)
signatures, and those must be checked on their own. The cache is filled at admission, so a
block made of transactions this node already admitted needs no signature work at all.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from chain.core.execution.transaction import SignedTransaction, signing_digest
from chain.core.primitives.errors import BadSignature
from chain.core.primitives.types import PublicKey, TxId
from chain.signatures.sigpool import ParallelRecoverer, recover_local

Recoverer = Callable[[list[tuple[bytes, bytes]]], list[PublicKey | None]]

KEY_CACHE_SIZE = 200_000
# How many blocks ahead of the one being applied callers start recovering signatures (the
# import, the sync's chain thread; the sync's applier hands that many along with a batch).
PREFETCH_BLOCKS = 2
# Prefetched recovery jobs held at most; past this the oldest is collected. Bounds memory
# when blocks are prefetched but never pushed.
MAX_PREFETCH_JOBS = 16
# The share of a prefetched block's signatures recovered here rather than by the workers is
# steered by whether their answer had to be waited for (more than WAITED seconds): up by
# SHARE_STEP when it had (the workers are the bottleneck, as in a full-validation sync on two
# cores), down by half a step when it was there already, never above MAX_SHARE.
WAITED = 0.001
SHARE_STEP = 0.02
MAX_SHARE = 0.5

_SigKey = tuple[TxId, tuple[bytes, ...]]


def _sig_key(stx: SignedTransaction) -> _SigKey:
    return stx.id, stx.signatures


@dataclass(slots=True)
class _RecoveryJob:
    """Signatures of some transactions being recovered in worker processes. A job of a whole
    sequence (``prefetch`` of a block's transactions, none of them known yet) is answered
    straight to ``recover_each`` of that same sequence, without the per-transaction cache."""

    txs: Sequence[SignedTransaction]
    wait: Callable[[], list[PublicKey | None]]
    whole: bool
    # The first signatures' (signature, digest) pairs, left to the caller: ``wait`` answers
    # for those after them.
    local: list[tuple[bytes, bytes]]


class SignerKeys:
    def __init__(self, chain_id: bytes, recoverer: Recoverer) -> None:
        self.chain_id = chain_id
        self._recoverer = recoverer
        self._keys: OrderedDict[_SigKey, frozenset[PublicKey]] = OrderedDict()
        self._pending: dict[_SigKey, _RecoveryJob] = {}
        self._jobs: list[_RecoveryJob] = []
        self._share = 0.0

    def cached(self, stx: SignedTransaction) -> frozenset[PublicKey] | None:
        return self._keys.get(_sig_key(stx))

    def learn(self, stx: SignedTransaction, keys: frozenset[PublicKey]) -> None:
        """Cache ``keys`` as what ``stx``'s signatures recover to (recovered by the caller,
        over this chain's signing digest)."""
        self._remember(_sig_key(stx), keys)

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
        whole = self._whole_job(txs)
        if whole is not None:
            self._jobs.remove(whole)
            return _answers(txs, self._finish(whole))
        for stx in txs:
            pending = self._pending.get(_sig_key(stx))
            if pending is not None:
                self._collect(pending)
        missing = [stx for stx in txs if _sig_key(stx) not in self._keys]
        bad: dict[_SigKey, BadSignature] = {}
        if missing:
            recovered = self._recoverer(self._signed_digests(missing))
            for stx, keys in zip(missing, _answers(missing, recovered), strict=True):
                if isinstance(keys, BadSignature):
                    bad[_sig_key(stx)] = keys
                else:
                    self._remember(_sig_key(stx), keys)
        return [bad.get(_sig_key(stx)) or self._keys[_sig_key(stx)] for stx in txs]

    def prefetch(self, txs: Sequence[SignedTransaction]) -> None:
        """Start recovering ``txs`` in worker processes (a no-op without a worker pool)."""
        if not isinstance(self._recoverer, ParallelRecoverer):
            return
        if self._whole_job(txs) is not None:
            return  # already under way
        todo = [
            stx
            for stx in txs
            if _sig_key(stx) not in self._keys and _sig_key(stx) not in self._pending
        ]
        if not todo:
            return
        whole = len(todo) == len(txs)
        items = self._signed_digests(todo)
        mine = int(len(items) * self._share) if whole else 0
        job = _RecoveryJob(
            txs if whole else todo,
            self._recoverer.submit(items[mine:]),
            whole,
            items[:mine],
        )
        if not whole:
            for stx in todo:
                self._pending[_sig_key(stx)] = job
        self._jobs.append(job)
        if len(self._jobs) > MAX_PREFETCH_JOBS:
            self._collect(self._jobs[0])

    def _whole_job(self, txs: Sequence[SignedTransaction]) -> _RecoveryJob | None:
        """The job prefetching exactly the sequence ``txs`` as a whole, if there is one."""
        return next((job for job in self._jobs if job.whole and job.txs is txs), None)

    def _signed_digests(self, txs: Sequence[SignedTransaction]) -> list[tuple[bytes, bytes]]:
        items: list[tuple[bytes, bytes]] = []
        for stx in txs:
            digest = signing_digest(self.chain_id, stx.packed)
            items.extend((sig, digest) for sig in stx.signatures)
        return items

    def _collect(self, job: _RecoveryJob) -> None:
        """Wait for ``job`` and cache what it recovered; bad signatures are left uncached so
        that ``recover_each`` recovers them again and reports them."""
        for stx, keys in zip(job.txs, _answers(job.txs, self._finish(job)), strict=True):
            if not job.whole:
                self._pending.pop(_sig_key(stx), None)
            if not isinstance(keys, BadSignature):
                self._remember(_sig_key(stx), keys)
        self._jobs.remove(job)

    def _finish(self, job: _RecoveryJob) -> list[PublicKey | None]:
        """The keys of all of ``job``'s signatures: its local share recovered here, then the
        workers' answer for the rest. A whole block's job steers the share."""
        mine = recover_local(job.local) if job.local else []
        started = time.perf_counter()
        theirs = job.wait()
        if job.whole:
            if time.perf_counter() - started > WAITED:
                self._share = min(MAX_SHARE, self._share + SHARE_STEP)
            else:
                self._share = max(0.0, self._share - SHARE_STEP / 2)
        return mine + theirs

    def _remember(self, key: _SigKey, keys: frozenset[PublicKey]) -> None:
        self._keys[key] = keys
        if len(self._keys) > KEY_CACHE_SIZE:
            self._keys.popitem(last=False)


def _answers(
    txs: Sequence[SignedTransaction], recovered: list[PublicKey | None]
) -> list[frozenset[PublicKey] | BadSignature]:
    """Each transaction's signer keys from the keys recovered for all their signatures, in
    order (None for a bad signature)."""
    out: list[frozenset[PublicKey] | BadSignature] = []
    at = 0
    for stx in txs:
        count = len(stx.signatures)
        keys = recovered[at : at + count]
        at += count
        if None in keys:
            out.append(BadSignature(f"transaction {stx.id.hex()}: bad signature"))
        else:
            out.append(frozenset(keys))  # type: ignore[arg-type]  # no None, checked above
    return out
