"""Node processes that sync over RDMA (Soft-RoCE in the VM; skipped where there is none)."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from chain.storage.blocklog import BlockLog
from p2p.rdma.device import detect
from scripts.make_history import make_history
from tests.integration.conftest import NodeProcess, Nodes, wait_for

BLOCKS = 300


@pytest.fixture(autouse=True)
def need_rdma() -> None:
    info = detect()
    if not info.available:
        if os.environ.get("BOR_RDMA_REQUIRED"):
            pytest.fail(f"RDMA required but unavailable: {info.reason}")
        pytest.skip(f"no RDMA here: {info.reason}")


def _history(nodes: Nodes, tmp: Path, name: str = "history", *extra: str) -> NodeProcess:
    if not (tmp / "history").exists():
        make_history(tmp / "history", txs=BLOCKS * 2, per_block=2, accounts=20)
    if name != "history":
        shutil.copytree(tmp / "history", tmp / name)
    return nodes.run(tmp / name, "--signature-workers", "0", *extra).start()


def _joiner(nodes: Nodes, tmp: Path, peers: list[Path], *extra: str) -> NodeProcess:
    data = tmp / "joiner"
    data.mkdir()
    shutil.copy(tmp / "history" / "genesis.json", data / "genesis.json")
    flags = [f for p in peers for f in ("--p2p-peer-address", f"127.0.0.1:{nodes.p2p_ports[p]}")]
    return nodes.run(data, "--signature-workers", "0", *flags, *extra)


def _same_chain(a: NodeProcess, b: NodeProcess) -> None:
    head = b.info()["head_block_num"]
    wait_for(lambda: a.info()["head_block_num"] >= head, 300, f"head {head}")
    ours = a.rpc("/v1/chain/get_block", {"block_num_or_id": head})
    theirs = b.rpc("/v1/chain/get_block", {"block_num_or_id": head})
    assert (ours["id"], ours["state_root"]) == (theirs["id"], theirs["state_root"])


def _peer(node: NodeProcess) -> dict[str, Any]:
    (peer,) = node.rpc("/v1/net/peers")["peers"]
    return dict(peer)


def test_a_fresh_node_bootstraps_with_every_block_over_rdma(nodes: Nodes, tmp_path: Path) -> None:
    """A fresh node gets every block from its peer over RDMA, not TCP, reports RDMA metrics, and its
    RPC stays prompt."""
    server = _history(nodes, tmp_path)
    assert server.info()["rdma"]["available"], server.info()["rdma"]
    joiner = _joiner(nodes, tmp_path, [tmp_path / "history"]).start()
    _same_chain(joiner, server)
    peer = _peer(joiner)
    assert peer["transport"] == "rdma"
    assert peer["rdma_writes"] > 0 and peer["rdma_completions"] > 0
    log = BlockLog(tmp_path / "history" / "history.log")
    blocks = sum(len(raw) for _, raw in log.blocks())  # each block once, no log framing
    log.close()
    assert peer["bytes_received"] > blocks, "every block came over RDMA"
    assert _peer(server)["rdma_landed_bytes"] > blocks, "straight into the zones it named"
    # Over TCP only hello, handshake and the RDMA set-up: no block bytes.
    assert peer["tcp_bytes_received"] < 2000, peer
    metrics = joiner.rpc_text("/metrics")
    assert "bor_rdma_available 1.0" in metrics
    assert f'bor_rdma_peer_writes{{peer="{peer["peer"]}"}}' in metrics
    # The RDMA channel is idle now, its poller waiting: the RPC still answers promptly (a
    # poller blocked in get_cq_event would hold the GIL and freeze it for seconds).
    latencies = []
    for _ in range(20):
        started = time.monotonic()
        joiner.info()
        latencies.append(time.monotonic() - started)
    assert max(latencies) < 1.5, latencies


def test_with_rdma_off_on_one_side_the_peers_use_tcp(nodes: Nodes, tmp_path: Path) -> None:
    """With RDMA off on one side, the peers sync the same chain over TCP."""
    server = _history(nodes, tmp_path)
    joiner = _joiner(nodes, tmp_path, [tmp_path / "history"], "--rdma", "off").start()
    assert joiner.info()["rdma"] == {"available": False, "reason": "rdma = off"}
    _same_chain(joiner, server)
    assert _peer(joiner)["transport"] == "tcp"


def test_the_rdma_peer_killed_mid_sync_the_sync_completes_over_tcp(
    nodes: Nodes, tmp_path: Path
) -> None:
    """When the RDMA peer is killed mid-sync, the joiner finishes from its TCP peer and drops the
    dead RDMA session."""
    fast = _history(nodes, tmp_path)
    slow = _history(nodes, tmp_path, "tcp-only", "--rdma", "off")
    joiner = _joiner(
        nodes, tmp_path, [tmp_path / "history", tmp_path / "tcp-only"], "--sync-fetch-span", "20"
    ).start()
    wait_for(lambda: joiner.info()["head_block_num"] >= 40, 300, "sync under way")
    transports = {p["transport"] for p in joiner.rpc("/v1/net/peers")["peers"]}
    assert "rdma" in transports, transports
    fast.stop(signal.SIGKILL)
    _same_chain(joiner, slow)

    def transports_now() -> set[str]:
        return {p["transport"] for p in joiner.rpc("/v1/net/peers")["peers"]}

    # The dead peer's channel goes when its writes fail or its keepalives stop (3 intervals).
    wait_for(lambda: transports_now() == {"tcp"}, 30, "the dead RDMA peer to be dropped")


def test_a_peer_that_stops_answering_is_dropped_and_the_sync_resumes_over_tcp(
    nodes: Nodes, tmp_path: Path
) -> None:
    """An RDMA peer stopped with SIGSTOP is dropped; once it resumes, the sync completes with it
    over TCP."""
    server = _history(nodes, tmp_path)
    joiner = _joiner(nodes, tmp_path, [tmp_path / "history"], "--sync-fetch-span", "20").start()
    wait_for(lambda: joiner.info()["head_block_num"] >= 40, 300, "sync under way")
    assert _peer(joiner)["transport"] == "rdma"
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)  # its RDMA queue pair lives on, its node does not
    try:
        wait_for(lambda: not joiner.rpc("/v1/net/peers")["peers"], 60, "the silent peer dropped")
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    _same_chain(joiner, server)
    assert _peer(joiner)["transport"] == "tcp", "RDMA with that peer backs off after a failure"
