"""The node's peer layer: the chain as the network sees it, and the wiring of the network.

``NodeChainService`` is ``p2p.service.ChainService`` over the chain thread: positions come
from the view the chain publishes, everything else is a call on the chain thread.
``Network`` builds the transport, the switch and the reactors for one node and answers the
RPC's questions about them (``node.rpc.NetworkApi``); it is the only place they meet.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Collection, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from chain.block import SignedBlock
from chain.controller import Chain
from chain.crypto import PrivateKey
from chain.errors import DoubleSign, InvalidBlock, StaleBlock, TransactionError, UnlinkableBlock
from chain.qc import Vote
from chain.signers import PREFETCH_BLOCKS
from chain.transaction import SignedTransaction
from chain.types import BlockId
from chain.view import ChainView
from chain.votes import VoteOutcome
from node.runner import ChainRunner
from p2p.block_relay import BlockRelay
from p2p.blocksync import BlockSync, OnApplied
from p2p.handshake import AuthPolicy, ChainPosition
from p2p.header_sync import HeaderSync
from p2p.rdma.device import RdmaDevice
from p2p.rdma.upgrade import RdmaUpgrade
from p2p.reactor import Reactor
from p2p.service import BlockResult, Outcome, PushOutcome
from p2p.statesync import StateSync
from p2p.switch import Switch, SwitchConfig
from p2p.sync import SyncConfig
from p2p.tls import TlsIdentity
from p2p.transport import Transport, TransportConfig
from p2p.tx_relay import TxRelay
from p2p.vote_relay import OnCounted, VoteRelay


class NodeChainService:
    def __init__(self, runner: ChainRunner) -> None:
        self.runner = runner
        self.chain_id = runner.view.chain_id
        self._chain = runner.chain  # handed to functions run on the chain thread, never used here
        # Told of transactions a fork switch put back into the mempool (on the event loop).
        self.on_requeued: Callable[[list[SignedTransaction]], None] = lambda txs: None

    def position(self) -> ChainPosition:
        view = self.runner.view
        return ChainPosition(
            view.lib_num, view.lib_id, view.head.num, view.head.id, view.first_block
        )

    def producer_keys(self) -> Collection[bytes]:
        return self.runner.view.producer_keys

    async def id_at(self, num: int) -> BlockId | None:
        return await self.runner.call(_id_at, self._chain, num)

    async def encoded_blocks(self, start: int, end: int) -> list[bytes]:
        return await self.runner.call(_encoded, self._chain, start, end)

    async def push_blocks(
        self,
        blocks: Sequence[SignedBlock],
        light_upto: int,
        ahead: Sequence[SignedBlock] = (),
        taken: Callable[[int], None] | None = None,
    ) -> PushOutcome:
        now = int(time.time() * 1000)
        on_chain_thread = None
        if taken is not None:
            loop = asyncio.get_running_loop()

            def on_chain_thread(num: int) -> None:
                loop.call_soon_threadsafe(taken, num)

        outcome, requeued = await self.runner.call_urgent(
            _push, self._chain, blocks, light_upto, now, ahead, on_chain_thread
        )
        if requeued:
            self.on_requeued(requeued)
        return outcome

    async def admit_transactions(
        self, txs: Sequence[SignedTransaction]
    ) -> list[TransactionError | None]:
        now = int(time.time() * 1000)
        return await self.runner.call(_admit, self._chain, txs, now)

    async def add_votes(self, votes: Sequence[Vote]) -> list[VoteOutcome]:
        # Urgent: a vote late by one slot misses the next block's QC.
        now = int(time.time() * 1000)
        return await self.runner.call_urgent(_add_votes, self._chain, votes, now)


def _add_votes(chain: Chain, votes: Sequence[Vote], now: int) -> list[VoteOutcome]:
    return [chain.add_vote(vote, now) for vote in votes]


def _id_at(chain: Chain, num: int) -> BlockId | None:
    return chain.store.block_id_at(num)


def _admit(
    chain: Chain, txs: Sequence[SignedTransaction], now: int
) -> list[TransactionError | None]:
    return chain.admit_transactions(txs, now)


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


def _push(
    chain: Chain,
    blocks: Sequence[SignedBlock],
    light_upto: int,
    now: int,
    ahead: Sequence[SignedBlock] = (),
    taken: Callable[[int], None] | None = None,
) -> tuple[PushOutcome, list[SignedTransaction]]:
    """On the chain thread: push each block, recovering the next blocks' signatures ahead,
    into ``ahead`` (the next call's blocks: the workers need not wait for it), and telling
    ``taken`` of each block done with; with the transactions fork switches put back into the
    mempool."""
    chain.set_light_validation(light_upto)
    results: list[BlockResult] = []
    applied: list[SignedBlock] = []
    requeued: list[SignedTransaction] = []

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
            results.append(_push_one(chain, block, now, applied, requeued))
            if taken is not None:
                taken(block.num)
    return PushOutcome(results, applied), requeued


def _push_one(
    chain: Chain,
    block: SignedBlock,
    now: int,
    applied: list[SignedBlock],
    requeued: list[SignedTransaction],
) -> BlockResult:
    """Push ``block``; what it applied and put back into the mempool goes to the lists."""
    try:
        pushed = chain.push_block(block, now)
    except UnlinkableBlock as err:
        return BlockResult(block, Outcome.UNLINKABLE, err.reason)
    except StaleBlock as err:
        return BlockResult(block, Outcome.STALE, err.reason)
    except (InvalidBlock, DoubleSign) as err:
        return BlockResult(block, Outcome.INVALID, f"{err.name}: {err.reason}")
    applied.extend(pushed.applied)
    requeued.extend(pushed.requeued)
    if pushed.applied:
        return BlockResult(block, Outcome.APPLIED)
    return BlockResult(block, Outcome.ADDED if pushed.added else Outcome.DUPLICATE)


@dataclass(slots=True)
class NetConfig:
    listen: tuple[str, int] | None = None
    peers: list[tuple[str, int]] = field(default_factory=list)
    p2p_address: str = ""
    max_clients: int = 25
    policy: AuthPolicy = field(default_factory=AuthPolicy)
    keepalive: float = 2.0
    handshake_timeout: float = 5.0
    rdma_probe_timeout: float = 5.0
    max_unauthenticated: int = 32
    max_per_address: int = 8
    sync: SyncConfig = field(default_factory=SyncConfig)
    light_validation: bool = False  # validation-mode = light, during LIB catch-up only
    tls: bool = True  # p2p-tls


class Network:
    """Transport, switch and reactors of one node, wired; implements ``NetworkApi``."""

    def __init__(
        self,
        runner: ChainRunner,
        config: NetConfig,
        node_key: PrivateKey,
        rdma: RdmaDevice | None = None,
        rdma_status: dict[str, object] | None = None,
        on_applied: OnApplied = lambda blocks, live: None,
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
        service = NodeChainService(runner)
        self.block_relay = BlockRelay()
        self.blocks = BlockSync(
            service, config.sync, self.block_relay, on_applied, config.light_validation
        )
        self.txs = TxRelay(service)
        self.votes = VoteRelay(service, on_vote, on_peer)
        service.on_requeued = self.txs.relay_requeued
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
        self.switch = Switch(
            self.node_id, SwitchConfig(config.max_clients, config.keepalive), reactors
        )
        self.transport = Transport(
            TransportConfig(
                config.listen,
                config.p2p_address,
                config.policy,
                config.handshake_timeout,
                config.rdma_probe_timeout,
                max_unauthenticated=config.max_unauthenticated,
                max_per_address=config.max_per_address,
                tls=TlsIdentity.generate() if config.tls else None,
            ),
            self.node_id,
            node_key,
            service,
            self.switch,
            RdmaUpgrade(rdma, config.rdma_probe_timeout) if rdma is not None else None,
        )
        self.ready = asyncio.Event()
        # Addresses the operator had us dial at run time (``connect``) and did not take back:
        # a node restarted into the snapshot it state-synced dials them again.
        self.added: dict[tuple[str, int], None] = {}
        runner.subscribe(self._chain_changed)

    def _chain_changed(self, view: ChainView) -> None:
        self.blocks.chain_advanced(view.head.num, view.lib_num)
        self.votes.chain_advanced(view.lib_num)

    @property
    def listen_port(self) -> int | None:
        return self.transport.listen_port

    async def listen(self) -> None:
        await self.transport.listen()

    async def run(self) -> None:
        await self.transport.listen()
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.switch.run(), name="switch")
            tg.create_task(self.transport.run(self.config.peers), name="transport")
            while not (self.switch.running and self.transport.running):
                await asyncio.sleep(0)
            self.ready.set()

    # --- what the node tells the network ----------------------------------------------------

    def block_produced(self, block: SignedBlock) -> None:
        self.block_relay.relay(block)

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
            "sync": self.blocks.sync.status(),
        }

    def sync_status(self) -> dict[str, Any]:
        fetcher = None if self.state_sync is None else self.state_sync.fetcher
        if fetcher is not None:
            return {"stage": "state_sync", "state_sync": fetcher.status()}
        return self.blocks.sync.status()

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

    def summary(self) -> dict[str, Any]:
        sync = self.blocks.sync.status()
        if self.fetching:
            sync = {"stage": "state_sync", "target": 0, "blocks_per_s": 0, "eta_s": None}
        return {
            "peer_count": len(self.switch),
            "sync_stage": sync["stage"],
            "sync_target": sync["target"],
            "sync_blocks_per_s": sync["blocks_per_s"],
            "sync_eta_s": sync["eta_s"],
            "rdma": self.rdma_status,
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
