"""The node's peer layer: the chain as the network sees it, and the wiring of the network.

``NodeChainService`` is ``p2p.service.ChainService`` over the chain thread: positions come
from the view the chain publishes, peers' transactions join the node's one admission queue
(``node.admission``), everything else is a call on the chain thread.
``Network`` builds the transport, the switch and the reactors for one node and answers the
RPC's questions about them (``node.api.rpc.NetworkApi``); it is the only place they meet.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Collection, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from chain.controller import Chain, Pushed
from chain.core.consensus.block import SignedBlock
from chain.core.consensus.qc import Vote
from chain.core.consensus.votes import VoteOutcome
from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.errors import (
    DoubleSign,
    InvalidBlock,
    StaleBlock,
    TransactionError,
    UnlinkableBlock,
)
from chain.core.primitives.types import BlockId
from chain.signatures.signers import PREFETCH_BLOCKS
from chain.vm.errors import RuntimeFault
from node.runner import ChainRunner
from p2p.blocksync.headers import HeaderSync
from p2p.blocksync.manager import SyncConfig, SyncStatus
from p2p.blocksync.reactor import BlockSync
from p2p.rdma.device import RdmaDevice
from p2p.rdma.upgrade import RdmaUpgrade
from p2p.relay.blocks import BlockRelay
from p2p.relay.transactions import TxRelay
from p2p.relay.votes import OnCounted, VoteRelay
from p2p.service import BlockResult, Outcome
from p2p.statesync.fetch import StateSyncStatus
from p2p.statesync.reactor import StateSync
from p2p.transport.channel import ChannelStats
from p2p.transport.connections import Transport, TransportConfig
from p2p.transport.reactor import Reactor
from p2p.transport.switch import Switch, SwitchConfig
from p2p.wire.handshake import ChainPosition

log = structlog.get_logger("chain")


class Admission(Protocol):
    """What the network asks of the node's admission queue (``node.admission.Admitter``),
    named here: the admitter counts into the metrics, which read the network."""

    def subscribe(self, callback: Callable[[SignedTransaction], None]) -> None:
        """Call ``callback(tx)`` for each transaction of our own RPC that was admitted."""
        ...

    async def admit_relayed(
        self, txs: Sequence[SignedTransaction]
    ) -> list[TransactionError | None]:
        """Admit a peer's transactions: for each, None or the error that refused it."""
        ...

    async def compile_code(self, txs: Sequence[SignedTransaction]) -> None:
        """Compile the modules ``txs`` deploy, off the chain thread."""
        ...


class NodeChainService:
    def __init__(self, runner: ChainRunner, admitter: Admission) -> None:
        self.runner = runner
        self.admitter = admitter
        self.chain_id = runner.view.chain_id

    def position(self) -> ChainPosition:
        view = self.runner.view
        return ChainPosition(
            view.lib_num, view.lib_id, view.head.num, view.head.id, view.first_block
        )

    def producer_keys(self) -> Collection[bytes]:
        return self.runner.view.producer_keys

    async def id_at(self, num: int) -> BlockId | None:
        return await self.runner.call(_id_at, num)

    async def encoded_blocks(self, start: int, end: int) -> list[bytes]:
        return await self.runner.call(_encoded, start, end)

    async def push_blocks(
        self,
        blocks: Sequence[SignedBlock],
        light_upto: int,
        ahead: Sequence[SignedBlock] = (),
        taken: Callable[[int], None] | None = None,
    ) -> list[BlockResult]:
        await self.admitter.compile_code([stx for block in blocks for stx in block.transactions])
        now = int(time.time() * 1000)
        on_chain_thread = None
        if taken is not None:
            loop = asyncio.get_running_loop()

            def on_chain_thread(num: int) -> None:
                loop.call_soon_threadsafe(taken, num)

        return await self.runner.call_urgent(_push, blocks, light_upto, now, ahead, on_chain_thread)

    async def admit_transactions(
        self, txs: Sequence[SignedTransaction]
    ) -> list[TransactionError | None]:
        """Through the admission queue the RPC's transactions take: one bound, one set of
        counters, and the read pacer sees peers' load too."""
        return await self.admitter.admit_relayed(txs)

    async def add_votes(self, votes: Sequence[Vote]) -> list[VoteOutcome]:
        # Urgent: a vote late by one slot misses the next block's QC.
        now = int(time.time() * 1000)
        return await self.runner.call_urgent(_add_votes, votes, now)


def _add_votes(chain: Chain, votes: Sequence[Vote], now: int) -> list[VoteOutcome]:
    return [chain.add_vote(vote, now) for vote in votes]


def _id_at(chain: Chain, num: int) -> BlockId | None:
    return chain.store.block_id_at(num)


def _encoded(chain: Chain, start: int, end: int) -> list[bytes]:
    store = chain.store
    out = []
    for num in range(start, end + 1):
        block_id = store.block_id_at(num)
        raw = None if block_id is None else store.block_bytes(block_id)
        if raw is None:
            break
        out.append(raw)
    return out


# The chain's verdict on a block as the peer layer names it.
_OUTCOMES = {
    Pushed.APPLIED: Outcome.APPLIED,
    Pushed.ADDED: Outcome.ADDED,
    Pushed.DUPLICATE: Outcome.DUPLICATE,
}


def _push(
    chain: Chain,
    blocks: Sequence[SignedBlock],
    light_upto: int,
    now: int,
    ahead: Sequence[SignedBlock] = (),
    taken: Callable[[int], None] | None = None,
) -> list[BlockResult]:
    """On the chain thread: push each block, recovering the next blocks' signatures ahead,
    into ``ahead`` (the next call's blocks: the workers need not wait for it), and telling
    ``taken`` of each block done with. Only a verdict per block comes back, for block sync to
    judge its peers; what the blocks changed (applied, popped, requeued) the chain thread
    publishes as the chain's events after this job, as after any other."""
    chain.set_light_validation(light_upto)
    results: list[BlockResult] = []

    def prefetch(block: SignedBlock) -> None:
        if block.num > light_upto:
            chain.prefetch_keys(block.transactions)

    queue = [*blocks, *ahead[:PREFETCH_BLOCKS]]
    for block in queue[:PREFETCH_BLOCKS]:
        prefetch(block)  # a no-op for blocks the previous call's ahead started
    # A batch of catch-up is synced to disk once, not per block (about 16 ms a sync on a
    # test VM would cap catch-up near 60 blocks/s); a power cut loses at most that batch,
    # which the peers still hold. One block at a time, as when following the chain, is
    # synced on its own.
    with chain.store.defer_sync() if len(blocks) > 1 else nullcontext():
        for i, block in enumerate(blocks):
            if i + PREFETCH_BLOCKS < len(queue):
                prefetch(queue[i + PREFETCH_BLOCKS])
            results.append(_push_one(chain, block, now))
            if taken is not None:
                taken(block.num)
    return results


def _push_one(chain: Chain, block: SignedBlock, now: int) -> BlockResult:
    try:
        pushed = chain.push_block(block, now)
    except UnlinkableBlock as err:
        return BlockResult(block, Outcome.UNLINKABLE, err.reason)
    except StaleBlock as err:
        return BlockResult(block, Outcome.STALE, err.reason)
    except (InvalidBlock, DoubleSign) as err:
        return BlockResult(block, Outcome.INVALID, f"{err.name}: {err.reason}")
    except RuntimeFault as err:
        # This node could not run a contract: no verdict on the block, no strike for the
        # peer. The block stays in the fork database; the next block that links to it has
        # the chain try to apply it again.
        log.error("contract_runtime_fault", num=block.num, id=block.id.hex()[:16], why=str(err))
        return BlockResult(block, Outcome.ADDED, f"not applied: {err}")
    return BlockResult(block, _OUTCOMES[pushed])


@dataclass(frozen=True, kw_only=True, slots=True)
class NetConfig:
    """The peer layer's parts' own configs, made from the node's by
    ``node.config.builders.net_config``, and the peers to dial."""

    transport: TransportConfig
    switch: SwitchConfig
    sync: SyncConfig
    peers: tuple[tuple[str, int], ...]
    light_validation: bool  # validation-mode = light, during LIB catch-up only


@dataclass(frozen=True, slots=True)
class PeerTraffic:
    peer: str
    stats: ChannelStats


@dataclass(frozen=True, slots=True)
class NetworkStatus:
    """What the peer layer publishes for the node's metrics (``NodeMetrics.observe_network``):
    a copy, so that the metrics never reach into the switch, the sync manager or a channel."""

    peer_count: int
    sync: SyncStatus
    state_sync: StateSyncStatus | None  # while fetching a snapshot
    rdma_available: bool
    traffic: tuple[PeerTraffic, ...]


class Network:
    """Transport, switch and reactors of one node, wired; implements ``NetworkApi``."""

    def __init__(
        self,
        runner: ChainRunner,
        admitter: Admission,
        config: NetConfig,
        node_key: PrivateKey,
        rdma: RdmaDevice | None = None,
        rdma_status: dict[str, object] | None = None,
        on_vote: OnCounted = lambda vote, outcome, from_peer: None,
        state_sync: StateSync | None = None,
        on_peer: Callable[[], None] = lambda: None,
    ) -> None:
        """``state_sync`` serves our snapshots; when it holds a fetcher, the node is fetching
        one, and only it runs (no block sync, relay or votes until the node restarts from
        the snapshot). ``on_peer``: a peer joined."""
        self.config = config
        self.node_id = os.urandom(32)
        self.rdma = rdma
        self.rdma_status = rdma_status or {"available": rdma is not None, "reason": ""}
        service = NodeChainService(runner, admitter)
        self.block_relay = BlockRelay(lambda: self.in_sync)
        self.blocks = BlockSync(service, config.sync, self.block_relay, config.light_validation)
        self.txs = TxRelay(service)
        self.votes = VoteRelay(service, on_vote, on_peer)
        self.state_sync = state_sync
        fetcher = None if state_sync is None else state_sync.fetcher
        # Every node serves signed headers; one state-syncing with no trusted block yet
        # follows them from genesis to find one.
        self.headers = (
            HeaderSync(service)
            if fetcher is None
            else HeaderSync(
                service,
                fetcher.headers,
                fetcher.following,
                on_caught_up=fetcher.caught_up,
                checkpoints=fetcher.checkpoints,
            )
        )
        reactors: list[Reactor] = [self.blocks, self.block_relay, self.txs, self.votes]
        if state_sync is not None:
            reactors = [state_sync] if self.fetching else [*reactors, state_sync]
        reactors.append(self.headers)
        self.switch = Switch(self.node_id, config.switch, reactors)
        probe_timeout = config.transport.rdma_probe_timeout
        self.transport = Transport(
            config.transport,
            self.node_id,
            node_key,
            service,
            self.switch,
            RdmaUpgrade(rdma, probe_timeout) if rdma is not None else None,
        )
        self.ready = asyncio.Event()
        # Addresses the operator had us dial at run time (``connect``) and did not take back:
        # a node restarted into the snapshot it state-synced dials them again.
        self.added: dict[tuple[str, int], None] = {}
        # Block sync first: block relay asks it whether we are in sync.
        runner.subscribe(self.blocks.chain_updated)
        runner.subscribe(self.block_relay.chain_updated)
        runner.subscribe(self.txs.chain_updated)
        runner.subscribe(lambda update: self.votes.chain_advanced(update.view.lib_num))
        admitter.subscribe(self.transaction_accepted)

    @property
    def listen_port(self) -> int | None:
        return self.transport.listen_port

    async def listen(self) -> None:
        await self.transport.listen()

    async def run(self) -> None:
        await self.transport.listen()
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.switch.run(), name="switch")
            tg.create_task(self.transport.run(list(self.config.peers)), name="transport")
            await self.switch.started.wait()
            await self.transport.started.wait()
            self.ready.set()

    # --- what the node tells the network ----------------------------------------------------

    def transaction_accepted(self, tx: SignedTransaction) -> None:
        self.txs.relay_local(tx)

    def vote_cast(self, vote: Vote) -> None:
        """A finalizer of this node voted (its safety state is on disk already)."""
        self.votes.relay_local(vote)

    @property
    def fetching(self) -> bool:
        """Fetching a snapshot (state sync) rather than following the chain."""
        return self.state_sync is not None and self.state_sync.fetcher is not None

    @property
    def in_sync(self) -> bool:
        return not self.fetching and self.blocks.in_sync

    @property
    def holds_production(self) -> bool:
        """Whether our producer should wait: catching up, and blocks from peers back it
        (peers' claims alone hold it for ``SyncConfig.pause_grace`` seconds at most)."""
        return self.fetching or self.blocks.holds_production

    # --- NetworkApi -------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        peers = self.switch.status()
        for info in peers:
            known = self.blocks.sync.peers.get(str(info["peer"]))
            if known is not None:
                info["head"], info["lib"] = known.head, known.lib
        return {
            "node_id": self.node_id.hex(),
            "peers": peers,
            "dialing": self.transport.status(),
        }

    def block_sync_status(self) -> SyncStatus:
        return self.blocks.sync.status()

    def state_sync_status(self) -> StateSyncStatus | None:
        fetcher = None if self.state_sync is None else self.state_sync.fetcher
        return None if fetcher is None else fetcher.status()

    def peer_count(self) -> int:
        return len(self.switch)

    def observed(self) -> NetworkStatus:
        return NetworkStatus(
            peer_count=len(self.switch),
            sync=self.block_sync_status(),
            state_sync=self.state_sync_status(),
            rdma_available=self.rdma is not None,
            traffic=tuple(PeerTraffic(p.id, p.channel.stats()) for p in self.switch.peers()),
        )

    def snapshots(self) -> dict[str, Any]:
        if self.state_sync is None:
            return {"snapshots": []}
        return {
            "snapshots": [
                {
                    "block_num": int.from_bytes(o.block_id[:4], "big"),
                    "block_id": o.block_id.hex(),
                    "size": o.size,
                    "chunk_size": o.chunk_size,
                    "chunks": o.chunks,
                    "root": o.root.hex(),
                }
                for o in self.state_sync.provider.offers()
            ]
        }

    def connect(self, address: tuple[str, int]) -> bool:
        started = self.transport.dial(address)
        if started:
            self.added[address] = None
        return started

    async def disconnect(self, peer_id: str) -> bool:
        peer = self.switch.get(peer_id)
        if peer is None:
            return False
        if peer.dial_address is not None:
            self.transport.forget(peer.dial_address)
            self.added.pop(peer.dial_address, None)
        return await self.switch.disconnect(peer_id)
