"""Prometheus metrics of one node (its own registry, so several nodes can share a process)."""

from __future__ import annotations

import importlib.metadata
import platform
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from chain.core.execution import engine
from chain.core.primitives.params import slot_start_s
from chain.view import ChainView
from node.network import NetworkStatus
from p2p.blocksync.manager import Stage
from p2p.statesync.fetch import StateSyncStatus


def version() -> str:
    """The installed distribution's version (``bor-node --version`` says the same)."""
    try:
        return importlib.metadata.version("bor")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class ThreadsCollector(Collector):
    """``process_threads``: the process's OS threads (the chain thread, the signature and
    RPC workers, LevelDB's), which prometheus_client's process collector leaves out."""

    def collect(self) -> Iterable[GaugeMetricFamily]:
        threads = threading.active_count()  # where /proc is missing: Python's threads only
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("Threads:"):
                    threads = int(line.split()[1])
        except OSError:
            pass
        yield GaugeMetricFamily("process_threads", "OS threads of the process", value=threads)


class NodeMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        # The process (memory, CPU, fds and their limit, start time), Python (its version,
        # the GC's collections and objects collected) and threads: the collectors
        # prometheus_client registers on its global registry, on this node's own.
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR, ThreadsCollector()):
            r.register(collector)
        self._build_info = Info(
            "bor_build", "The node's version, chain and Python (value 1)", registry=r
        )
        self.build_info("")
        self._chain_metrics(r)
        self._rpc_metrics(r)
        self._production_metrics(r)
        self._finality_metrics(r)
        self._stream_metrics(r)
        self._peers_metrics(r)
        self._state_sync_metrics(r)

    def _chain_metrics(self, r: CollectorRegistry) -> None:
        """The chain: head, LIB, mempool, fork database, blocks and transactions."""
        self.head = Gauge("bor_head_block_num", "Number of the head block", registry=r)
        self.lib = Gauge("bor_last_irreversible_block_num", "Last irreversible block", registry=r)
        self.head_time = Gauge("bor_head_block_time_seconds", "Head block time", registry=r)
        self.mempool = Gauge("bor_mempool_transactions", "Transactions pending", registry=r)
        self.mempool_bytes = Gauge(
            "bor_mempool_bytes", "Bytes of the pending transactions (max-mempool-bytes)", registry=r
        )
        self.fork_db = Gauge("bor_fork_db_blocks", "Blocks in the fork database", registry=r)
        executor = Gauge(
            "bor_executor_info",
            "1 for what runs native transactions: native (the compiled core) or python",
            ["executor"],
            registry=r,
        )
        executor.labels(engine.name()).set(1)
        self.produced = Counter("bor_blocks_produced", "Blocks this node produced", registry=r)
        self.block_txs = Counter(
            "bor_block_transactions", "Transactions in blocks this node applied", registry=r
        )
        self.tx_accepted = Counter(
            "bor_transactions_accepted", "Transactions admitted to the mempool", registry=r
        )
        self.tx_rejected = Counter(
            "bor_transactions_rejected", "Transactions refused", ["reason"], registry=r
        )

    def _rpc_metrics(self, r: CollectorRegistry) -> None:
        """The RPC's reads of the chain thread."""
        self.rpc_chain_reads = Counter(
            "bor_rpc_chain_reads", "RPC reads answered on the chain thread", registry=r
        )
        self.rpc_read_batches = Counter(
            "bor_rpc_chain_read_batches", "Batches of RPC reads run on the chain thread", registry=r
        )
        self.rpc_reads_refused = Counter(
            "bor_rpc_reads_refused", "RPC reads refused (503) while too many waited", registry=r
        )
        self.rpc_requests = Counter(
            "bor_rpc_requests",
            "Calls the public RPC's routes answered, by route and HTTP status",
            ["route", "status"],
            registry=r,
        )
        self.rpc_seconds = Histogram(
            "bor_rpc_request_seconds",
            "Time to answer a public RPC route's call (body read to answer made)",
            ["route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0),
            registry=r,
        )
        self.rpc_push_batches = Counter(
            "bor_rpc_push_batches", "push_transactions requests (batches) taken", registry=r
        )
        self.rpc_push_batch_txs = Counter(
            "bor_rpc_push_batch_transactions",
            "Transactions in push_transactions batches (each also counted as accepted or"
            " rejected by admission, or refused before it)",
            registry=r,
        )

    def _production_metrics(self, r: CollectorRegistry) -> None:
        """Block production and the latency of peers' blocks."""
        self.produce_seconds = Histogram(
            "bor_block_production_seconds",
            "Time to build, sign and commit one block",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0),
            registry=r,
        )

        self.block_latency = Histogram(
            "bor_block_latency_seconds",
            "From a peer's block's slot start to its application here (in sync)",
            buckets=(0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.5, 1.0, 2.0, 5.0),
            registry=r,
        )

    def _finality_metrics(self, r: CollectorRegistry) -> None:
        """Finality: its latency, the votes and the finalizers."""
        self.finality_latency = Histogram(
            "bor_finality_latency_seconds",
            "From a block's slot start to the LIB reaching it here (the newest final block of"
            " each LIB advance)",
            buckets=(0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0),
            registry=r,
        )
        self.votes_received = Counter(
            "bor_finality_votes_received",
            "Votes from peers, by what became of them",
            ["result"],
            registry=r,
        )
        self.votes_cast = Counter(
            "bor_finality_votes_cast", "Votes this node's finalizers cast", registry=r
        )
        self.double_votes = Counter(
            "bor_finality_double_votes", "Double votes seen (evidence kept)", registry=r
        )
        self.finalizer_last_vote = Gauge(
            "bor_finalizer_last_vote_block_num",
            "Block of the last vote counted from each finalizer",
            ["finalizer"],
            registry=r,
        )
        self.finalizer_votes = Counter(
            "bor_finalizer_votes",
            "Votes counted from each finalizer (its participation)",
            ["finalizer"],
            registry=r,
        )
        self.production_paused = Gauge(
            "bor_production_paused", "1 while production waits for finality votes", registry=r
        )

    def _stream_metrics(self, r: CollectorRegistry) -> None:
        """The websocket stream's subscribers."""
        self.stream_subscribers = Gauge(
            "bor_stream_subscribers", "Open subscriptions of /v1/chain/stream", registry=r
        )
        self.stream_messages = Counter(
            "bor_stream_messages", "Messages sent to /v1/chain/stream subscribers", registry=r
        )
        self.stream_lagged = Counter(
            "bor_stream_lagged",
            "Subscriptions cut off with 'lagged' (their buffer of messages filled)",
            registry=r,
        )

    def _peers_metrics(self, r: CollectorRegistry) -> None:
        """The peer layer: peers, block sync, RDMA and each peer's traffic."""
        self.peers = Gauge("bor_p2p_peers", "Connected peers", registry=r)
        self.sync_target = Gauge("bor_sync_target_block_num", "Block the node syncs to", registry=r)
        self.sync_rate = Gauge(
            "bor_sync_blocks_per_second", "Blocks applied per second", registry=r
        )
        self.sync_stage = Gauge(
            "bor_sync_stage", "1 for the current sync stage", ["stage"], registry=r
        )
        self.rdma_available = Gauge(
            "bor_rdma_available", "1 if this node can set up RDMA channels", registry=r
        )
        labels = ["peer", "transport"]
        self.peer_sent = Gauge("bor_p2p_peer_bytes_sent", "Bytes sent", labels, registry=r)
        self.peer_received = Gauge(
            "bor_p2p_peer_bytes_received", "Bytes received", labels, registry=r
        )
        self.rdma_writes = Gauge(
            "bor_rdma_peer_writes", "RDMA writes posted to a peer", ["peer"], registry=r
        )
        self.rdma_completions = Gauge(
            "bor_rdma_peer_completions",
            "Work completions of a peer's channel",
            ["peer"],
            registry=r,
        )

    def _state_sync_metrics(self, r: CollectorRegistry) -> None:
        """State sync's download."""
        # State sync, as /v1/node/sync's "state_sync" says (0 unless the node fetches a
        # snapshot); the ETA is (snapshot_bytes - bytes_done) / bytes_per_second.
        self.state_sync_chunks = Gauge(
            "bor_state_sync_chunks_done",
            "Snapshot chunks held, verified and written (those resumed with included)",
            registry=r,
        )
        self.state_sync_chunks_total = Gauge(
            "bor_state_sync_snapshot_chunks", "Chunks of the snapshot being fetched", registry=r
        )
        self.state_sync_bytes = Gauge(
            "bor_state_sync_bytes_done", "Bytes of the snapshot held", registry=r
        )
        self.state_sync_bytes_total = Gauge(
            "bor_state_sync_snapshot_bytes", "Size of the snapshot being fetched", registry=r
        )
        self.state_sync_rate = Gauge(
            "bor_state_sync_bytes_per_second",
            "Snapshot bytes fetched per second, on average since this run began",
            registry=r,
        )
        self.state_sync_headers_tip = Gauge(
            "bor_state_sync_headers_tip",
            "The last header followed to find a block to trust (0 with a trusted block given)",
            registry=r,
        )
        self.state_sync_headers_lib = Gauge(
            "bor_state_sync_headers_lib",
            "The LIB of the header chain followed: snapshots up to it can be trusted",
            registry=r,
        )
        self.state_sync_banned = Counter(
            "bor_state_sync_peers_banned",
            "Peers banned for what they served: a chunk or a manifest not matching its hash,"
            " or a snapshot (every peer offering it) not of the trusted block",
            ["reason"],
            registry=r,
        )
        for reason in ("chunk", "manifest", "snapshot"):
            self.state_sync_banned.labels(reason=reason)
        # The fetcher counts bans itself; the counter goes up by what it counted since the
        # last scrape.
        self._banned_seen: dict[str, int] = {}
        # Each route's (and status's) labelled child, looked up once: labels() costs a few
        # microseconds a call, on the event loop, twice a request. Routes are the declared
        # ones and statuses a handful, so these stay small.
        self._rpc_counted: dict[tuple[str, int], Any] = {}
        self._rpc_timed: dict[str, Any] = {}

    def observe_rpc(self, route: str, status: int, seconds: float) -> None:
        """Count one answered call of ``route`` and its time."""
        counted = self._rpc_counted.get((route, status))
        if counted is None:
            counted = self.rpc_requests.labels(route, str(status))
            self._rpc_counted[route, status] = counted
        timed = self._rpc_timed.get(route)
        if timed is None:
            timed = self._rpc_timed[route] = self.rpc_seconds.labels(route)
        counted.inc()
        timed.observe(seconds)

    def build_info(self, chain_id: str) -> None:
        """Set ``bor_build_info{version, chain_id, python}`` once the chain is open."""
        self._build_info.info(
            {"version": version(), "chain_id": chain_id, "python": platform.python_version()}
        )

    def observe_network(self, status: NetworkStatus | None) -> None:
        """Take what the network publishes (``Network.observed``)."""
        if status is None:
            return
        self.peers.set(status.peer_count)
        self.sync_target.set(status.sync.target)
        self.sync_rate.set(status.sync.blocks_per_s)
        for stage in Stage:
            self.sync_stage.labels(stage=str(stage)).set(1 if stage == status.sync.stage else 0)
        self.rdma_available.set(1 if status.rdma_available else 0)
        if status.state_sync is not None:
            self.observe_state_sync(status.state_sync)
        for gauge in (self.peer_sent, self.peer_received, self.rdma_writes, self.rdma_completions):
            gauge.clear()  # peers come and go
        for traffic in status.traffic:
            peer, stats = traffic.peer, traffic.stats
            self.peer_sent.labels(peer, stats.transport).set(stats.bytes_sent)
            self.peer_received.labels(peer, stats.transport).set(stats.bytes_received)
            if stats.transport != "tcp":  # and the TCP connection it was set up over
                self.peer_sent.labels(peer, "tcp").set(stats.tcp_bytes_sent)
                self.peer_received.labels(peer, "tcp").set(stats.tcp_bytes_received)
                self.rdma_writes.labels(peer).set(stats.rdma_writes)
                self.rdma_completions.labels(peer).set(stats.rdma_completions)

    def observe_state_sync(self, status: StateSyncStatus) -> None:
        """Take the fetcher's progress (``p2p.statesync.fetch.Fetcher.status``)."""
        self.state_sync_chunks.set(status.chunks)
        self.state_sync_chunks_total.set(status.chunks_total)
        self.state_sync_bytes.set(status.bytes)
        self.state_sync_bytes_total.set(status.bytes_total)
        self.state_sync_rate.set(status.bytes_per_s)
        tip, lib = status.headers or (0, 0)
        self.state_sync_headers_tip.set(tip)
        self.state_sync_headers_lib.set(lib)
        for reason, count in status.peers_banned.items():
            seen = self._banned_seen.get(reason, 0)
            if count > seen:
                self.state_sync_banned.labels(reason=reason).inc(count - seen)
                self._banned_seen[reason] = count

    def observe_chain(self, view: ChainView) -> None:
        self.head.set(view.head.num)
        self.lib.set(view.lib_num)
        self.head_time.set(slot_start_s(view.head.slot))
        self.mempool.set(view.mempool_size)
        self.mempool_bytes.set(view.mempool_bytes)
        self.fork_db.set(view.fork_db_size)

    def render(self) -> bytes:
        return generate_latest(self.registry)
