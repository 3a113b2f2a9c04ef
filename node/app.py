"""Wiring: build the chain, the network, RPC and producer from a NodeConfig and run them.

This is the node's composition root: nothing below ``node`` reads the config or builds the
parts it works with. ``Node`` does it in two steps: its constructor builds and wires every
part (each part that cares about the chain subscribes to the chain thread's updates), and
``run`` starts the long-lived ones as tasks of one task group, so a part that crashes stops
the whole node cleanly (its error is logged and the process exits non-zero).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import ipaddress
import os
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from chain.core.consensus.finality import FINALITY_VOTES, finalizer_policy
from chain.core.consensus.qc import Vote
from chain.core.consensus.votes import VoteOutcome
from chain.core.execution import engine
from chain.core.header_chain import HeaderChain
from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from chain.core.primitives.types import BlockId
from chain.signatures.sigpool import ParallelRecoverer
from chain.view import ChainView
from chain.vm import ContractRuntime
from node.admission import Admitter
from node.api.http import bind_error, make_admin_app, make_app, serve
from node.api.rpc import Api
from node.api.stream.hub import StreamHub
from node.block_report import BlockReporter
from node.config.builders import http_limits, net_config, stream_limits
from node.config.model import NodeConfig
from node.data_dir import STATE_SYNC_DIR, contract_runtime, open_chain
from node.errors import NodeError
from node.explorer import mount as mount_explorer
from node.liveness import FinalityProgress
from node.metrics import NodeMetrics
from node.network import Network
from node.node_file import (
    RunningNode,
    http_url,
    remove_node_file,
    write_node_file,
)
from node.process import eventloop, fds
from node.producer import ProducerLoop
from node.runner import ChainRunner, InclusionWatch
from node.snapshots.header_checkpoint import HEADER_CHECKPOINT, HeaderCheckpointFile
from node.snapshots.schedule import SnapshotSchedule
from node.snapshots.service import (
    FileDownload,
    SnapshotDir,
)
from node.snapshots.writer import SnapshotWriter
from node.voting import FinalizerService
from p2p.errors import P2PError
from p2p.rdma.device import RdmaDevice, RdmaInfo, detect
from p2p.statesync.fetch import Fetcher
from p2p.statesync.reactor import StateSync

log = structlog.get_logger("node")

# Young-generation collections every 50,000 allocations rather than CPython's 700: under a
# push load, pending transactions otherwise survive into the old generation within a second
# and force frequent full collections, each a pause of every thread (bench_rpc.py shows it in
# the read p99). Every ``bor-node`` command starts with them (``cli.tune_gc``).
GC_THRESHOLDS = (50_000, 20, 10)
# While catching up, young-generation collections every 500,000 allocations: a sync batch (up
# to 50 blocks, about 5 tracked objects per transaction) stays alive until the chain thread
# is done with all of it (250,000 objects for blocks of 1,000 transfers); a lower threshold
# makes every batch pay a collection that scans the whole batch. Not kept once in sync: on a
# producer a young collection that large stops every thread for hundreds of milliseconds.
GC_THRESHOLDS_CATCHING_UP = (500_000, 20, 10)


def node_key(config: NodeConfig) -> PrivateKey:
    """The key this node signs handshakes with: ``peer-private-key``, else a producer key,
    else one generated once and kept in the data dir (mode 0600)."""
    if config.p2p.private_key is not None:
        return config.p2p.private_key
    if config.producer.signing_keys:
        return next(iter(config.producer.signing_keys.values()))
    path = config.data_dir / "node_key"
    if path.exists():
        return PrivateKey.from_text(path.read_text().strip())
    key = PrivateKey.generate()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.to_text() + "\n")
    return key


def open_rdma(config: NodeConfig) -> tuple[RdmaDevice | None, dict[str, object]]:
    """Detect RDMA and set up the node's verbs resources, per ``rdma = auto|off|required``.
    Says once, in the log and in get_info, what it found."""
    if config.rdma.mode == "off":
        return None, {"available": False, "reason": "rdma = off"}
    host = config.p2p.listen[0] if config.p2p.listen else ""
    try:
        address = ipaddress.ip_address(host)
        usable = address.version == 4 and not (address.is_loopback or address.is_unspecified)
        ip = str(address) if usable else None
    except ValueError:
        ip = None
    info = detect(ip, config.rdma.device)
    device = None
    if info.available:
        try:
            device = RdmaDevice(
                info,
                channels=config.rdma.max_peers,
                slots=config.rdma.ring_slots,
                slot_size=config.rdma.slot_size,
            )
        except P2PError as err:
            info = RdmaInfo(False, str(err), info.device, pyverbs=info.pyverbs)
    if device is None:
        if config.rdma.mode == "required":
            raise NodeError(f"rdma = required, but RDMA is unavailable: {info.reason}")
        log.info("rdma_unavailable", reason=info.reason, using="tcp")
    else:
        log.info("rdma_ready", device=info.device, gid=info.gid, pyverbs=info.pyverbs)
    return device, info.as_dict()


def dump_tasks() -> None:
    """SIGUSR1: print every asyncio task and where it waits (for a node that seems stuck)."""
    for task in asyncio.all_tasks():
        print(f"--- task {task.get_name()}", file=sys.stderr)
        task.print_stack(limit=8, file=sys.stderr)
    sys.stderr.flush()


class Node:
    """One node: every part built and wired from the config by the constructor (CometBFT's
    ``NewNode``), then started together by ``run`` (``OnStart``).

    The constructor opens what the node holds (the block store, the signature workers, the
    RDMA device) and makes every part; the parts learn what happens to the chain by
    subscribing to the chain thread's updates, so none of them needs another to exist
    first. ``run`` serves the listeners, starts the long-lived parts in one task group,
    stops them in reverse order and closes what the constructor opened.
    """

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self._stop = asyncio.Event()
        # Set when state sync fetched and verified a snapshot: the node stops, and
        # ``bor-node run`` starts it again from that snapshot (``restart_from_snapshot``).
        self.fetched_snapshot: Path | None = None
        with contextlib.ExitStack() as opened:
            self._build(config, opened)
            self._opened = opened.pop_all()  # closed by run, last first

    def _build(self, config: NodeConfig, opened: contextlib.ExitStack) -> None:
        """Each part, by the builder of its group, in the order they depend on each other."""
        gc.set_threshold(*GC_THRESHOLDS)
        self.metrics = NodeMetrics()
        contracts = self._build_chain(config, opened)
        self.metrics.build_info(self.runner.view.chain_id.hex())
        self._build_network(config, contracts)
        writer = SnapshotWriter(self.runner, config.data_dir / "snapshots")
        self._build_rpc(config, writer)
        self._build_producer(config)
        self.snapshots = SnapshotSchedule(
            config.snapshots.interval_blocks,
            self.runner.view.lib_num,
            writer.write,
            config.data_dir / "snapshots",
            config.snapshots.keep,
            paused=lambda: self.network.fetching,
        )
        self.blocks = BlockReporter(
            self.metrics, lambda: self.network.in_sync, GC_THRESHOLDS, GC_THRESHOLDS_CATCHING_UP
        )
        # The block cache before the inclusion watch: a client told its transaction is in
        # block N finds block N.
        for subscriber in (
            self.api.chain_updated,
            self.watch.chain_updated,
            self.progress.chain_updated,
            self.finalizer.chain_updated,
            self.snapshots.chain_updated,
            self.blocks.chain_updated,
            self.stream.chain_updated,
        ):
            self.runner.subscribe(subscriber)

    def _build_chain(self, config: NodeConfig, opened: contextlib.ExitStack) -> ContractRuntime:
        """The chain and its runner, the finality watch and the RDMA device (each closed by
        ``opened``); the contract runtime, which admission precompiles with."""
        recoverer = (
            ParallelRecoverer(config.chain.signature_workers)
            if config.chain.signature_workers
            else None
        )
        if recoverer is not None:
            opened.callback(recoverer.close)
        contracts = contract_runtime(config.data_dir)
        self.runner = runner = ChainRunner(open_chain(config, recoverer, contracts=contracts))
        opened.callback(runner.close)  # the chain is the runner's from here on
        self.votes_chain = runner.view.params.finality == FINALITY_VOTES
        self.progress = FinalityProgress(
            config.producer.pause_vote_timeout_ms, self.votes_chain, on_final=self._on_final
        )
        self.rdma, self.rdma_status = open_rdma(config)
        if self.rdma is not None:
            opened.callback(self.rdma.close)  # after the network task: its channels are closed
        return contracts

    def _build_network(self, config: NodeConfig, contracts: ContractRuntime) -> None:
        """Admission, the peer layer (it subscribes its reactors: block sync, block relay,
        tx and vote relay) with state sync, and the finalizer that votes once in sync."""
        runner, start = self.runner, self.runner.view
        self.fetcher = self._state_sync_fetcher(config, start)
        snapshots = SnapshotDir(config.data_dir / "snapshots", config.snapshots.chunk_bytes)
        self.admitter = Admitter(
            runner,
            self.metrics,
            precompile=functools.partial(contracts.precompile, params=start.params),
        )
        self.network = network = Network(
            runner,
            self.admitter,
            net_config(config.p2p),
            node_key(config),
            self.rdma,
            self.rdma_status,
            self._on_vote,
            StateSync(snapshots, self.fetcher),
            self.progress.peer_joined,
        )
        self.finalizer = FinalizerService(
            config.producer.finalizer_keys if self.votes_chain else {},
            config.data_dir / "finalizer",
            lambda: runner.view,
            self._vote_cast,
            may_vote=lambda: network.in_sync,
        )

    def _build_rpc(self, config: NodeConfig, writer: SnapshotWriter) -> None:
        """The RPC, its listeners' limits, the stream and the HTTP apps."""
        nofile = fds.fd_limit()
        self.limits, self.admin_limits = limits, admin_limits = http_limits(config, nofile)
        log.info(
            "http_connection_caps",
            fd_limit=nofile,
            public=limits.max_connections,
            per_address=limits.max_connections_per_address,
            admin=admin_limits.max_connections,
        )
        # A commit-mode push answers "pending" before the HTTP time limit would cut it off.
        commit_cap = limits.max_response_s * 0.9 if limits.max_response_s else None
        self.watch = InclusionWatch()
        finalizer, progress, network = self.finalizer, self.progress, self.network
        self.api = api = Api(
            self.runner,
            self.metrics,
            self.watch,
            self.admitter,
            network,
            commit_wait_cap_s=commit_cap,
            call_fuel=config.http.call_fuel,
            snapshot_writer=writer,
            exports=(config.data_dir / "exports" / "history.log", config.genesis_json),
            finality=lambda: {
                "local_finalizers": finalizer.status(),
                "production_paused": progress.paused,
                "finality_idle_ms": round(progress.idle_ms),
                "production_pause_vote_timeout_ms": progress.timeout_ms,
            },
        )
        self.stream = StreamHub(
            self.runner, stream_limits(config.stream), self.metrics, config.http.cors_origin
        )
        self.app = make_app(
            api,
            self.metrics,
            limits,
            lambda: self.metrics.observe_network(network.observed()),
            cors_origin=config.http.cors_origin,
            stream=self.stream,
        )
        if config.http.explorer:
            mount_explorer(self.app)
        self.admin_app = (
            None
            if config.http.admin_address is None
            else make_admin_app(api, admin_limits, config.http.admin_token)
        )

    def _build_producer(self, config: NodeConfig) -> None:
        """The producer loop, when the node produces for someone."""
        network = self.network
        self.producer = (
            ProducerLoop(
                self.runner,
                config.producer.names,
                config.producer.signing_keys,
                self.metrics,
                may_produce=lambda: not network.holds_production,
                votes_missing=self._votes_missing,
                probe_every=config.producer.pause_vote_timeout_ms / 1000,
            )
            if config.producer.names
            else None
        )

    def _state_sync_fetcher(self, config: NodeConfig, start: ChainView) -> Fetcher | None:
        """The snapshot fetcher, when state sync is on and the chain holds genesis only."""
        if not config.state_sync.enabled or start.head.num != 0:
            return None
        download = FileDownload(config.data_dir / STATE_SYNC_DIR)
        # Without the operator's block (nor one trusted by an earlier run, whose download
        # is kept), the header chain followed from genesis vouches for one; an earlier
        # run's is followed on from its LIB.
        kept = HeaderCheckpointFile(config.data_dir / HEADER_CHECKPOINT)
        headers = kept.load(start.params, start.chain_id) or HeaderChain(
            start.head, start.params, start.chain_id
        )
        fetcher = Fetcher(
            config.state_sync.trusted,
            download,
            self._snapshot_fetched,
            headers=headers,
            checkpoints=kept,
            timeout=config.state_sync.request_timeout_ms / 1000,
        )
        trusted = fetcher.trusted
        log.info(
            "state_sync_started",
            block_id=None if trusted is None else trusted.hex(),
            following_headers=trusted is None,
        )
        return fetcher

    def stop(self) -> None:
        self._stop.set()

    def _snapshot_fetched(self, path: Path) -> None:
        self.fetched_snapshot = path
        self._stop.set()

    @property
    def fetched_block(self) -> BlockId:
        """The trusted block whose snapshot state sync fetched."""
        assert self.fetcher is not None and self.fetcher.trusted is not None
        return self.fetcher.trusted

    @property
    def peers_added(self) -> list[tuple[str, int]]:
        """The peer addresses the operator added at run time (/v1/net/connect) and kept."""
        return list(self.network.added)

    def _on_vote(self, vote: Vote, outcome: VoteOutcome, from_peer: bool) -> None:
        """A vote was counted (or refused) by the chain."""
        self.progress.vote_counted(outcome)
        if from_peer:
            self.metrics.votes_received.labels(result=outcome.result.value).inc()
        if outcome.evidence is not None:
            self.metrics.double_votes.inc()
            log.warning(
                "double_vote",
                finalizer=public_key_to_text(vote.key),
                slot=outcome.evidence.slot,
                first=outcome.evidence.first.block_id.hex()[:16],
                second=outcome.evidence.second.block_id.hex()[:16],
            )
        if outcome.result.relay:
            view = self.runner.view
            for f in finalizer_policy(view.params, view.head.active).finalizers:
                if f.key == vote.key:
                    self.metrics.finalizer_last_vote.labels(finalizer=f.name).set(vote.block_num)
                    self.metrics.finalizer_votes.labels(finalizer=f.name).inc()

    def _on_final(self, lib: int, age_ms: float) -> None:
        """The LIB rose to ``lib``, a block whose slot began ``age_ms`` ago."""
        self.metrics.finality_latency.observe(age_ms / 1000)
        log.info("lib_advanced", lib=lib, age_ms=round(age_ms, 1))

    def _vote_cast(self, vote: Vote) -> None:
        self.metrics.votes_cast.inc()
        self.network.vote_cast(vote)

    def _votes_missing(self) -> bool:
        paused = self.progress.paused
        self.metrics.production_paused.set(1 if paused else 0)
        return paused

    def _services(self) -> list[tuple[str, Coroutine[Any, Any, None]]]:
        """The long-lived parts, in the order they start (they stop in the reverse one)."""
        services = [
            ("admission", self.admitter.run()),
            ("rpc-reads", self.api.run()),
            ("network", self.network.run()),
            ("finalizer", self.finalizer.run()),
        ]
        if self.producer is not None:
            services.append(("producer", self.producer.run()))
        services.append(("snapshots", self.snapshots.run()))
        return services

    def _running(self, listeners: list[web.AppRunner]) -> RunningNode:
        """What node.json says: the addresses the listeners bound (a port 0 is resolved)."""
        rpc, *admin = [listener.addresses[0][:2] for listener in listeners]
        return RunningNode(
            pid=os.getpid(),
            chain_id=self.runner.view.chain_id.hex(),
            rpc=http_url(*rpc),
            admin=http_url(*admin[0]) if admin else None,
            p2p_port=self.network.listen_port,
        )

    async def run(self) -> None:
        """Serve the listeners and run every part until ``stop`` (or a signal, or a part's
        crash: then its error ends the task group and this call); then stop the parts in
        reverse order and close what the constructor opened."""
        config = self.config
        listeners: list[web.AppRunner] = []
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stop)
        loop.add_signal_handler(signal.SIGUSR1, dump_tasks)
        try:
            listeners.append(await serve(self.app, config.http.host, config.http.port, self.limits))
            if self.admin_app is not None and config.http.admin_address is not None:
                admin, limits = self.admin_app, self.admin_limits
                listeners.append(
                    await serve(
                        admin,
                        *config.http.admin_address,
                        limits,
                        "admin RPC",
                        "--admin-http-server-address",
                    )
                )
            try:
                await self.network.listen()
            except OSError as err:
                where = "{}:{}".format(*config.p2p.listen) if config.p2p.listen else "-"
                raise bind_error("accept peers", where, "--p2p-listen-endpoint", err) from err
            if self.rdma is not None:
                self.rdma.start(loop)
            write_node_file(config.data_dir, self._running(listeners))
            view = self.runner.view
            log.info(
                "node_started",
                chain_id=view.chain_id.hex(),
                head=view.head.num,
                lib=view.lib_num,
                rpc=f"http://{config.http.host}:{config.http.port}",
                admin_rpc=config.http.admin_address
                and "http://{}:{}".format(*config.http.admin_address),
                p2p=self.network.listen_port,
                executor=engine.name(),  # the compiled core or the Python reference alone
                event_loop=eventloop.running_loop_name(),
                peers=len(config.p2p.peers),
            )
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(coro, name=name) for name, coro in self._services()]
                await self._stop.wait()
                for task in reversed(tasks):
                    task.cancel()
                    await asyncio.wait([task])
        finally:
            remove_node_file(config.data_dir, os.getpid())
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
                loop.remove_signal_handler(sig)
            for listener in reversed(listeners):
                await listener.cleanup()
            self._opened.close()
            view = self.runner.view
            log.info("node_stopped", head=view.head.num, lib=view.lib_num)
