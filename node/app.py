"""Wiring: build the chain, the network, RPC and producer from a NodeConfig and run them.

This is the node's composition root: nothing below ``node`` reads the config or builds the
parts it works with. Each long-lived part runs as a task of one task group, so a part that
crashes stops the whole node cleanly (its error is logged and the process exits non-zero).
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import os
import shutil
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from chain.block import SignedBlock
from chain.controller import Chain
from chain.crypto import PrivateKey, public_key_to_text, recover_many
from chain.finality import FINALITY_VOTES, finalizer_policy
from chain.header_chain import HeaderChain
from chain.mempool import Mempool
from chain.params import slot_start_ms
from chain.qc import Vote
from chain.sigpool import ParallelRecoverer
from chain.store import BlockStore
from chain.types import BlockId
from chain.view import ChainView
from chain.votes import VoteOutcome
from genesis.model import load_genesis
from node import fds
from node.admission import Admitter
from node.config import NodeConfig
from node.errors import NodeError
from node.finalizer import FinalizerService
from node.header_checkpoint import HEADER_CHECKPOINT, HeaderCheckpointFile
from node.http import HttpLimits, make_admin_app, make_app, serve
from node.liveness import FinalityProgress
from node.metrics import NodeMetrics
from node.network import NetConfig, Network
from node.producer import ProducerLoop
from node.rpc import Api
from node.runner import ChainRunner, InclusionWatch
from node.snapshots import (
    FileDownload,
    SnapshotDir,
    import_snapshot,
    prune_snapshots,
    read_snapshot_head,
    snapshot_name,
)
from p2p.errors import P2PError
from p2p.handshake import AuthPolicy
from p2p.rdma.device import RdmaDevice, RdmaInfo, detect
from p2p.snapshot_fetch import Fetcher
from p2p.statesync import StateSync
from p2p.sync import SyncConfig
from p2p.transport import MAX_WAITING

log = structlog.get_logger("node")

# Young-generation collections every 50,000 allocations rather than CPython's 700: under a
# push load, pending transactions otherwise survive into the old generation within a second
# and force a full collection every ~2 s, a 50-200 ms pause of every thread (bench_rpc.py:
# read p99 265 -> 103 ms, pushes beside readers 0.76 -> 0.82 of their rate alone). Every
# ``bor-node`` command starts with them (``cli.tune_gc``); an import of 600k transfers and
# bench_apply.py ran no middle or full collection with the third threshold at 10 or at 20.
GC_THRESHOLDS = (50_000, 20, 10)
# While catching up, young-generation collections every 500,000 allocations. A sync batch
# (up to 50 blocks) stays alive until the chain thread is done with all of it, about 5 tracked
# objects per transaction: 250,000 for blocks of 1,000 transfers. Below that, every batch
# paid a collection scanning the whole batch (a full sync of 600k transfers: 59 young and 2
# middle collections, 0.8 s of the GIL; an import of the same history, which frees each block
# as it goes: none). At 500,000 there were 2. Not kept once in sync: on a producer a young
# collection that large stops every thread for ~270 ms (bench_rpc.py).
GC_THRESHOLDS_CATCHING_UP = (500_000, 20, 10)


def open_chain(config: NodeConfig, recoverer: ParallelRecoverer | None = None) -> Chain:
    genesis = load_genesis(config.genesis_json)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    store = BlockStore(str(config.data_dir / "blocks"))
    try:
        if config.snapshot is not None:
            start_from_snapshot(store, config.snapshot, genesis.chain_id)
        return Chain(
            store,
            genesis.to_initial_state(),
            mempool=Mempool(config.max_mempool_txs, config.max_mempool_per_account),
            recoverer=recoverer or recover_many,
        )
    except BaseException:
        store.close()
        raise


def start_from_snapshot(store: BlockStore, path: Path, chain_id: bytes) -> None:
    """Import the snapshot at ``path`` into an empty ``store``; a store that already holds
    the chain this snapshot started goes on from where it is (so ``--snapshot`` may stay in
    a service's command line); any other chain in the store is refused."""
    if store.chain_id() is None:
        log.info("importing snapshot", file=str(path))
        verified = import_snapshot(store, path, chain_id)
        log.info(
            "snapshot imported",
            block=verified.head.num,
            block_id=verified.head.block.id.hex(),
            entries=verified.entries,
        )
        return
    head = read_snapshot_head(path)
    if store.chain_id() == head.chain_id and store.first_block() == head.num:
        log.info("the data dir already started from this snapshot", block=head.num)
        return
    raise NodeError(
        "--snapshot starts an empty data dir; this one holds a chain already (move its"
        " blocks directory away to start over from the snapshot)"
    )


STATE_SYNC_DIR = "state-sync"


def restart_from_snapshot(config: NodeConfig, fetched: Path, trusted: BlockId) -> None:
    """After state sync: replace the data dir's chain (genesis only) by the fetched snapshot,
    and keep the file among the snapshots this node serves. The snapshot must be of the
    trusted block (state sync checked it; this is the last word before the chain is
    replaced): one that is not is deleted, so that the next start fetches it again."""
    genesis = load_genesis(config.genesis_json)
    named = read_snapshot_head(fetched)
    if named.block.id != trusted:
        shutil.rmtree(config.data_dir / STATE_SYNC_DIR, ignore_errors=True)
        raise NodeError(
            f"state sync fetched the snapshot of block {named.num} "
            f"({named.block.id.hex()[:16]}…), not of the trusted block {trusted.hex()[:16]}…;"
            " it is deleted and the next start fetches again"
        )
    blocks = config.data_dir / "blocks"
    shutil.rmtree(blocks)
    store = BlockStore(str(blocks))
    try:
        verified = import_snapshot(store, fetched, genesis.chain_id)
    finally:
        store.close()
    head = verified.head
    keep = config.data_dir / "snapshots" / snapshot_name(head.num, head.block.id)
    keep.parent.mkdir(parents=True, exist_ok=True)
    fetched.replace(keep)
    shutil.rmtree(config.data_dir / STATE_SYNC_DIR, ignore_errors=True)
    HeaderCheckpointFile(config.data_dir / HEADER_CHECKPOINT).remove()
    log.info("state_sync_imported", block=head.num, block_id=head.block.id.hex())


def node_key(config: NodeConfig) -> PrivateKey:
    """The key this node signs handshakes with: ``peer-private-key``, else a producer key,
    else one generated once and kept in the data dir (mode 0600)."""
    if config.peer_private_key is not None:
        return config.peer_private_key
    if config.signing_keys:
        return next(iter(config.signing_keys.values()))
    path = config.data_dir / "node_key"
    if path.exists():
        return PrivateKey.from_text(path.read_text().strip())
    key = PrivateKey.generate()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.to_text() + "\n")
    return key


def net_config(config: NodeConfig) -> NetConfig:
    try:
        policy = AuthPolicy.parse(config.allowed_connection, config.peer_keys)
    except ValueError as err:
        raise NodeError(f"allowed-connection: {err}") from err
    return NetConfig(
        listen=config.p2p_listen,
        peers=list(config.p2p_peers),
        p2p_address=config.p2p_server_address,
        max_clients=config.max_clients,
        max_unauthenticated=config.p2p_max_unauthenticated,
        max_per_address=config.p2p_max_per_address,
        handshake_timeout=config.p2p_handshake_timeout_ms / 1000,
        policy=policy,
        sync=SyncConfig(span=config.sync_fetch_span, max_ranges=config.sync_ranges),
        light_validation=config.validation_mode == "light",
        tls=config.p2p_tls,
    )


def open_rdma(config: NodeConfig) -> tuple[RdmaDevice | None, dict[str, object]]:
    """Detect RDMA and set up the node's verbs resources, per ``rdma = auto|off|required``.
    Says once, in the log and in get_info, what it found."""
    if config.rdma == "off":
        return None, {"available": False, "reason": "rdma = off"}
    host = config.p2p_listen[0] if config.p2p_listen else ""
    try:
        address = ipaddress.ip_address(host)
        usable = address.version == 4 and not (address.is_loopback or address.is_unspecified)
        ip = str(address) if usable else None
    except ValueError:
        ip = None
    info = detect(ip, config.rdma_device)
    device = None
    if info.available:
        try:
            device = RdmaDevice(
                info,
                channels=config.rdma_max_peers,
                slots=config.rdma_ring_slots,
                slot_size=config.rdma_slot_size,
            )
        except P2PError as err:
            info = RdmaInfo(False, str(err), info.device, pyverbs=info.pyverbs)
    if device is None:
        if config.rdma == "required":
            raise NodeError(f"rdma = required, but RDMA is unavailable: {info.reason}")
        log.info("rdma_unavailable", reason=info.reason, using="tcp")
    else:
        log.info("rdma_ready", device=info.device, gid=info.gid, pyverbs=info.pyverbs)
    return device, info.as_dict()


def http_limits(config: NodeConfig, nofile: int) -> tuple[HttpLimits, HttpLimits]:
    """The public and the admin listener's limits; their connection caps, unless configured,
    from the fd limit ``nofile`` (``node.fds``)."""
    dialled = len(config.p2p_peers)
    peers = fds.peer_fds(config.max_clients, config.p2p_max_unauthenticated, dialled, MAX_WAITING)
    public_cap, admin_cap = fds.http_connection_caps(nofile, peers)
    total = config.http_max_connections or public_cap
    public = HttpLimits(
        max_body_bytes=config.max_http_body_bytes,
        max_in_flight=config.http_max_in_flight,
        max_response_s=config.http_max_response_ms / 1000,
        read_timeout_s=config.http_read_timeout_ms / 1000,
        max_connections=total,
        max_connections_per_address=config.http_max_connections_per_address or max(1, total // 4),
        write_timeout_s=config.http_write_timeout_ms / 1000,
        max_response_bytes_in_flight=config.http_max_response_bytes_in_flight,
    )
    # The admin listener's few clients share one address (loopback): one cap for both.
    admin = replace(public, max_connections=admin_cap, max_connections_per_address=admin_cap)
    return public, admin


def dump_tasks() -> None:
    """SIGUSR1: print every asyncio task and where it waits (for a node that seems stuck)."""
    for task in asyncio.all_tasks():
        print(f"--- task {task.get_name()}", file=sys.stderr)
        task.print_stack(limit=8, file=sys.stderr)
    sys.stderr.flush()


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.metrics = NodeMetrics()
        self.watch = InclusionWatch()
        self._stop = asyncio.Event()
        self.network: Network | None = None
        self.api: Api | None = None
        self.runner: ChainRunner | None = None
        self.progress: FinalityProgress | None = None
        # Set when state sync fetched and verified a snapshot: the node stops, and
        # ``bor-node run`` starts it again from that snapshot (``restart_from_snapshot``).
        self.fetched_snapshot: Path | None = None
        self.fetcher: Fetcher | None = None
        self._snapshot_due = -1  # LIB // snapshot-interval-blocks when last written
        self._tasks: set[asyncio.Task[Any]] = set()

    def stop(self) -> None:
        self._stop.set()

    def _lib_for_snapshots(self, view: ChainView) -> None:
        """Write a snapshot when the LIB passes a multiple of snapshot-interval-blocks."""
        every = self.config.snapshot_interval_blocks
        if not every or self.api is None or self.network is None or self.network.fetching:
            return
        due = view.lib_num // every
        if due <= self._snapshot_due:
            return
        if self._snapshot_due >= 0:  # not at start: a restart does not write one at once
            task = asyncio.get_running_loop().create_task(self._periodic_snapshot())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._snapshot_due = due

    async def _periodic_snapshot(self) -> None:
        assert self.api is not None
        try:
            await self.api.create_snapshot({})
        except Exception as err:  # one already being written, or a full disk: try next time
            log.warning("periodic_snapshot_failed", why=str(err))
            return
        prune_snapshots(self.config.data_dir / "snapshots", self.config.snapshot_keep)

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
        return [] if self.network is None else list(self.network.added)

    def _on_applied(self, blocks: list[SignedBlock], in_sync: bool) -> None:
        """Blocks from peers joined our chain (``in_sync``: while following the network)."""
        gc.set_threshold(*(GC_THRESHOLDS if in_sync else GC_THRESHOLDS_CATCHING_UP))
        if self.api is not None:
            self.api.committed(blocks)
        now_ms = time.time() * 1000
        for block in blocks:
            self.watch.included((t.id for t in block.transactions), block.num)
            if in_sync:
                # One line per block from a peer, as nodeos does; during catch-up the sync
                # status tells the story instead. Latency: from the block's slot start.
                latency = now_ms - slot_start_ms(block.header.slot)
                self.metrics.block_latency.observe(latency / 1000)
                log.info(
                    "block_applied",
                    num=block.num,
                    id=block.id.hex()[:16],
                    producer=block.header.producer,
                    txs=len(block.transactions),
                    latency_ms=round(latency, 1),
                )
        self.metrics.block_txs.inc(sum(len(b.transactions) for b in blocks))

    def _on_produced(self, block: SignedBlock) -> None:
        gc.set_threshold(*GC_THRESHOLDS)  # a lone producer that caught up hears no peer blocks
        if self.api is not None:
            self.api.committed([block])
        self.watch.included((t.id for t in block.transactions), block.num)
        if self.network is not None:
            self.network.block_produced(block)

    def _on_vote(self, vote: Vote, outcome: VoteOutcome, from_peer: bool) -> None:
        """A vote was counted (or refused) by the chain."""
        if self.progress is not None:
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
        if outcome.result.relay and self.runner is not None:
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
        if self.network is not None:
            self.network.vote_cast(vote)

    def _votes_missing(self) -> bool:
        paused = self.progress is not None and self.progress.paused
        self.metrics.production_paused.set(1 if paused else 0)
        return paused

    def _may_produce(self) -> bool:
        """Produce unless catching up with blocks that peers actually deliver."""
        return self.network is None or not self.network.holds_production

    async def run(self) -> None:
        config = self.config
        gc.set_threshold(*GC_THRESHOLDS)
        recoverer = (
            ParallelRecoverer(config.signature_workers) if config.signature_workers else None
        )
        chain = open_chain(config, recoverer)
        self.runner = runner = ChainRunner(chain)
        votes_chain = chain.params.finality == FINALITY_VOTES
        self.progress = progress = FinalityProgress(
            config.production_pause_vote_timeout_ms,
            votes_chain,
            on_final=self._on_final,
        )
        runner.subscribe(progress.view_changed)
        rdma, rdma_status = open_rdma(config)
        fetcher = None
        if config.state_sync and chain.head.num == 0:
            download = FileDownload(config.data_dir / STATE_SYNC_DIR)
            # Without the operator's block (nor one trusted by an earlier run, whose
            # download is kept), the header chain followed from genesis vouches for one;
            # an earlier run's is followed on from its LIB.
            kept = HeaderCheckpointFile(config.data_dir / HEADER_CHECKPOINT)
            headers = kept.load(chain.params, chain.chain_id) or HeaderChain(
                chain.head, chain.params, chain.chain_id
            )
            self.fetcher = fetcher = Fetcher(
                config.state_sync_trusted,
                download,
                self._snapshot_fetched,
                headers=headers,
                checkpoints=kept,
                timeout=config.state_sync_request_timeout_ms / 1000,
            )
            trusted = fetcher.trusted
            log.info(
                "state_sync_started",
                block_id=None if trusted is None else trusted.hex(),
                following_headers=trusted is None,
            )
        snapshots = SnapshotDir(config.data_dir / "snapshots", config.snapshot_chunk_bytes)
        self.network = network = Network(
            runner,
            net_config(config),
            node_key(config),
            rdma,
            rdma_status,
            self._on_applied,
            self._on_vote,
            StateSync(snapshots, fetcher),
            progress.peer_joined,
        )
        finalizer = FinalizerService(
            config.finalizer_keys if votes_chain else {},
            config.data_dir / "finalizer",
            lambda: runner.view,
            self._vote_cast,
            may_vote=lambda: network.in_sync,
        )
        runner.subscribe(finalizer.head_changed)
        runner.subscribe(self._lib_for_snapshots)
        admitter = Admitter(runner, self.metrics, on_accepted=network.transaction_accepted)
        nofile = fds.fd_limit()
        limits, admin_limits = http_limits(config, nofile)
        log.info(
            "http_connection_caps",
            fd_limit=nofile,
            public=limits.max_connections,
            per_address=limits.max_connections_per_address,
            admin=admin_limits.max_connections,
        )
        # A commit-mode push answers "pending" before the HTTP time limit would cut it off.
        commit_cap = limits.max_response_s * 0.9 if limits.max_response_s else None
        self.api = api = Api(
            runner,
            self.metrics,
            self.watch,
            admitter,
            network,
            commit_wait_cap_s=commit_cap,
            snapshots_dir=config.data_dir / "snapshots",
            finality=lambda: {
                "local_finalizers": finalizer.status(),
                "production_paused": progress.paused,
                "finality_idle_ms": round(progress.idle_ms),
                "production_pause_vote_timeout_ms": progress.timeout_ms,
            },
        )
        app = make_app(
            api,
            self.metrics,
            limits,
            lambda: self.metrics.observe_network(network),
            cors_origin=config.cors_origin,
        )
        listeners: list[web.AppRunner] = []
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stop)
        loop.add_signal_handler(signal.SIGUSR1, dump_tasks)
        try:
            listeners.append(await serve(app, config.http_host, config.http_port, limits))
            if config.admin_http is not None:
                admin = make_admin_app(api, admin_limits, config.admin_token)
                listeners.append(await serve(admin, *config.admin_http, admin_limits, "admin RPC"))
            try:
                await network.listen()
            except OSError as err:
                raise NodeError(
                    f"cannot accept peers on {config.p2p_listen}: {err.strerror}"
                ) from err
            if rdma is not None:
                rdma.start(loop)
            log.info(
                "node_started",
                chain_id=chain.chain_id.hex(),
                head=runner.view.head.num,
                lib=runner.view.lib_num,
                rpc=f"http://{config.http_host}:{config.http_port}",
                admin_rpc=config.admin_http and "http://{}:{}".format(*config.admin_http),
                p2p=network.listen_port,
                peers=len(config.p2p_peers),
            )
            async with asyncio.TaskGroup() as tg:
                tasks = [
                    tg.create_task(admitter.run(), name="admission"),
                    tg.create_task(api.run(), name="rpc-reads"),
                    tg.create_task(network.run(), name="network"),
                    tg.create_task(finalizer.run(), name="finalizer"),
                ]
                if config.producers:
                    producer = ProducerLoop(
                        runner,
                        config.producers,
                        config.signing_keys,
                        self.metrics,
                        self._on_produced,
                        may_produce=self._may_produce,
                        votes_missing=self._votes_missing,
                        probe_every=config.production_pause_vote_timeout_ms / 1000,
                    )
                    tasks.append(tg.create_task(producer.run(), name="producer"))
                await self._stop.wait()
                for task in tasks:
                    task.cancel()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
                loop.remove_signal_handler(sig)
            for listener in listeners:
                await listener.cleanup()
            if rdma is not None:
                rdma.close()  # after the network task: its channels are closed by now
            runner.close()
            chain.store.close()
            if recoverer is not None:
                recoverer.close()
            log.info("node_stopped", head=chain.head.num, lib=chain.lib)
