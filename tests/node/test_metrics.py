"""The node's metrics: what they read and the names dashboards know them by."""

from __future__ import annotations

from chain.core.execution import engine
from node.metrics import NodeMetrics
from node.network import NetworkStatus, PeerTraffic
from p2p.blocksync.manager import Stage, SyncStatus
from p2p.statesync.fetch import StateSyncStatus
from p2p.transport.channel import ChannelStats


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
