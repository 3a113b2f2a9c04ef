"""State sync over RDMA (Soft-RoCE in the VM; skipped where there is none): the snapshot's
chunks travel on the RDMA session between two real node processes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from p2p.rdma.device import detect
from scripts.make_history import make_history
from tests.integration.conftest import (
    Nodes,
    devnet_p2p_address,
    fresh_data_dir,
    serve_snapshots,
    wait_for,
)


@pytest.fixture(autouse=True)
def need_rdma() -> None:
    info = detect()
    if not info.available:
        if os.environ.get("BOR_RDMA_REQUIRED"):
            pytest.fail(f"RDMA required but unavailable: {info.reason}")
        pytest.skip(f"no RDMA here: {info.reason}")


def test_a_fresh_node_state_syncs_over_rdma(nodes: Nodes, tmp_path: Path) -> None:
    """A fresh node fetches a snapshot in chunks from its RDMA peer (the session that carried
    them was RDMA, received more than the snapshot's bytes, and the server wrote them into the
    syncing node's landing zone), then follows the chain."""
    history = make_history(tmp_path / "history", txs=600, per_block=4, accounts=50)
    server = nodes.run(
        tmp_path / "history", "--signature-workers", "0", "--snapshot-chunk-bytes", "8192"
    ).start()
    assert server.info()["rdma"]["available"], server.info()["rdma"]
    made = server.admin("/v1/producer/create_snapshot", {})
    size = Path(made["snapshot_name"]).stat().st_size
    wait_for(lambda: server.rpc("/v1/node/snapshots")["snapshots"] != [], 30, "the offer")

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(tmp_path / "history" / "genesis.json", fresh / "genesis.json")
    syncer = nodes.run(
        fresh,
        "--signature-workers",
        "0",
        "--state-sync",
        "on",
        "--state-sync-trusted-block",
        made["head_block_id"],
        "--p2p-peer-address",
        f"127.0.0.1:{nodes.p2p_ports[tmp_path / 'history']}",
    ).start()
    head = int(history["head"])  # type: ignore[call-overload]
    wait_for(lambda: syncer.info()["head_block_num"] >= head, 300, "the history's head")
    assert syncer.info()["head_block_id"] == server.info()["head_block_id"]
    lines = [json.loads(x) for x in syncer.log.read_text().splitlines() if x.startswith("{")]
    assert any(x["event"] == "state_sync_imported" for x in lines)
    fetch_sessions = [
        x for x in lines if x["event"] == "peer_disconnected" and x.get("bytes_received", 0) > size
    ]
    assert fetch_sessions and fetch_sessions[0]["transport"] == "rdma", fetch_sessions
    # The server wrote the chunks straight into the landing zone the syncer named.
    served = [json.loads(x) for x in server.log.read_text().splitlines() if x.startswith("{")]
    landed = [x["rdma_landed_bytes"] for x in served if x["event"] == "peer_disconnected"]
    assert any(n > size for n in landed), landed


def test_with_no_trusted_block_the_headers_are_followed_over_rdma(
    nodes: Nodes, tmp_path: Path
) -> None:
    """With no trusted block, a fresh node follows a live chain's signed headers, then
    fetches the snapshot they vouch for, on RDMA sessions only (every session it had was
    RDMA), and follows the chain."""
    devnet = nodes.devnet("live").start(wait_head=1)
    serve_snapshots(devnet, 8192)
    assert devnet.info()["rdma"]["available"], devnet.info()["rdma"]
    fresh = fresh_data_dir(tmp_path / "fresh", devnet.data_dir / "genesis.json")
    listen = devnet_p2p_address(devnet)
    syncer = nodes.run(
        fresh, "--signature-workers", "0", "--state-sync", "on", "--p2p-peer-address", listen
    ).start()
    wait_for(lambda: "state_sync_imported" in syncer.log.read_text(), 120, "the snapshot imported")
    wait_for(lambda: syncer.rpc("/v1/node/sync")["stage"] == "in_sync", 60, "following the chain")
    lines = [json.loads(x) for x in syncer.log.read_text().splitlines() if x.startswith("{")]
    assert any(x["event"] == "headers_followed" for x in lines)
    chosen = [x for x in lines if x["event"] == "state_sync_trusted_by_headers"][-1]
    (imported,) = [x for x in lines if x["event"] == "state_sync_imported"]
    assert imported["block_id"] == chosen["block_id"]
    sessions = [x["transport"] for x in lines if x["event"] == "peer_connected"]
    assert sessions and set(sessions) == {"rdma"}, sessions
