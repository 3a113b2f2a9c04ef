"""Signature recovery spread over worker processes.

Recovery is pure CPU in libsecp256k1. coincurve's cffi calls release the GIL, but the Python
around each call does not, so a second thread gives about 1.5 x on two cores, while a worker
process (the whole apply 1.8 x with one) leaves the caller's interpreter to the caller. Two
ways to use the pool: call it with a batch (the caller recovers one share itself while the
workers do the rest), or ``submit`` a batch and collect it later, so that the workers recover
the next block's signatures while the caller applies the current block
(``Chain.prefetch_keys``).

Each worker is a process (``chain.signatures.sigworker``) at the end of a pipe that carries
fixed-size binary records (65-byte signature + 32-byte digest in, 33-byte key out, zeros for a bad
signature), not a ``ProcessPoolExecutor``: its pickling and its helper threads in the caller
would compete with the caller for the GIL, and the caller's time per transaction is what
bounds throughput here.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import site
import subprocess
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from chain.core.execution import engine
from chain.core.primitives.crypto import PUBLIC_KEY_SIZE, SIGNATURE_SIZE, recover_many
from chain.core.primitives.types import PublicKey
from chain.signatures.sigworker import NO_KEY

# Below this many signatures the round trip to a worker costs more than it saves.
MIN_PARALLEL = 64
# Records per message. A result message (33 bytes a record) then stays far below the 64 KiB
# pipe buffer, so a worker never blocks writing a result the caller has not read yet.
MAX_CHUNK = 800
# The directory that holds the ``chain`` package, for the workers' ``python -m``.
_ROOT = Path(__file__).resolve().parents[2]


def worker_env(root: Path = _ROOT) -> dict[str, str]:
    """The workers' environment: ours, with ``root`` first on PYTHONPATH unless it is one of
    the interpreter's site directories. An installed package is on the worker's path there
    already, after the standard library; put first, a site directory would let any module
    in it shadow one of the standard library's. A checkout (tests, an editable install) has
    to be named."""
    env = dict(os.environ)
    if root not in _site_dirs():
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
    return env


def _site_dirs() -> set[Path]:
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    return {Path(d).resolve() for d in dirs}


def _start_worker(child: Connection) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        # -P: not the working directory first on sys.path, where a "chain" might shadow ours.
        [sys.executable, "-P", "-m", "chain.signatures.sigworker", str(child.fileno())],
        pass_fds=(child.fileno(),),
        stdin=subprocess.DEVNULL,
        env=worker_env(),
    )


Waiter = Callable[[], list[PublicKey | None]]


def recover_local(items: list[tuple[bytes, bytes]]) -> list[PublicKey | None]:
    """``recover_many`` in this thread; where the compiled core is selected, in one call
    that releases the GIL once for the batch: coincurve releases it around each signature,
    and a thread taking it back that often beside a busy event loop waits for it each time
    (2,000 recoveries beside a busy thread took 0.9 s instead of 0.06)."""
    batch = engine.recover_batch()
    return recover_many(items) if batch is None else batch(items)


class ParallelRecoverer:
    """A ``Recoverer`` backed by worker processes; call ``close`` when done."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError("a parallel recoverer needs at least one worker")
        self.workers = workers
        self._conns: list[Connection] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        for _ in range(workers):
            parent, child = multiprocessing.Pipe()
            try:
                self._procs.append(_start_worker(child))
            finally:
                child.close()
            self._conns.append(parent)
        self._next_job = 0
        self._turn = 0
        self._stash: dict[int, bytes] = {}
        self._dead: set[int] = set()

    def __call__(self, items: list[tuple[bytes, bytes]]) -> list[PublicKey | None]:
        if len(items) < MIN_PARALLEL:
            return recover_local(items)
        share = len(items) // (self.workers + 1)
        wait = self.submit(items[share:])
        return recover_local(items[:share]) + wait()

    def submit(self, items: list[tuple[bytes, bytes]]) -> Waiter:
        """Start recovering ``items`` in the workers; returns a function that waits for them."""
        alive = [w for w in range(self.workers) if w not in self._dead]
        if not alive or any(len(s) != SIGNATURE_SIZE or len(d) != 32 for s, d in items):
            result = recover_local(items)  # no workers left, or odd sizes: do it here
            return lambda: result
        size = min(MAX_CHUNK, max(1, -(-len(items) // len(alive))))
        parts: list[tuple[int, int, list[tuple[bytes, bytes]]]] = []
        for start in range(0, len(items), size):
            chunk = items[start : start + size]
            worker = alive[self._turn % len(alive)]
            self._turn += 1
            job = self._next_job
            self._next_job += 1
            message = job.to_bytes(8, "big") + b"".join(s + d for s, d in chunk)
            try:
                self._drain(worker)
                self._conns[worker].send_bytes(message)
            except (EOFError, OSError):
                self._dead.add(worker)
            parts.append((worker, job, chunk))
        return lambda: self._gather(parts)

    def _drain(self, worker: int) -> None:
        conn = self._conns[worker]
        while conn.poll(0):
            self._stash_one(conn)

    def _stash_one(self, conn: Connection) -> None:
        data = conn.recv_bytes()
        self._stash[int.from_bytes(data[:8], "big")] = data[8:]

    def _gather(
        self, parts: list[tuple[int, int, list[tuple[bytes, bytes]]]]
    ) -> list[PublicKey | None]:
        out: list[PublicKey | None] = []
        for worker, job, chunk in parts:
            try:
                while job not in self._stash:
                    if worker in self._dead:
                        raise EOFError
                    self._stash_one(self._conns[worker])
            except (EOFError, OSError):
                # A worker that died (killed, out of memory) costs speed, not correctness.
                self._dead.add(worker)
                out.extend(recover_local(chunk))
                continue
            blob = self._stash.pop(job)
            for i in range(0, len(blob), PUBLIC_KEY_SIZE):
                key = blob[i : i + PUBLIC_KEY_SIZE]
                out.append(None if key == NO_KEY else PublicKey(key))
        return out

    def close(self) -> None:
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.send_bytes(b"")
            conn.close()
        for proc in self._procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
