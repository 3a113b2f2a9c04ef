"""State sync between real node processes: a fresh node fetches the snapshot of a trusted
block from three peers in verified chunks, though one serves corrupted chunks (it is banned)
and one dies mid-transfer; killed with -9 itself mid-sync, it resumes without refetching
what it held (and fetches none of it again), then follows the chain from the snapshot.
/metrics shows the same progress as /v1/node/sync."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

from chain.core.header_chain import HeaderChain
from genesis.model import load_genesis
from scripts.make_history import make_history
from tests.integration.conftest import (
    NodeProcess,
    Nodes,
    devnet_p2p_address,
    fresh_data_dir,
    serve_snapshots,
    wait_for,
)

CHUNK = 4096


def _server(nodes: Nodes, source: Path, data: Path, snapshot: Path) -> NodeProcess:
    shutil.copytree(source, data)
    (data / "snapshots").mkdir(exist_ok=True)
    shutil.copy(snapshot, data / "snapshots" / snapshot.name)
    return nodes.run(data, "--snapshot-chunk-bytes", str(CHUNK))


def _served(node: NodeProcess) -> bool:
    return "snapshot_served" in node.log.read_text()


def _state_sync(node: NodeProcess) -> dict[str, Any]:
    status: dict[str, Any] = node.rpc("/v1/node/sync")
    return dict(status.get("state_sync") or {})


def _metrics(node: NodeProcess) -> dict[str, float]:
    """/metrics, each sample (with its labels) by name."""
    lines = node.rpc_text("/metrics").splitlines()
    samples = (line.rpartition(" ") for line in lines if line and not line.startswith("#"))
    return {name: float(value) for name, _, value in samples}


def _metrics_agree(node: NodeProcess) -> bool:
    """The state sync metrics say what /v1/node/sync says (their text may be a second old)."""
    status, metrics = _state_sync(node), _metrics(node)
    expected = {
        "bor_state_sync_chunks_done": status["chunks"],
        "bor_state_sync_snapshot_chunks": status["chunks_total"],
        "bor_state_sync_bytes_done": status["bytes"],
        "bor_state_sync_snapshot_bytes": status["bytes_total"],
        'bor_state_sync_peers_banned_total{reason="chunk"}': status["peers_banned"].get("chunk", 0),
    }
    return all(metrics.get(name) == value for name, value in expected.items())


def _events(log: str, event: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.splitlines() if f'"{event}"' in line]


def _damage_behind_its_hashes(liar: NodeProcess, damaged: Path) -> None:
    """Damage ``liar``'s snapshot file on disk while it is stopped, leaving the file's time
    alone (bit rot), and start it again: it goes on serving the hashes it made of the good
    file."""
    liar.stop()
    data = bytearray(damaged.read_bytes())
    # Every third chunk from chunk 4 on, behind its hash: the first four, asked at once and
    # answered in no set order, are sound, so some are kept whichever comes first.
    for at in range(4 * CHUNK + CHUNK // 2, len(data), CHUNK * 3):
        data[at] ^= 0xFF
    kept = damaged.stat()
    damaged.write_bytes(bytes(data))
    # Damage on disk that leaves the file's time alone (bit rot): the liar goes on serving
    # the hashes it made of the good file.
    os.utime(damaged, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    served_before = liar.log.read_text().count("snapshot_served")
    liar.start()
    wait_for(
        lambda: liar.log.read_text().count("snapshot_served") > served_before,
        30,
        "the liar to serve again",
    )


def _check_resumed_and_banned(log: str, liar_id: str, good_id: str) -> None:
    """The restarted node kept the chunks it had fetched and fetched none again, caught the
    corrupt server's chunks, and banned it alone during the state sync."""
    resumed = _events(log, "state_sync_resuming")
    assert resumed and resumed[-1]["held"] > 0, "the restart kept what it had fetched"
    (done,) = _events(log, "state_sync_done")
    assert done["resumed"] == resumed[-1]["held"], "the chunks held were counted as held"
    assert done["fetched"] == done["chunks"] - done["resumed"], "none was fetched again"
    bad = {e["peer"] for e in _events(log, "state_sync_bad_chunk")}
    assert bad == {liar_id}, "the corrupt server's chunks were caught"
    # Bans during the state sync (in the block sync of the tail after it, a server slow to
    # send its first range may be banned a while: a separate rule, tested on its own).
    during = log[: log.index('"state_sync_done"')]
    banned = {e["node"] for e in _events(during, "peer_banned")}
    assert liar_id in banned and good_id not in banned, "the corrupt server alone was banned"


def test_state_sync_from_three_peers_one_corrupt_one_killed_and_resume(
    nodes: Nodes, tmp_path: Path
) -> None:
    """Three servers hold the same snapshot; one's file is damaged behind its (correct)
    manifest, one is frozen and then killed; the fresh node bans the corrupt server, is
    itself killed with -9 mid-sync, resumes with the chunks it held, verifies the snapshot
    against the trusted block and ends at the history's head."""
    history = make_history(tmp_path / "history", txs=8000, per_block=20, accounts=1000)
    head = int(history["head"])  # type: ignore[call-overload]
    origin = nodes.run(tmp_path / "history").start()
    made = origin.admin("/v1/producer/create_snapshot", {})
    snapshot = Path(made["snapshot_name"])
    trusted = made["head_block_id"]
    assert origin.stop() == 0
    for extra in snapshot.parent.glob("*.chunks"):
        extra.unlink()

    good = _server(nodes, tmp_path / "history", tmp_path / "good", snapshot).start()
    doomed = _server(nodes, tmp_path / "history", tmp_path / "doomed", snapshot).start()
    liar = _server(nodes, tmp_path / "history", tmp_path / "liar", snapshot).start()
    for server in (good, doomed, liar):
        wait_for(lambda s=server: _served(s), 30, f"{server.data_dir.name} to serve")  # type: ignore[misc]
    listed = good.rpc("/v1/node/snapshots")["snapshots"]
    assert [(s["block_id"], s["chunks"]) for s in listed] == [
        (trusted, -(-snapshot.stat().st_size // CHUNK))
    ], "an operator reads the trusted block id here"
    _damage_behind_its_hashes(liar, tmp_path / "liar" / "snapshots" / snapshot.name)
    liar_id = str(liar.rpc("/v1/net/peers")["node_id"])[:16]
    good_id = str(good.rpc("/v1/net/peers")["node_id"])[:16]

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(tmp_path / "history" / "genesis.json", fresh / "genesis.json")
    peers = [
        arg
        for server in (good, doomed, liar)
        for arg in ("--p2p-peer-address", f"127.0.0.1:{nodes.p2p_ports[server.data_dir]}")
    ]
    # Only the liar serves at first: the sound chunks it sends before its first damaged one
    # are kept, then it is banned and, the others frozen, the transfer holds there (a
    # transfer left running would finish between two polls of a test on a fast machine).
    for server in (good, doomed):
        assert server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)
    syncer = nodes.run(
        fresh, "--state-sync", "on", "--state-sync-trusted-block", trusted, *peers
    ).start()
    wait_for(lambda: "state_sync_bad_chunk" in syncer.log.read_text(), 60, "a damaged chunk")
    wait_for(lambda: _state_sync(syncer).get("chunks", 0) > 0, 30, "the first chunks")
    status = _state_sync(syncer)
    assert 0 < status["chunks"] < status["chunks_total"], status
    wait_for(lambda: _metrics_agree(syncer), 10, "/metrics to show the state sync's progress")
    metrics = _metrics(syncer)
    assert metrics["bor_state_sync_chunks_done"] > 0, "the gauges moved from 0"
    assert metrics["bor_state_sync_bytes_per_second"] > 0
    assert syncer.stop(signal.SIGKILL) == -signal.SIGKILL
    assert good.proc is not None
    good.proc.send_signal(signal.SIGCONT)
    assert doomed.proc is not None
    doomed.proc.send_signal(signal.SIGKILL)  # it dies: its share goes to the others
    doomed.proc.wait()

    syncer.start()
    wait_for(lambda: syncer.info()["head_block_num"] >= head, 120, "the node to reach the head")
    log = syncer.log.read_text()
    _check_resumed_and_banned(log, liar_id, good_id)
    assert "state_sync_imported" in log
    assert syncer.info()["head_block_id"] == good.info()["head_block_id"]
    assert syncer.info()["sync_stage"] == "in_sync"
    assert syncer.rpc("/v1/chain/get_info")["last_irreversible_block_num"] >= made["head_block_num"]


def test_with_no_trusted_block_the_node_follows_the_header_chain_to_find_one(
    nodes: Nodes, tmp_path: Path
) -> None:
    """Started with state sync and no block id from its operator, a fresh node follows the
    signed headers of a live chain from genesis, fetches the snapshot of a block they show
    irreversible, and then follows the chain. (A snapshot is of its maker's LIB, which on a
    votes chain the headers show final one block later: the chain has to move on.)"""
    devnet = nodes.devnet("live").start(wait_head=1)
    serve_snapshots(devnet, CHUNK)
    listen = devnet_p2p_address(devnet)
    fresh = fresh_data_dir(tmp_path / "fresh", devnet.data_dir / "genesis.json")
    syncer = nodes.run(fresh, "--state-sync", "on", "--p2p-peer-address", listen).start()
    wait_for(lambda: "state_sync_imported" in syncer.log.read_text(), 90, "the snapshot imported")
    wait_for(
        lambda: syncer.rpc("/v1/node/sync")["stage"] == "in_sync",
        60,
        "the node to follow the chain",
    )
    log = syncer.log.read_text()
    started = _events(log, "state_sync_started")[0]
    assert started["following_headers"] is True and started["block_id"] is None
    (chosen,) = _events(log, "state_sync_trusted_by_headers")
    assert chosen["headers_lib"] >= chosen["block"], "a block the headers showed final"
    assert _events(log, "headers_followed")
    (imported,) = _events(log, "state_sync_imported")
    assert imported["block_id"] == chosen["block_id"]
    name = f"snapshot-{chosen['block']:010d}-{chosen['block_id'][:16]}.bin"
    served = {e["file"] for e in _events(devnet.log.read_text(), "snapshot_served")}
    assert name in served, "one of the snapshots the producer made"
    head = devnet.info()["head_block_num"]
    wait_for(lambda: syncer.info()["head_block_num"] >= head, 30, "the producer's head")


def test_killed_while_following_headers_the_node_follows_on_from_its_checkpoint(
    nodes: Nodes, tmp_path: Path
) -> None:
    """A node following a live chain's headers (no snapshot offered yet) keeps a checkpoint
    of them; killed with -9 and started again, it follows on from the checkpoint's LIB, not
    from genesis, then state-syncs from the first snapshot offered and drops the checkpoint."""
    devnet = nodes.devnet("live").start(wait_head=1)
    listen = devnet_p2p_address(devnet)
    fresh = fresh_data_dir(tmp_path / "fresh", devnet.data_dir / "genesis.json")
    syncer = nodes.run(fresh, "--state-sync", "on", "--p2p-peer-address", listen).start()
    kept = fresh / "state-sync-headers"
    wait_for(lambda: "headers_followed" in syncer.log.read_text(), 60, "headers followed")
    wait_for(kept.exists, 30, "a header checkpoint")
    wait_for(
        lambda: _metrics(syncer).get("bor_state_sync_headers_lib", 0) > 0,
        10,
        "/metrics to show the headers followed",
    )
    shown = _metrics(syncer)["bor_state_sync_headers_lib"]  # a second old at most
    assert shown <= syncer.rpc("/v1/node/sync")["state_sync"]["headers"]["lib"]
    assert syncer.stop(signal.SIGKILL) == -signal.SIGKILL
    initial = load_genesis(fresh / "genesis.json").to_initial_state()
    saved = HeaderChain.resume(kept.read_bytes(), initial.params, initial.chain_id).lib
    assert saved > 0

    serve_snapshots(devnet, CHUNK)
    before = len(syncer.log.read_text())
    syncer.start()
    wait_for(lambda: "state_sync_imported" in syncer.log.read_text(), 90, "the snapshot imported")
    log = syncer.log.read_text()[before:]
    (resumed,) = _events(log, "headers_resumed")
    assert resumed["lib"] == saved
    first = _events(log, "headers_followed")[0]
    assert first["tip"] - first["count"] >= saved, "followed on from the checkpoint's LIB"
    wait_for(lambda: syncer.rpc("/v1/node/sync")["stage"] == "in_sync", 60, "following the chain")
    assert not kept.exists(), "dropped once the snapshot is imported"
