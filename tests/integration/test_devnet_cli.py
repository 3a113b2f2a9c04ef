"""A second ``bor-node devnet`` where one runs: refused in one line, before its banner."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.integration.conftest import BIN, Nodes, free_ports


def _devnet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "bor-node"), "devnet", *args], capture_output=True, text=True, timeout=60
    )


def test_a_second_devnet_fails_before_its_banner(nodes: Nodes, tmp_path: Path) -> None:
    """On the running devnet's data dir, or on its ports from another dir, ``bor-node devnet``
    exits non-zero with one line saying why, and prints no banner nor starts a node."""
    running = nodes.devnet().start()
    ports = [
        "--http-server-address",
        running.url.removeprefix("http://"),
        "--admin-base-port",
        str(free_ports(1)),
        "--p2p-base-port",
        str(free_ports(1)),
        "--producers",
        "1",
    ]
    same_dir = _devnet("--data-dir", str(running.data_dir), *ports)
    assert same_dir.returncode == 2
    assert same_dir.stdout == ""
    assert same_dir.stderr == (
        f"bor-node: a devnet already runs in {running.data_dir}"
        f" (pid {running.proc.pid if running.proc else '?'}); stop it first\n"
    )
    other_dir = _devnet("--data-dir", str(tmp_path / "other"), *ports)
    assert other_dir.returncode == 2
    port = running.url.rsplit(":", 1)[1]
    assert other_dir.stderr.startswith(f"bor-node: port {port} (node1's RPC) is in use: ")
    assert other_dir.stderr.count("\n") == 1 and "BoR devnet" not in other_dir.stderr
    assert not (tmp_path / "other" / "devnet.json").exists()
    assert running.running
    assert running.info()["head_block_num"] >= 0
    # --fresh on a running devnet's dir deletes nothing of it
    fresh = _devnet("--data-dir", str(running.data_dir), "--fresh", *ports)
    assert fresh.returncode == 2 and "a devnet already runs" in fresh.stderr
    assert (running.data_dir / "devnet.json").exists()
