"""State sync against the peers it meets, between real node processes: offerers that never
answer cannot hold a fresh node's download (they are dropped, and the one honest peer
serves it), and a peer its operator added at run time is still its peer after the node
restarts into the snapshot it fetched."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from chain.core.primitives.types import BlockId
from p2p.wire.messages import GoAwayReason, SnapshotOffer
from scripts.make_history import make_history
from scripts.peers import SilentOfferer
from tests.integration.conftest import NodeProcess, Nodes, fresh_data_dir, wait_for
from tests.support.wait import SLOWDOWN

CHUNK = 4096
TIMEOUT_MS = 2000  # the syncer's request timeout: six lapses cost 12 s, not a minute


def _origin(nodes: Nodes, tmp_path: Path) -> tuple[NodeProcess, dict[str, Any]]:
    """A node holding a short history that serves one snapshot of its head: the honest
    peer. Returns it and the snapshot it lists."""
    make_history(tmp_path / "history", txs=400, per_block=20, accounts=100)
    origin = nodes.run(tmp_path / "history", "--snapshot-chunk-bytes", str(CHUNK)).start()
    made = origin.admin("/v1/producer/create_snapshot", {})
    wait_for(lambda: origin.rpc("/v1/node/snapshots")["snapshots"], 30, "the snapshot served")
    (listed,) = origin.rpc("/v1/node/snapshots")["snapshots"]
    assert listed["block_id"] == made["head_block_id"]
    return origin, listed


def _syncer(nodes: Nodes, tmp_path: Path, trusted: str) -> NodeProcess:
    fresh = fresh_data_dir(tmp_path / "fresh", tmp_path / "history" / "genesis.json")
    return nodes.run(
        fresh,
        "--state-sync",
        "on",
        "--state-sync-trusted-block",
        trusted,
        "--state-sync-request-timeout-ms",
        str(TIMEOUT_MS),
    ).start()


def _address(nodes: Nodes, node: NodeProcess) -> str:
    return f"127.0.0.1:{nodes.p2p_ports[node.data_dir]}"


def _events(log: str, event: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.splitlines() if f'"{event}"' in line]


def _peers(node: NodeProcess) -> set[str]:
    return {str(p["peer"]) for p in node.rpc("/v1/net/peers")["peers"]}


def test_silent_offerers_are_dropped_and_the_honest_peer_serves_the_snapshot(
    nodes: Nodes, tmp_path: Path
) -> None:
    """Three identities offer the trusted block under a root of their own (outvoting the
    honest peer's) and never answer the manifest request, coming back after every drop:
    each is dropped with a benign go_away after two lapses, and the snapshot, served by the
    honest peer the operator connects, is imported within seven request timeouts."""
    origin, listed = _origin(nodes, tmp_path)
    syncer = _syncer(nodes, tmp_path, listed["block_id"])
    chain_id = bytes.fromhex(syncer.info()["chain_id"])
    forged = SnapshotOffer(
        BlockId(bytes.fromhex(listed["block_id"])), listed["size"], CHUNK, os.urandom(32)
    )
    where = ("127.0.0.1", nodes.p2p_ports[syncer.data_dir])
    silent = [SilentOfferer(chain_id, where, forged) for _ in range(3)]
    stop = threading.Event()
    try:
        for offerer in silent:
            offerer.haunt(stop)
        wait_for(lambda: all(s.connected.is_set() for s in silent), 20, "the silent offerers in")
        wait_for(lambda: sum(s.manifest_requests for s in silent) > 0, 20, "a manifest asked")
        started = time.monotonic()
        syncer.admin("/v1/net/connect", {"address": _address(nodes, origin)})
        bound = 7 * TIMEOUT_MS / 1000 + 15  # six lapses, the ticks between them, the fetch
        wait_for(lambda: "state_sync_done" in syncer.log.read_text(), bound, "the sync done")
        took = time.monotonic() - started
    finally:
        stop.set()
    assert took <= bound * SLOWDOWN
    log = syncer.log.read_text()
    during = log[: log.index('"state_sync_done"')]
    dropped = {e["peer"] for e in _events(during, "state_sync_peer_dropped")}
    assert dropped == {s.node_id.hex()[:16] for s in silent}, "each silent offerer dropped"
    for offerer in silent:
        assert [g.reason for g in offerer.dropped][:1] == [GoAwayReason.BENIGN_OTHER]
        assert offerer.manifest_requests >= 2, "asked until its strikes ran out"
    (done,) = _events(log, "state_sync_done")
    assert done["fetched"] == done["chunks"], "every chunk came from the honest peer"
    wait_for(lambda: "state_sync_imported" in syncer.log.read_text(), 30, "the snapshot imported")
    wait_for(lambda: syncer.info()["head_block_num"] >= listed["block_num"], 30, "the head")


def test_a_peer_added_at_run_time_is_still_a_peer_after_the_restart_into_the_snapshot(
    nodes: Nodes, tmp_path: Path
) -> None:
    """The only peer of a state-syncing node is one its operator added with /v1/net/connect:
    the node, restarted into the snapshot it fetched, dials that peer again and follows it."""
    origin, listed = _origin(nodes, tmp_path)
    origin_id = str(origin.rpc("/v1/net/peers")["node_id"])[:16]
    syncer = _syncer(nodes, tmp_path, listed["block_id"])
    syncer.admin("/v1/net/connect", {"address": _address(nodes, origin)})
    wait_for(lambda: "state_sync_imported" in syncer.log.read_text(), 60, "the snapshot imported")
    wait_for(
        lambda: len(_events(syncer.log.read_text(), "node_started")) == 2,
        30,
        "the node restarted into the snapshot",
    )
    wait_for(lambda: origin_id in _peers(syncer), 20, "the added peer connected again")
    assert syncer.info()["head_block_num"] >= listed["block_num"]
