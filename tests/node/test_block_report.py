"""Block metrics, the ``block_applied`` line and the collector's thresholds, all driven by the
chain's updates."""

from __future__ import annotations

import gc
from pathlib import Path

from chain.core.execution.actions import Transfer
from chain.core.primitives.types import AccountName
from chain.events import BlockStep, ChainEvents, ChainUpdate
from chain.testing import now_ms
from genesis.testing import DevNet
from node.app import GC_THRESHOLDS, GC_THRESHOLDS_CATCHING_UP
from node.block_report import BlockReporter
from node.metrics import NodeMetrics

A, B = AccountName("alice"), AccountName("bob")


def _metric(metrics: NodeMetrics, name: str) -> float:
    value = metrics.registry.get_sample_value(name)
    return 0.0 if value is None else value


def test_blocks_drive_the_metrics_and_the_collector(tmp_path: Path) -> None:
    """Every applied block's transactions are counted; only a peer's block applied in sync
    is timed; blocks applied while catching up switch the collector to the catch-up
    thresholds, and blocks applied in sync or produced here switch it back."""
    net = DevNet.create()
    chain = net.open(tmp_path / "dev")
    chain.take_events()  # records from here on, as on the chain thread
    chain.admit_transaction(net.tx(chain, Transfer(A, B, 1)), now_ms())
    net.produce(chain)  # ours: in the events taken next
    view, events = chain.view(), chain.take_events()
    chain.admit_transaction(net.tx(chain, Transfer(A, B, 2)), now_ms())
    chain.admit_transaction(net.tx(chain, Transfer(A, B, 3)), now_ms())
    from_peer = net.produce(chain)
    chain.store.close()
    metrics = NodeMetrics()
    in_sync = [False]
    blocks = BlockReporter(metrics, lambda: in_sync[0], GC_THRESHOLDS, GC_THRESHOLDS_CATCHING_UP)
    peer_update = ChainUpdate(view, ChainEvents((BlockStep(from_peer),)), view.lib_num)
    before = gc.get_threshold()
    try:
        blocks.chain_updated(peer_update)
        assert gc.get_threshold() == GC_THRESHOLDS_CATCHING_UP
        assert _metric(metrics, "bor_block_latency_seconds_count") == 0, "catching up: untimed"
        in_sync[0] = True
        blocks.chain_updated(peer_update)
        assert gc.get_threshold() == GC_THRESHOLDS
        assert _metric(metrics, "bor_block_latency_seconds_count") == 1
        in_sync[0] = False
        blocks.chain_updated(peer_update)
        blocks.chain_updated(ChainUpdate(view, events, view.lib_num))
        assert gc.get_threshold() == GC_THRESHOLDS, "a block of ours: we follow the chain"
        assert _metric(metrics, "bor_block_latency_seconds_count") == 1
    finally:
        gc.set_threshold(*before)
    assert _metric(metrics, "bor_block_transactions_total") == 3 * 2 + 1
    assert GC_THRESHOLDS_CATCHING_UP[0] > GC_THRESHOLDS[0]
