"""A signature worker answers jobs in order of records and exits quietly when its node is gone."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

from chain.core.primitives.crypto import PrivateKey, recover_many, sha256
from chain.signatures.sigworker import NO_KEY


def _items(n: int) -> list[tuple[bytes, bytes]]:
    out = []
    for i in range(n):
        digest = sha256(b"m%d" % i)
        sig = PrivateKey(sha256(i.to_bytes(4, "big"))).sign(digest)
        if i % 5 == 0:
            sig = sig[:32] + bytes(32) + sig[64:]  # s = 0: does not recover
        out.append((sig, digest))
    return out


def _start() -> tuple[multiprocessing.connection.Connection, subprocess.Popen[bytes]]:
    parent, child = multiprocessing.Pipe()
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen(
        [sys.executable, "-m", "chain.signatures.sigworker", str(child.fileno())],
        pass_fds=(child.fileno(),),
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    child.close()
    return parent, proc


def test_answers_a_job_with_its_id_and_a_key_or_zeros_per_record() -> None:
    """The answer is the job's id, then per record the recovered key, or zeros where the
    signature does not recover; an empty message stops the worker with status 0."""
    items = _items(12)
    conn, proc = _start()
    conn.send_bytes((7).to_bytes(8, "big") + b"".join(s + d for s, d in items))
    answer = conn.recv_bytes()
    conn.send_bytes(b"")
    assert proc.wait(30) == 0
    assert answer[:8] == (7).to_bytes(8, "big")
    keys = [answer[i : i + 33] for i in range(8, len(answer), 33)]
    assert keys == [NO_KEY if k is None else k for k in recover_many(items)]
    assert keys.count(NO_KEY) == 3


def test_a_worker_whose_node_is_gone_mid_job_exits_quietly() -> None:
    """A worker that finds the node's end of its pipe closed when it answers (the node was
    killed with -9 mid-job) exits with status 0 and writes no traceback."""
    conn, proc = _start()
    items = _items(400)  # tens of milliseconds of recovery: the close lands before the answer
    conn.send_bytes(bytes(8) + b"".join(s + d for s, d in items))
    conn.close()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert err == b""
