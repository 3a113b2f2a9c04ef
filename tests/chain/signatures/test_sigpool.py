"""Signature recovery in worker processes gives what recovery here gives, even if a worker dies;
a worker does not load the program that started it, nor find site-packages before the
standard library."""

from __future__ import annotations

import os
import signal
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chain.core.primitives.crypto import PrivateKey, recover_many, sha256
from chain.signatures.sigpool import ParallelRecoverer, worker_env


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
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        assert pool.submit(items)() == recover_many(items)
        assert pool(items) == recover_many(items)
    finally:
        pool.close()


def test_workers_do_not_import_the_program_that_starts_them(tmp_path: Path) -> None:
    """A program's main module runs once, in the program, however many workers its pool starts
    (a multiprocessing "spawn" child imports it again: for bor-node, the whole node)."""
    marker = tmp_path / "imports"
    script = tmp_path / "program.py"
    script.write_text(
        textwrap.dedent(
            f"""
            with open({str(marker)!r}, "a") as f:
                f.write("x")
            from chain.core.primitives.crypto import PrivateKey, sha256
            from chain.signatures.sigpool import ParallelRecoverer

            if __name__ == "__main__":
                digest = sha256(b"m")
                key = PrivateKey(sha256(b"k"))
                pool = ParallelRecoverer(2)
                try:
                    keys = pool([(key.sign(digest), digest)] * 200)
                finally:
                    pool.close()
                assert keys == [key.public_key] * 200, keys[:2]
            """
        )
    )
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, str(script)], check=True, env=env, timeout=60)
    assert marker.read_text() == "x"


def test_worker_env_names_a_checkout_but_not_a_site_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A checkout goes first on the workers' PYTHONPATH; an installed package's site directory
    does not, as it would put everything installed ahead of the standard library."""
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    assert worker_env(tmp_path)["PYTHONPATH"] == os.pathsep.join([str(tmp_path), "/elsewhere"])
    installed = Path(site.getsitepackages()[0]).resolve()
    assert worker_env(installed)["PYTHONPATH"] == "/elsewhere"
    monkeypatch.delenv("PYTHONPATH")
    assert "PYTHONPATH" not in worker_env(installed)
