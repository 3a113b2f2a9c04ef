"""Signature recovery in worker processes gives what recovery here gives, even if a worker dies."""

from __future__ import annotations

import multiprocessing
import os
import signal

from chain.crypto import PrivateKey, recover_many, sha256
from chain.sigpool import ParallelRecoverer, _serve


def _items(n: int) -> list[tuple[bytes, bytes]]:
    out = []
    for i in range(n):
        key = PrivateKey(sha256(i.to_bytes(4, "big")))
        digest = sha256(b"m%d" % i)
        sig = key.sign(digest)
        if i % 17 == 0:
            sig = sig[:32] + bytes(32) + sig[64:]  # s = 0: does not recover
        out.append((sig, digest))
    return out


def test_matches_local_recovery_called_and_submitted() -> None:
    """Worker recovery, called directly or as two submitted batches collected out of order, equals
    local recovery, failures (None) included."""
    items = _items(300)
    expected = recover_many(items)
    assert expected.count(None) == 18
    pool = ParallelRecoverer(2)
    try:
        assert pool(items) == expected
        first, second = pool.submit(items[:150]), pool.submit(items[150:])
        assert second() + first() == expected[150:] + expected[:150]
    finally:
        pool.close()


def test_a_dead_worker_costs_speed_not_answers() -> None:
    """With every worker process killed, submitted and direct recoveries still return what local
    recovery gives."""
    items = _items(200)
    pool = ParallelRecoverer(2)
    try:
        for proc in pool._procs:
            assert proc.pid is not None
            os.kill(proc.pid, signal.SIGKILL)
            proc.join()
        assert pool.submit(items)() == recover_many(items)
        assert pool(items) == recover_many(items)
    finally:
        pool.close()


def test_a_worker_whose_node_is_gone_mid_job_exits_quietly() -> None:
    """A worker that finds the node's end of its pipe closed when it answers (the node was
    killed with -9 mid-job) exits with status 0, not with a BrokenPipeError traceback."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child,), daemon=True)
    proc.start()
    child.close()
    items = _items(400)  # tens of milliseconds of recovery: the close lands before the answer
    parent.send_bytes(bytes(8) + b"".join(s + d for s, d in items))
    parent.close()
    proc.join(30)
    assert proc.exitcode == 0
