"""The peer manager: listens, dials, handshakes, and runs one session per connected peer.

It carries out what the sync manager decides (ranges to fetch, peers to drop), serves the
ranges peers ask of us, hands received blocks to the applier, and relays new blocks and
transactions to the peers that do not have them yet. Every task it starts belongs to its
task group (or to a session's), so stopping the manager stops everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from chain.block import SignedBlock
from chain.crypto import PrivateKey
from chain.transaction import SignedTransaction
from chain.types import block_num_of
from p2p.applier import BlockApplier
from p2p.channel import Channel
from p2p.errors import ChannelBroken, ChannelClosed, HandshakeFailed, MalformedMessage
from p2p.handshake import AuthPolicy, check_handshake, check_hello, make_handshake
from p2p.messages import (
    PROTOCOL_VERSION,
    BlockMessage,
    GoAway,
    GoAwayReason,
    Handshake,
    Hello,
    IdListMode,
    Message,
    Notice,
    RawBlock,
    RdmaSetup,
    RdmaStep,
    Request,
    SyncRequest,
    Time,
    TransactionMessage,
)
from p2p.peer import Peer, RecentSet
from p2p.rdma.channel import Endpoint, RdmaChannel
from p2p.rdma.device import RdmaDevice
from p2p.rdma.verbs import RdmaFailure
from p2p.service import BlockResult, ChainService, Outcome
from p2p.sync import Action, DropPeer, FetchRange, Stage, SyncConfig, SyncManager
from p2p.tcp import TcpChannel

log = structlog.get_logger("p2p")

SERVE_CHUNK = 50  # blocks read from the store per trip to the chain thread when serving
MAX_BAD_REQUESTS = 5  # ranges asked beyond our head before the peer is sent away
TX_BATCH = 256
RDMA_RETRY_SECONDS = 30.0  # after an RDMA failure with a peer: TCP, then RDMA again later
MAX_RDMA_RETRY_SECONDS = 900.0
BAN_SECONDS = 10.0  # first ban; doubles with every further ban of the same node, to 10 min
MAX_BAN_SECONDS = 600.0


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
    sync: SyncConfig = field(default_factory=SyncConfig)


def _now_ns() -> int:
    return time.time_ns()


class PeerManager:
    def __init__(
        self,
        chain: ChainService,
        config: NetConfig,
        node_key: PrivateKey,
        on_applied: Callable[[SignedBlock], None] = lambda b: None,
        rdma: RdmaDevice | None = None,
    ) -> None:
        self.chain = chain
        self.rdma = rdma
        # What RDMA detection found (set by the node; reported by get_info).
        self.rdma_status: dict[str, object] = {"available": rdma is not None, "reason": ""}
        self._rdma_backoff: dict[bytes, tuple[float, int]] = {}
        self.config = config
        self.node_key = node_key
        self.node_id = os.urandom(32)
        self.on_applied = on_applied
        self.peers: dict[str, Peer] = {}
        self.sync = SyncManager(config.sync)
        self.applier = BlockApplier(chain, self._on_block_result, max_ahead=config.sync.window)
        self._seen_txs = RecentSet(100_000)
        self._tx_queue: asyncio.Queue[tuple[Peer | None, SignedTransaction]] = asyncio.Queue(20_000)
        self._bans: dict[bytes, tuple[float, int]] = {}
        self._tg: asyncio.TaskGroup | None = None
        self._dialing: set[tuple[str, int]] = set()
        self.dial_errors: dict[str, str] = {}  # why a dialled address is not connected
        self.listen_port: int | None = None
        self._server: asyncio.Server | None = None
        self.ready = asyncio.Event()
        pos = chain.position()
        self.sync.chain_advanced(pos.head_num, pos.lib_num)

    # --- lifecycle --------------------------------------------------------------------------

    async def listen(self) -> None:
        """Open the listening socket (raises OSError if the endpoint is taken)."""
        if self.config.listen is not None and self._server is None:
            host, port = self.config.listen
            self._server = await asyncio.start_server(self._on_inbound, host, port)
            self.listen_port = self._server.sockets[0].getsockname()[1]
            log.info("p2p_listening", address=f"{host}:{self.listen_port}")

    async def run(self) -> None:
        await self.listen()
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                tg.create_task(self.applier.run(), name="applier")
                tg.create_task(self._tick_loop(), name="sync-ticker")
                tg.create_task(self._tx_loop(), name="tx-relay")
                for address in self.config.peers:
                    self.connect(address)
                self.ready.set()
                await asyncio.Event().wait()  # until cancelled
        finally:
            if self._server is not None:
                self._server.close()
            for peer in list(self.peers.values()):
                await peer.channel.close()

    def connect(self, address: tuple[str, int]) -> bool:
        """Dial ``address`` (and keep redialling); False if already dialling it."""
        if address in self._dialing or self._tg is None:
            return False
        self._dialing.add(address)
        self._tg.create_task(self._dial_loop(address), name=f"dial-{address[0]}:{address[1]}")
        return True

    async def disconnect(self, peer_id: str) -> bool:
        """Send a peer away and stop redialling it (if we dialled it); False if unknown."""
        peer = self.peers.get(peer_id)
        if peer is None:
            return False
        if peer.dial_address is not None:
            self._dialing.discard(peer.dial_address)
            self.dial_errors.pop(f"{peer.dial_address[0]}:{peer.dial_address[1]}", None)
        await self._send_away(peer, GoAwayReason.NO_REASON, "disconnect requested")
        return True

    # --- connecting -------------------------------------------------------------------------

    async def _on_inbound(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        channel = TcpChannel(reader, writer)
        if self._tg is None:
            await channel.close()
            return
        self._tg.create_task(self._session(channel, dialed=False), name=f"in-{channel.remote}")

    async def _dial_loop(self, address: tuple[str, int]) -> None:
        delay = 0.5
        host, port = address
        where = f"{host}:{port}"
        while address in self._dialing:  # ``disconnect`` takes it out
            try:
                channel: Channel = await TcpChannel.connect(host, port)
            except ChannelBroken as err:
                self.dial_errors[where] = str(err)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            if address not in self._dialing:
                await channel.close()
                return
            connected, reason = await self._session(channel, dialed=True, address=address)
            if reason is not None:
                self.dial_errors[where] = f"refused: {reason.name}"
            if reason is not None and not reason.retry and reason != GoAwayReason.DUPLICATE:
                log.warning("peer_refused_for_good", address=where, reason=reason.name)
                self._dialing.discard(address)
                return
            delay = 0.5 if connected else min(delay * 2, 30.0)
            await asyncio.sleep(delay)

    async def _handshake(
        self, channel: Channel, dialed: bool, address: tuple[str, int] | None
    ) -> Peer:
        nonce = os.urandom(32)
        await channel.send(Hello(PROTOCOL_VERSION, self.chain.chain_id, self.node_id, nonce))
        hello = await channel.recv()
        if isinstance(hello, GoAway):
            raise _WentAway(hello)
        if not isinstance(hello, Hello):
            raise HandshakeFailed(GoAwayReason.FATAL_OTHER, "expected hello")
        check_hello(hello, self.chain.chain_id, self.node_id)
        ban = self._bans.get(hello.node_id)
        if ban is not None and ban[0] > time.monotonic():
            raise HandshakeFailed(GoAwayReason.BANNED, "banned for misbehaviour")
        inbound = sum(1 for p in self.peers.values() if not p.dialed)
        if not dialed and self.config.max_clients and inbound >= self.config.max_clients:
            raise HandshakeFailed(GoAwayReason.BENIGN_OTHER, "too many clients")
        position = self.chain.position()
        rdma_offered = self._rdma_offered(hello.node_id)
        await channel.send(
            make_handshake(
                chain_id=self.chain.chain_id,
                node_id=self.node_id,
                node_key=self.node_key,
                peer_nonce=hello.nonce,
                position=position,
                p2p_address=self.config.p2p_address,
                rdma=rdma_offered,
            )
        )
        hs = await channel.recv()
        if isinstance(hs, GoAway):
            raise _WentAway(hs)
        if not isinstance(hs, Handshake):
            raise HandshakeFailed(GoAwayReason.FATAL_OTHER, "expected handshake")
        ours = await self.chain.id_at(hs.lib_num) if hs.lib_num <= position.lib_num else None
        check_handshake(
            hs,
            hello=hello,
            my_nonce=nonce,
            chain_id=self.chain.chain_id,
            policy=self.config.policy,
            producer_keys=self.chain.producer_keys(),
            our_lib=position.lib_num,
            our_id_at=lambda num: ours,
        )
        existing = self.peers.get(hs.node_id.hex()[:16])
        if existing is not None:
            # Both sides dialled each other: keep the connection dialled by the lower node id.
            keep_new = dialed == (self.node_id < hs.node_id)
            if not keep_new:
                raise HandshakeFailed(GoAwayReason.DUPLICATE, "already connected")
            await self._send_away(existing, GoAwayReason.DUPLICATE, "replaced by a new connection")
        if rdma_offered and hs.rdma:
            upgraded = await self._upgrade(channel, hs.node_id, dialed)
            return Peer(upgraded, hs.node_id, hs, dialed, dial_address=address, tcp=channel)
        return Peer(channel, hs.node_id, hs, dialed, dial_address=address)

    # --- RDMA -------------------------------------------------------------------------------

    def _rdma_offered(self, node_id: bytes) -> bool:
        """Whether we advertise RDMA to ``node_id``: we have a device, and no recent RDMA
        failure with that node (retried with back-off)."""
        if self.rdma is None:
            return False
        until = self._rdma_backoff.get(node_id)
        return until is None or until[0] <= time.monotonic()

    def _rdma_failed(self, node_id: bytes, why: str) -> None:
        _, count = self._rdma_backoff.get(node_id, (0.0, 0))
        seconds = min(RDMA_RETRY_SECONDS * 2**count, MAX_RDMA_RETRY_SECONDS)
        self._rdma_backoff[node_id] = (time.monotonic() + seconds, count + 1)
        log.warning("rdma_failed", node=node_id.hex()[:16], why=why, retry_in_s=seconds)

    async def _upgrade(self, tcp: Channel, node_id: bytes, dialed: bool) -> Channel:
        """Both sides advertised RDMA: exchange queue pairs over ``tcp`` and prove the path
        with a probe each way. Returns the RDMA channel, or ``tcp`` if either side declines.
        A probe that fails ends the connection (HandshakeFailed, retryable); the node then
        stays on TCP with that peer until its RDMA back-off expires."""
        assert self.rdma is not None
        rdma: RdmaChannel | None = None
        try:
            if dialed:
                try:
                    rdma = RdmaChannel(self.rdma, tcp.remote)
                except RdmaFailure as err:
                    await tcp.send(RdmaSetup(RdmaStep.DECLINE, (), str(err)[:200]))
                    self._rdma_failed(node_id, str(err))
                    return tcp
                await tcp.send(RdmaSetup(RdmaStep.OFFER, rdma.endpoint().to_wire()))
                reply = await tcp.recv()
                if not isinstance(reply, RdmaSetup) or reply.step == RdmaStep.OFFER:
                    raise HandshakeFailed(GoAwayReason.FATAL_OTHER, "expected rdma_setup")
                if reply.step == RdmaStep.DECLINE:
                    log.info("rdma_declined", why=reply.detail)
                    self._rdma_failed(node_id, f"declined: {reply.detail}")
                    await rdma.close()
                    return tcp
                rdma.connect(Endpoint.from_wire(reply.endpoint))
                await rdma.send(Time(0, 0, _now_ns(), 0))
                await self._probe(rdma)
            else:
                offer = await tcp.recv()
                if not isinstance(offer, RdmaSetup) or offer.step == RdmaStep.ACCEPT:
                    raise HandshakeFailed(GoAwayReason.FATAL_OTHER, "expected rdma_setup")
                if offer.step == RdmaStep.DECLINE:
                    log.info("rdma_declined", why=offer.detail)
                    return tcp
                try:
                    rdma = RdmaChannel(self.rdma, tcp.remote)
                    rdma.connect(Endpoint.from_wire(offer.endpoint))
                except (RdmaFailure, MalformedMessage) as err:
                    if rdma is not None:
                        await rdma.close()
                    await tcp.send(RdmaSetup(RdmaStep.DECLINE, (), str(err)[:200]))
                    self._rdma_failed(node_id, str(err))
                    return tcp
                await tcp.send(RdmaSetup(RdmaStep.ACCEPT, rdma.endpoint().to_wire()))
                await self._probe(rdma)
                await rdma.send(Time(0, 0, _now_ns(), 0))
        except (ChannelClosed, MalformedMessage, TimeoutError) as err:
            if rdma is not None:
                await rdma.close()
            self._rdma_failed(node_id, f"set-up failed: {type(err).__name__}: {err}")
            raise HandshakeFailed(GoAwayReason.BENIGN_OTHER, "RDMA set-up failed") from err
        except BaseException:
            if rdma is not None:
                await rdma.close()
            raise
        self._rdma_backoff.pop(node_id, None)
        log.info("rdma_connected", remote=tcp.remote)
        return rdma

    async def _probe(self, rdma: RdmaChannel) -> None:
        async with asyncio.timeout(self.config.rdma_probe_timeout):
            probe = await rdma.recv()
        if not isinstance(probe, Time):
            raise MalformedMessage("RDMA probe is not a time message")

    async def _session(
        self, channel: Channel, dialed: bool, address: tuple[str, int] | None = None
    ) -> tuple[bool, GoAwayReason | None]:
        """Run one connection to its end: (whether the handshake succeeded, go_away reason)."""
        try:
            limit = self.config.handshake_timeout
            if self.rdma is not None:
                limit += self.config.rdma_probe_timeout
            async with asyncio.timeout(limit):
                peer = await self._handshake(channel, dialed, address)
        except HandshakeFailed as err:
            refusal = GoAwayReason(err.reason)
            log.info("peer_refused", remote=channel.remote, reason=refusal.name, why=err.detail)
            with contextlib.suppress(ChannelClosed):
                await channel.send(GoAway(refusal, self.node_id, err.detail))
            await channel.close()
            return False, refusal
        except _WentAway as away:
            log.info(
                "peer_sent_us_away", remote=channel.remote, reason=away.reason.name, why=away.detail
            )
            await channel.close()
            return False, away.reason
        except (ChannelClosed, MalformedMessage, TimeoutError) as err:
            log.info(
                "handshake_failed", remote=channel.remote, error=type(err).__name__, why=str(err)
            )
            await channel.close()
            return False, None
        self.peers[peer.id] = peer
        if address is not None:
            self.dial_errors.pop(f"{address[0]}:{address[1]}", None)
        structlog.contextvars.bind_contextvars(peer=peer.id)
        hs = peer.handshake
        log.info(
            "peer_connected",
            remote=channel.remote,
            head=hs.head_num,
            lib=hs.lib_num,
            direction="outbound" if dialed else "inbound",
        )
        reason: GoAwayReason | None = None
        try:
            self._act(self.sync.peer_position(peer.id, hs.lib_num, hs.head_num))
            async with asyncio.TaskGroup() as tg:
                writer = tg.create_task(self._writer(peer))
                keepalive = tg.create_task(self._keepalive(peer))
                try:
                    reason = await self._reader(peer)
                finally:
                    writer.cancel()
                    keepalive.cancel()
                    if peer.serving is not None:
                        peer.serving.cancel()
        finally:
            if self.peers.get(peer.id) is peer:
                del self.peers[peer.id]
            if peer.tcp is not None and (peer.silent or isinstance(peer.broken, ChannelBroken)):
                # The RDMA path failed under a live session: TCP with this node for a while.
                self._rdma_failed(peer.node_id, "silent" if peer.silent else str(peer.broken))
            await peer.channel.close()
            await channel.close()
            self._act(self.sync.peer_closed(peer.id))
            log.info("peer_disconnected", reason=None if reason is None else reason.name)
        return True, reason

    # --- a session's tasks ------------------------------------------------------------------

    async def _writer(self, peer: Peer) -> None:
        try:
            while True:
                await peer.channel.send(await peer.outbox.get())
        except ChannelClosed:
            pass

    async def _keepalive(self, peer: Peer) -> None:
        interval = self.config.keepalive
        try:
            while True:
                pos = self.chain.position()
                peer.offer(Time(0, 0, _now_ns(), 0))
                peer.offer(Notice(IdListMode.CATCH_UP, pos.head_num, (pos.head_id, pos.lib_id)))
                await asyncio.sleep(interval)
                if time.monotonic() - peer.last_recv > 3 * interval:
                    log.info("peer_silent", seconds=round(time.monotonic() - peer.last_recv, 1))
                    peer.silent = True
                    await peer.channel.close()
                    return
        except ChannelClosed:
            pass

    async def _reader(self, peer: Peer) -> GoAwayReason | None:
        """Receive and dispatch until the channel ends; returns a go_away reason if sent one."""
        while True:
            try:
                message = await peer.channel.recv()
            except ChannelClosed as err:
                peer.broken = err
                return None
            except MalformedMessage as err:
                log.warning("malformed_message", why=str(err))
                self._ban(peer.node_id)
                return None
            peer.last_recv = time.monotonic()
            if isinstance(message, GoAway):
                log.info("peer_sent_us_away", reason=message.reason.name, why=message.detail)
                return message.reason
            await self._dispatch(peer, message)

    async def _dispatch(self, peer: Peer, message: Message) -> None:
        if isinstance(message, BlockMessage):
            block = message.block
            peer.known_blocks.add(block.id)
            self._act(self.sync.block_received(peer.id, block.num))
            self.applier.add(peer.id, block)
        elif isinstance(message, TransactionMessage):
            peer.known_txs.add(message.tx.id)
            if self._seen_txs.add(message.tx.id):
                # A full queue sheds load: the sender's own node still has the transaction.
                with contextlib.suppress(asyncio.QueueFull):
                    self._tx_queue.put_nowait((peer, message.tx))
        elif isinstance(message, SyncRequest):
            self._serve(peer, message)
        elif isinstance(message, Notice):
            if len(message.ids) == 2:
                head_id, lib_id = message.ids
                self._act(
                    self.sync.peer_position(peer.id, block_num_of(lib_id), block_num_of(head_id))
                )
        elif isinstance(message, Time):
            now = _now_ns()
            if message.org:
                peer.rtt = (now - message.org) / 1e9
                self.sync.peer_rtt(peer.id, peer.rtt)
            elif message.xmt:
                peer.offer(Time(message.xmt, now, _now_ns(), 0))
        elif isinstance(message, Handshake):
            self._act(self.sync.peer_position(peer.id, message.lib_num, message.head_num))
        elif isinstance(message, Hello | Request):
            pass  # a repeated hello, or a request mode we do not serve: harmless, ignored

    # --- serving ranges -----------------------------------------------------------------

    def _serve(self, peer: Peer, request: SyncRequest) -> None:
        if peer.serving is not None:
            peer.serving.cancel()  # a new request replaces the old one (EOSIO does the same)
        if request.start == 0 and request.end == 0:
            peer.serving = None
            return
        assert self._tg is not None
        peer.serving = self._tg.create_task(self._serve_range(peer, request.start, request.end))

    async def _serve_range(self, peer: Peer, start: int, end: int) -> None:
        head = self.chain.position().head_num
        if start > head:
            peer.bad_requests += 1
            log.info("range_beyond_head", start=start, end=end, head=head)
            if peer.bad_requests > MAX_BAD_REQUESTS:
                await self._send_away(peer, GoAwayReason.BENIGN_OTHER, "ranges beyond our head")
            return
        num = start
        try:
            while num <= min(end, self.chain.position().head_num):
                chunk = await self.chain.encoded_blocks(num, min(num + SERVE_CHUNK - 1, end))
                if not chunk:
                    break
                for raw in chunk:
                    await peer.outbox.put(RawBlock(raw))
                num += len(chunk)
        except ChannelClosed:
            pass

    # --- blocks and transactions ------------------------------------------------------------

    async def _on_block_result(self, peer_id: str, result: BlockResult) -> None:
        block = result.block
        pos = self.chain.position()
        if result.outcome == Outcome.APPLIED:
            self._act(self.sync.chain_advanced(pos.head_num, pos.lib_num))
            self.on_applied(block)
            if self.sync.stage == Stage.IN_SYNC:
                self.relay_block(block, exclude=peer_id)
        elif result.outcome in (Outcome.ADDED, Outcome.DUPLICATE):
            self._act(self.sync.block_kept(peer_id, block.num))
        elif result.outcome == Outcome.UNLINKABLE:
            self._act(self.sync.block_unlinkable(peer_id, block.num))
        elif result.outcome in (Outcome.INVALID, Outcome.STALE):
            log.warning(
                "block_rejected",
                num=block.num,
                id=block.id.hex()[:16],
                from_peer=peer_id,
                why=result.detail,
            )
            self._act(self.sync.block_rejected(peer_id, block.num, result.detail))

    def block_produced(self, block: SignedBlock) -> None:
        """Our producer made ``block``: our head moved, and every peer needs it."""
        pos = self.chain.position()
        self._act(self.sync.chain_advanced(pos.head_num, pos.lib_num))
        self.relay_block(block)

    def relay_block(self, block: SignedBlock, exclude: str | None = None) -> None:
        """Send ``block`` to every peer that does not have it (our own, or newly applied)."""
        message: BlockMessage | None = None
        for peer in self.peers.values():
            if peer.id == exclude or not peer.known_blocks.add(block.id):
                continue
            message = message or BlockMessage.of(block)
            peer.offer(message)

    def relay_transaction(self, tx: SignedTransaction, exclude: Peer | None = None) -> None:
        self._seen_txs.add(tx.id)
        message: TransactionMessage | None = None
        for peer in self.peers.values():
            if peer is exclude or not peer.known_txs.add(tx.id):
                continue
            message = message or TransactionMessage.of(tx)
            peer.offer(message)

    async def _tx_loop(self) -> None:
        while True:
            batch = [await self._tx_queue.get()]
            while len(batch) < TX_BATCH and not self._tx_queue.empty():
                batch.append(self._tx_queue.get_nowait())
            errors = await self.chain.admit_transactions([tx for _, tx in batch])
            for (origin, tx), error in zip(batch, errors, strict=True):
                if error is None:
                    self.relay_transaction(tx, exclude=origin)

    # --- acting on the sync manager ---------------------------------------------------------

    def _act(self, actions: Sequence[Action]) -> None:
        for action in actions:
            peer = self.peers.get(action.peer)
            if peer is None:
                continue
            if isinstance(action, FetchRange):
                peer.offer(SyncRequest(action.start, action.end))
            elif isinstance(action, DropPeer):
                self._ban(peer.node_id)
                assert self._tg is not None
                self._tg.create_task(self._send_away(peer, action.reason, action.detail))

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self._act(self.sync.tick())

    async def _send_away(self, peer: Peer, reason: GoAwayReason, detail: str) -> None:
        log.info("sending_peer_away", peer=peer.id, reason=reason.name, why=detail)
        with contextlib.suppress(ChannelClosed, TimeoutError):
            async with asyncio.timeout(2.0):
                await peer.channel.send(GoAway(reason, self.node_id, detail))
        await peer.channel.close()

    def _ban(self, node_id: bytes) -> None:
        _, count = self._bans.get(node_id, (0.0, 0))
        seconds = min(BAN_SECONDS * 2**count, MAX_BAN_SECONDS)
        self._bans[node_id] = (time.monotonic() + seconds, count + 1)
        log.info("peer_banned", node=node_id.hex()[:16], seconds=seconds)

    # --- status -----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        peers = []
        for peer in self.peers.values():
            info = peer.info()
            known = self.sync.peers.get(peer.id)
            if known is not None:
                info["head"], info["lib"] = known.head, known.lib
            peers.append(info)
        connected = {p.dial_address for p in self.peers.values()}
        dialing = [
            {"address": f"{h}:{p}", "state": "dialing", "error": self.dial_errors.get(f"{h}:{p}")}
            for h, p in sorted(self._dialing - connected)
        ]
        refused = [
            {"address": where, "state": "given_up", "error": error}
            for where, error in sorted(self.dial_errors.items())
            if error.startswith("refused") and tuple_of(where) not in self._dialing
        ]
        return {
            "node_id": self.node_id.hex(),
            "peers": peers,
            "dialing": dialing + refused,
            "sync": self.sync.status(),
        }


def tuple_of(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


class _WentAway(Exception):
    """The peer sent go_away during the handshake."""

    def __init__(self, message: GoAway) -> None:
        super().__init__(message.detail)
        self.reason = message.reason
        self.detail = message.detail
