"""The node's metrics: what they read and the names dashboards know them by."""

from __future__ import annotations

import importlib.metadata
import platform
import re
import time

from chain.core.execution import engine
from node.metrics import NodeMetrics
from node.network import NetworkStatus, PeerTraffic
from p2p.blocksync.manager import Stage, SyncStatus
from p2p.statesync.fetch import StateSyncStatus
from p2p.transport.channel import ChannelStats
from tests.support import live_node


def _sample(metrics: NodeMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def _sync(stage: Stage, target: int, blocks_per_s: float) -> SyncStatus:
    return SyncStatus(stage, 0, 0, target, 1, (), 0, blocks_per_s, 0.0, None, 0, False)


def test_network_metrics_are_read_from_what_the_network_publishes() -> None:
    """observe_network takes a NetworkStatus (no network object) and sets the peer, sync,
    RDMA, state-sync and per-peer traffic metrics under their existing names; a peer gone
    from the status is gone from the metrics."""
    metrics = NodeMetrics()
    rdma = ChannelStats("rdma", 10, 20, 3, 4, rdma_writes=5, rdma_completions=6)
    status = NetworkStatus(
        peer_count=2,
        sync=_sync(Stage.HEAD_CATCHUP, 120, 33.5),
        state_sync=StateSyncStatus(
            done=False,
            block_id=None,
            headers=None,
            chunks=1,
            chunks_total=4,
            chunks_fetched=1,
            chunks_resumed=0,
            bytes=100,
            bytes_total=400,
            bytes_per_s=50,
            eta_s=6.0,
            sources=(),
            dropped=(),
            peers_banned={"chunk": 2},
        ),
        rdma_available=True,
        traffic=(
            PeerTraffic("a", ChannelStats("tcp", 1, 2, 1, 2)),
            PeerTraffic("b", rdma),
        ),
    )
    metrics.observe_network(status)
    assert _sample(metrics, "bor_p2p_peers") == 2
    assert _sample(metrics, "bor_sync_target_block_num") == 120
    assert _sample(metrics, "bor_sync_blocks_per_second") == 33.5
    assert _sample(metrics, "bor_sync_stage", stage="head_catchup") == 1
    assert _sample(metrics, "bor_sync_stage", stage="in_sync") == 0
    assert _sample(metrics, "bor_rdma_available") == 1
    assert _sample(metrics, "bor_state_sync_chunks_done") == 1
    assert _sample(metrics, "bor_state_sync_peers_banned_total", reason="chunk") == 2
    assert _sample(metrics, "bor_p2p_peer_bytes_sent", peer="a", transport="tcp") == 1
    assert _sample(metrics, "bor_p2p_peer_bytes_received", peer="b", transport="rdma") == 20
    assert _sample(metrics, "bor_p2p_peer_bytes_sent", peer="b", transport="tcp") == 3
    assert _sample(metrics, "bor_rdma_peer_writes", peer="b") == 5
    assert _sample(metrics, "bor_rdma_peer_completions", peer="b") == 6
    metrics.observe_network(NetworkStatus(0, _sync(Stage.IN_SYNC, 0, 0.0), None, False, traffic=()))
    assert _sample(metrics, "bor_p2p_peer_bytes_sent", peer="a", transport="tcp") is None
    assert _sample(metrics, "bor_sync_stage", stage="in_sync") == 1


def test_the_executor_is_a_label_of_bor_executor_info() -> None:
    """bor_executor_info{executor} is 1 for what runs native transactions when the metrics
    are made, the compiled core (native) or the Python reference alone (python)."""
    was = engine.name() == engine.NATIVE
    try:
        engine.select(False)
        assert _sample(NodeMetrics(), "bor_executor_info", executor="python") == 1
        engine.select(True)
        expected = "native" if engine.available() else "python"
        assert _sample(NodeMetrics(), "bor_executor_info", executor=expected) == 1
    finally:
        engine.select(was)


def _value(text: str, name: str) -> float:
    """The value of the one unlabelled sample ``name`` in a /metrics text."""
    values = [float(line.split()[1]) for line in text.splitlines() if line.split(" ")[0] == name]
    assert len(values) == 1, f"{name} once in /metrics"
    return values[0]


def test_a_running_nodes_metrics_carry_its_process_and_build() -> None:
    """A real node's /metrics has the process's memory, CPU, fds and their limit, threads and
    start time, Python's GC counts, and bor_build_info naming the version, the node's own
    chain id and this Python, with values a live process has (an operator's dashboard and
    alerts read these)."""
    served = live_node.scrape()
    text = served.metrics
    assert _value(text, "process_resident_memory_bytes") > 10 << 20
    assert _value(text, "process_virtual_memory_bytes") >= _value(
        text, "process_resident_memory_bytes"
    )
    assert _value(text, "process_cpu_seconds_total") > 0
    assert 0 < _value(text, "process_open_fds") < _value(text, "process_max_fds")
    assert _value(text, "process_threads") >= 2  # the event loop's and the chain thread
    assert 0 < time.time() - _value(text, "process_start_time_seconds") < 3600
    assert re.search(r'^python_gc_collections_total\{generation="0"\} [1-9]', text, re.M)
    assert re.search(r'^python_gc_objects_collected_total\{generation="0"\} ', text, re.M)
    build = re.findall(r"^bor_build_info\{(.*)\} 1\.0$", text, re.M)
    assert len(build) == 1
    labels = dict(re.findall(r'(\w+)="([^"]*)"', build[0]))
    assert labels == {
        "chain_id": served.chain_id,
        "python": platform.python_version(),
        "version": importlib.metadata.version("bor"),
    }
    assert len(served.chain_id) == 64


def test_rpc_calls_are_counted_by_route_and_status_with_their_time() -> None:
    """observe_rpc counts a call under its route and status and adds its seconds to the
    route's latency histogram (the dashboard's RPC rate, refusals and latency)."""
    metrics = NodeMetrics()
    metrics.observe_rpc("/v1/chain/get_info", 200, 0.002)
    metrics.observe_rpc("/v1/chain/get_info", 503, 0.0005)
    metrics.observe_rpc("/v1/chain/get_info", 200, 0.02)  # through the labelled child held
    route = "/v1/chain/get_info"
    assert _sample(metrics, "bor_rpc_requests_total", route=route, status="200") == 2
    assert _sample(metrics, "bor_rpc_requests_total", route=route, status="503") == 1
    assert _sample(metrics, "bor_rpc_request_seconds_count", route=route) == 3
    assert _sample(metrics, "bor_rpc_request_seconds_bucket", route=route, le="0.001") == 1
    assert "bor_rpc_requests_total" in live_node.metric_names(live_node.scrape().metrics)
