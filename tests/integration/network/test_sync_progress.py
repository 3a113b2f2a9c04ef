"""A node catching up from a peer says how it is getting on, in its log and in
``bor-node status``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from scripts.make_history import make_history
from tests.integration.conftest import BIN, Nodes, free_port
from tests.support.wait import SLOWDOWN, observe


def _events(log: Path, event: str) -> list[dict[str, Any]]:
    lines = log.read_text(errors="replace").splitlines()
    return [
        e
        for e in (json.loads(line) for line in lines if line.startswith("{"))
        if e.get("event") == event
    ]


def test_a_catching_up_node_logs_sync_progress_and_status_reads_its_config(
    nodes: Nodes, tmp_path: Path
) -> None:
    """A fresh node syncing ~400 blocks from a peer logs sync_progress lines with a target and
    a rate, none once in sync; `bor-node status --json --data-dir` asks the RPC address the
    node wrote to node.json and reports it in sync at the peer's head, with its peer."""
    summary = make_history(tmp_path / "history", txs=2000, per_block=5, accounts=50)
    nodes.run(tmp_path / "history").start()
    head = int(summary["head"])  # type: ignore[call-overload]
    server_p2p = nodes.p2p_ports[tmp_path / "history"]

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(tmp_path / "history" / "genesis.json", fresh / "genesis.json")
    rpc_port = free_port()
    (fresh / "config.ini").write_text(
        f"http-server-address = 127.0.0.1:{rpc_port}\n"
        f"admin-http-server-address = 127.0.0.1:{free_port()}\n"
        f"p2p-listen-endpoint = 127.0.0.1:{free_port()}\n"
        f"p2p-peer-address = 127.0.0.1:{server_p2p}\n"
        # Small ranges, one at a time, and a line every 100 ms: the catch-up lasts long enough
        # on any machine to log several lines.
        "sync-fetch-span = 5\nsync-ranges = 1\nsync-progress-interval-ms = 100\n"
    )
    joiner = nodes.run(fresh, rpc_port=rpc_port).start()
    joiner.wait_for_head(head, timeout=60)

    lines = _events(joiner.log, "sync_progress")
    assert lines, joiner.tail()
    assert all(0 < line["target"] <= head for line in lines), lines
    assert all(line["stage"] in ("lib_catchup", "head_catchup") for line in lines), lines
    moving = [line for line in lines if line["blocks_per_s"] > 0]
    assert moving and all(line["peers"] == 1 for line in moving), lines
    assert any(line["eta_s"] is not None and line["txs_per_s"] > 0 for line in moving), lines

    done = subprocess.run(
        [str(BIN / "bor-node"), "status", "--data-dir", str(fresh), "--json"],
        capture_output=True,
        text=True,
        timeout=20 * SLOWDOWN,
    )
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["url"] == f"http://127.0.0.1:{rpc_port}"
    assert status["address_from"] == str(fresh / "node.json")  # what the node bound
    assert status["head_block_num"] >= head and status["peers"] == 1
    assert status["sync"]["stage"] == "in_sync"
    in_sync = len(_events(joiner.log, "sync_progress"))
    observe(  # two sync ticks, each of which would log a line if one were due
        2.5,
        lambda: len(_events(joiner.log, "sync_progress")) == in_sync,
        "no line once in sync",
        interval=0.2,
    )
