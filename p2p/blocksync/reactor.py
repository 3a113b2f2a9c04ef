"""Block sync: catching up with peers, following the chain, and serving ranges to peers.

This reactor owns the messages about blocks and chain positions: ``BlockMessage`` (a block
from a range we asked for, or relayed), ``SyncRequest`` (a range a peer asks of us),
``Notice`` and a repeated ``Handshake`` (where a peer's head and LIB are). It carries out
what the sync manager (``p2p.blocksync.manager``, a pure scheduler) decides and feeds received
blocks to the applier; what they did to our chain reaches it, like every other part of the node, as
the chain's update (``chain_updated``).

A block from a peer goes: switch → ``receive`` → applier → chain service (the chain thread),
whose update goes to every subscriber (block relay among them), and whose push results
(``_on_pushed``: which peer's block did what) go to the sync manager. It enters each step
once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import structlog

from chain.core.primitives.types import block_num_of
from chain.events import ChainUpdate
from p2p.blocksync.applier import BlockApplier
from p2p.blocksync.manager import Action, DropPeer, FetchRange, Stage, SyncConfig, SyncManager
from p2p.errors import ChannelClosed
from p2p.relay.blocks import BlockRelay
from p2p.service import SERVE_CHUNK, BlockResult, ChainService, Outcome
from p2p.transport.peer import Peer
from p2p.transport.reactor import Reactor
from p2p.wire.messages import (
    BlockMessage,
    GoAwayReason,
    Handshake,
    IdListMode,
    Message,
    Notice,
    RawBlock,
    SyncRequest,
)

log = structlog.get_logger("p2p")

MAX_BAD_REQUESTS = 5  # ranges asked beyond our head before the peer is sent away
# A served range is read from the store about this many bytes at a time (SERVE_CHUNK blocks
# at most): up to 50 blocks of up to 4 MiB each would be 200 MiB in hand per peer. The
# first read is SERVE_FIRST blocks, before their size is known.
SERVE_BYTES = 8 * 1024 * 1024
SERVE_FIRST = 4
TICK_SECONDS = 1.0  # how often stalled ranges are looked for
NOTICE_SECONDS = 2.0  # how often peers hear our head and LIB


class BlockSync(Reactor):
    accepts = (BlockMessage, SyncRequest, Notice, Handshake)

    def __init__(
        self,
        chain: ChainService,
        config: SyncConfig,
        relay: BlockRelay,
        light_validation: bool = False,
    ) -> None:
        self.chain = chain
        self.relay = relay  # told which peer sent which block
        self.light_validation = light_validation
        self.sync = SyncManager(config)
        self.applier = BlockApplier(
            chain, self._on_pushed, self._light_upto, max_ahead=config.window
        )
        self._serving: dict[str, asyncio.Task[None]] = {}
        self._served: dict[str, tuple[int, int]] = {}  # the range each task serves
        self._bad_requests: dict[str, int] = {}
        self._tg: asyncio.TaskGroup | None = None
        pos = chain.position()
        self.sync.chain_advanced(pos.head_num, pos.lib_num)

    @property
    def in_sync(self) -> bool:
        return self.sync.stage == Stage.IN_SYNC

    @property
    def holds_production(self) -> bool:
        """Catching up, and backed by blocks: see ``SyncManager.holds_production``."""
        return self.sync.holds_production()

    # --- Reactor ----------------------------------------------------------------------------

    def add_peer(self, peer: Peer) -> None:
        hs = peer.handshake
        self._act(
            self.sync.peer_position(peer.id, hs.lib_num, hs.head_num, hs.head_id, hs.first_block)
        )
        self._notify(peer)

    def remove_peer(self, peer: Peer) -> None:
        serving = self._serving.pop(peer.id, None)
        if serving is not None:
            serving.cancel()
        self._served.pop(peer.id, None)
        self._bad_requests.pop(peer.id, None)
        self._act(self.sync.peer_closed(peer.id))

    async def receive(self, peer: Peer, message: Message) -> None:
        if isinstance(message, BlockMessage):
            block = message.block
            self.relay.seen(peer.id, block.id)
            if not self.applier.add(peer.id, block):
                log.debug("block_too_far_ahead", num=block.num, head=self.sync.head)
                return  # not counted as delivered: the range stalls and is asked again
            self._act(self.sync.block_received(peer.id, block.num))
            await self.applier.room(block.num + 1)  # what this peer is likely to send next
        elif isinstance(message, SyncRequest):
            self._serve(peer, message)
        elif isinstance(message, Notice):
            if len(message.ids) == 2:
                head_id, lib_id = message.ids
                lib, head = block_num_of(lib_id), block_num_of(head_id)
                self._act(self.sync.peer_position(peer.id, lib, head, head_id))
        elif isinstance(message, Handshake):
            hs = message
            self._act(
                self.sync.peer_position(
                    peer.id, hs.lib_num, hs.head_num, hs.head_id, hs.first_block
                )
            )

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            tg.create_task(self.applier.run(), name="applier")
            tg.create_task(self._tick_loop(), name="sync-ticker")
            tg.create_task(self._notice_loop(), name="notices")

    # --- our chain --------------------------------------------------------------------------

    def chain_updated(self, update: ChainUpdate) -> None:
        """A subscriber of the chain's updates: a new head or LIB (ours or a peer's block)."""
        view = update.view
        txs = sum(len(block.transactions) for block in update.events.applied)
        self._act(self.sync.chain_advanced(view.head.num, view.lib_num, txs))
        self._log_progress()

    def _light_upto(self) -> int:
        """With light validation: blocks up to the LIB our peers report, while we catch up to
        it (never blocks that are still reversible)."""
        if self.light_validation and self.sync.stage == Stage.LIB_CATCHUP:
            return self.sync.target
        return 0

    async def _on_pushed(self, results: list[tuple[str, BlockResult]]) -> None:
        for peer_id, result in results:
            block = result.block
            if result.outcome == Outcome.APPLIED:
                self._act(self.sync.block_applied(peer_id, block.num))
            elif result.outcome in (Outcome.ADDED, Outcome.DUPLICATE):
                new = result.outcome == Outcome.ADDED
                self._act(self.sync.block_kept(peer_id, block.num, new, block.id))
            elif result.outcome == Outcome.UNLINKABLE:
                self._act(
                    self.sync.block_unlinkable(peer_id, block.num, block.id, block.header.previous)
                )
            elif result.outcome == Outcome.STALE:
                log.info("block_stale", num=block.num, from_peer=peer_id, why=result.detail)
                self._act(
                    self.sync.block_stale(peer_id, block.num, block.id, block.header.previous)
                )
            else:  # INVALID
                log.warning(
                    "block_rejected",
                    num=block.num,
                    id=block.id.hex()[:16],
                    from_peer=peer_id,
                    why=result.detail,
                )
                self._act(self.sync.block_rejected(peer_id, block.num, result.detail))
        self._act(self.sync.applier_waits(self.applier.lowest()))

    # --- serving ranges ---------------------------------------------------------------------

    def _serve(self, peer: Peer, request: SyncRequest) -> None:
        """One range in flight per peer. The same range asked again while it is served is
        not served twice; another one replaces it (EOSIO does the same), taking the blocks
        of the old one still in the outbox out, so a peer that asks and never reads holds at
        most one range's share of the outbox however often it asks."""
        serving = self._serving.get(peer.id)
        if serving is not None and not serving.done():
            if self._served.get(peer.id) == (request.start, request.end):
                return
            serving.cancel()
            peer.outbox.discard(RawBlock)  # only range serving queues RawBlock
        self._serving.pop(peer.id, None)
        self._served.pop(peer.id, None)
        if (request.start == 0 and request.end == 0) or self._tg is None:
            return
        task = self._tg.create_task(self._serve_range(peer, request.start, request.end))
        self._serving[peer.id] = task
        self._served[peer.id] = (request.start, request.end)

    async def _serve_range(self, peer: Peer, start: int, end: int) -> None:
        pos = self.chain.position()
        head, first = pos.head_num, pos.first_block
        if start > head or start < first:
            bad = self._bad_requests.get(peer.id, 0) + 1
            self._bad_requests[peer.id] = bad
            log.info("range_not_held", peer=peer.id, start=start, end=end, first=first, head=head)
            if bad > MAX_BAD_REQUESTS:
                self.switch.send_away(
                    peer.id, GoAwayReason.BENIGN_OTHER, "ranges of blocks we do not hold"
                )
            return
        num, count = start, SERVE_FIRST
        with contextlib.suppress(ChannelClosed):
            while num <= min(end, self.chain.position().head_num):
                chunk = await self.chain.encoded_blocks(num, min(num + count - 1, end))
                if not chunk:
                    break
                for raw in chunk:
                    await peer.outbox.put(RawBlock(raw))  # waits for room, bytes counted
                num += len(chunk)
                size = sum(len(raw) for raw in chunk)
                count = max(1, min(SERVE_CHUNK, SERVE_BYTES * len(chunk) // max(size, 1)))

    # --- acting on the sync manager ---------------------------------------------------------

    def _act(self, actions: Sequence[Action]) -> None:
        for action in actions:
            peer = self.switch.get(action.peer)
            if peer is None:
                continue
            if isinstance(action, FetchRange):
                peer.offer(SyncRequest(action.start, action.end))
            elif isinstance(action, DropPeer):
                self.switch.punish(peer.id, action.reason, action.detail)

    def _notify(self, peer: Peer) -> None:
        pos = self.chain.position()
        peer.offer(Notice(IdListMode.CATCH_UP, pos.head_num, (pos.head_id, pos.lib_id)))

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            for peer in self.switch.peers():
                if peer.rtt is not None:
                    self.sync.peer_rtt(peer.id, peer.rtt)
            self._act(self.sync.tick())
            self._act(self.sync.applier_waits(self.applier.lowest()))
            self._log_progress()  # a stalled catch-up too: its rate falls, its ETA goes

    def _log_progress(self) -> None:
        """One line every few seconds while catching up, as nodeos logs its sync requests."""
        progress = self.sync.progress_due()
        if progress is not None:
            log.info(
                "sync_progress",
                stage=str(self.sync.stage),
                head=progress.head,
                target=progress.target,
                blocks_per_s=progress.blocks_per_s,
                txs_per_s=progress.txs_per_s,
                eta_s=progress.eta_s,
                peers=self.sync.peer_count(),
            )

    async def _notice_loop(self) -> None:
        while True:
            await asyncio.sleep(NOTICE_SECONDS)
            for peer in list(self.switch.peers()):
                self._notify(peer)
