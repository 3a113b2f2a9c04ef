"""The switch: the set of connected peers, their sessions, limits and bans, and routing.

The transport hands the switch each authenticated connection (``serve``); the switch runs
the session — a reader that routes every message to the reactor owning its type, a writer
draining the peer's outbox (bounded in bytes, ``p2p.transport.peer.Outbox``) that drops a peer whose
socket takes nothing (``WRITE_SECONDS``), a keepalive that measures RTT and drops a silent
peer — and
tells each reactor when the peer comes and goes. Admission decisions the transport needs
during a handshake (banned? too many clients? already connected?) are the switch's too.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import structlog

from p2p.errors import (
    ChannelBroken,
    ChannelClosed,
    HandshakeFailed,
    MalformedMessage,
    OversizedFrame,
)
from p2p.transport.channel import Channel
from p2p.transport.peer import Peer, peer_id_of, wire_size
from p2p.transport.reactor import Reactor
from p2p.wire.messages import GoAway, GoAwayReason, Handshake, Outbound, Time

log = structlog.get_logger("p2p")

BAN_SECONDS = 10.0  # first ban; doubles with every further ban of the same node, to 10 min
MAX_BAN_SECONDS = 600.0
SEND_AWAY_SECONDS = 2.0  # a go_away that cannot be sent in this long is not sent
# A message must leave (into the channel's bounded send buffer) within this floor plus 1 s
# per MiB of it (the 8 Mbit/s floor of ``p2p.transport.tcp``'s receive deadline), or the peer is
# dropped: a peer whose socket accepts nothing would otherwise hold its session, and what
# was queued for it, for as long as it keeps asking.
WRITE_SECONDS = 10.0
WRITE_BYTES_PER_SECOND = 1024 * 1024
# Small messages queued behind the one being sent go with it in one write, up to these bounds.
BURST_BYTES = 64 * 1024
BURST_MESSAGES = 256


@dataclass(kw_only=True, slots=True)
class SwitchConfig:
    # An option (node.config.model's max-clients), declared there with its default.
    max_clients: int  # inbound peers at most (0: no limit)
    keepalive: float = 2.0  # seconds between pings; silent for 3 of them drops the peer


@dataclass(frozen=True, slots=True)
class Connection:
    """An authenticated connection, as the transport hands it over."""

    channel: Channel
    node_id: bytes
    handshake: Handshake
    dialed: bool
    address: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class SessionEnd:
    """How a session ended: the go_away reason the peer gave, and whether the channel went
    silent or broke underneath (the transport backs off RDMA with that node then)."""

    reason: GoAwayReason | None
    silent: bool
    broken: bool


class Switch:
    def __init__(self, node_id: bytes, config: SwitchConfig, reactors: Sequence[Reactor]) -> None:
        self.node_id = node_id
        self.config = config
        self.reactors = tuple(reactors)
        self._routes: dict[type, Reactor] = {}
        for reactor in self.reactors:
            reactor.bind(self)
            for kind in reactor.accepts:
                assert kind not in self._routes, f"{kind.__name__} has two owners"
                self._routes[kind] = reactor
        self._peers: dict[str, Peer] = {}
        self._bans: dict[bytes, tuple[float, int]] = {}
        self._tg: asyncio.TaskGroup | None = None
        # Set while ``run``'s task group is open (reactors may start peer tasks), so that
        # whoever needs that waits for it instead of polling.
        self.started = asyncio.Event()

    # --- PeerSet ---------------------------------------------------------------------------

    def peers(self) -> Iterable[Peer]:
        return self._peers.values()

    def get(self, peer_id: str) -> Peer | None:
        return self._peers.get(peer_id)

    def __len__(self) -> int:
        return len(self._peers)

    def punish(self, peer_id: str, reason: GoAwayReason, detail: str) -> None:
        peer = self._peers.get(peer_id)
        if peer is not None:
            self.ban(peer.node_id)
            self.send_away(peer_id, reason, detail)

    def send_away(self, peer_id: str, reason: GoAwayReason, detail: str) -> None:
        peer = self._peers.get(peer_id)
        if peer is not None and self._tg is not None:
            self._tg.create_task(self._send_away(peer, reason, detail), name=f"away-{peer_id}")

    # --- admission (asked by the transport during a handshake) -----------------------------

    def check_hello(self, node_id: bytes, dialed: bool) -> None:
        """Refuse a banned node, or an inbound one beyond ``max_clients``."""
        ban = self._bans.get(node_id)
        if ban is not None and ban[0] > time.monotonic():
            raise HandshakeFailed(GoAwayReason.BANNED, "banned for misbehaviour")
        inbound = sum(1 for p in self._peers.values() if not p.dialed)
        if not dialed and self.config.max_clients and inbound >= self.config.max_clients:
            raise HandshakeFailed(GoAwayReason.BENIGN_OTHER, "too many clients")

    async def admit(self, node_id: bytes, dialed: bool) -> None:
        """Both sides dialled each other: keep the connection dialled by the lower node id,
        refusing the other one (DUPLICATE) or replacing the session we had."""
        existing = self._peers.get(peer_id_of(node_id))
        if existing is None:
            return
        if dialed != (self.node_id < node_id):
            raise HandshakeFailed(GoAwayReason.DUPLICATE, "already connected")
        await self._send_away(existing, GoAwayReason.DUPLICATE, "replaced by a new connection")

    def ban(self, node_id: bytes) -> float:
        """Ban ``node_id`` for 10 s, doubling with each further ban, up to 10 min."""
        _, count = self._bans.get(node_id, (0.0, 0))
        seconds: float = min(BAN_SECONDS * 2**count, MAX_BAN_SECONDS)
        self._bans[node_id] = (time.monotonic() + seconds, count + 1)
        log.info("peer_banned", node=node_id.hex()[:16], seconds=seconds)
        return seconds

    # --- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Run every reactor until cancelled (or until one fails, which ends the switch)."""
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                self.started.set()
                for reactor in self.reactors:
                    tg.create_task(reactor.run(), name=type(reactor).__name__)
                await asyncio.Event().wait()
        finally:
            self._tg = None
            self.started.clear()
            for peer in list(self._peers.values()):
                await peer.channel.close()

    async def serve(self, conn: Connection) -> SessionEnd:
        """Run one peer's session to its end."""
        peer = Peer(conn.channel, conn.node_id, conn.handshake, conn.dialed, conn.address)
        self._peers[peer.id] = peer
        structlog.contextvars.bind_contextvars(peer=peer.id)
        hs = peer.handshake
        log.info(
            "peer_connected",
            remote=peer.channel.remote,
            head=hs.head_num,
            lib=hs.lib_num,
            direction="outbound" if peer.dialed else "inbound",
            transport=peer.channel.stats().transport,
        )
        for reactor in self.reactors:
            reactor.add_peer(peer)
        reason: GoAwayReason | None = None
        try:
            async with asyncio.TaskGroup() as tg:
                writer = tg.create_task(self._writer(peer))
                keepalive = tg.create_task(self._keepalive(peer))
                try:
                    reason = await self._reader(peer)
                finally:
                    writer.cancel()
                    keepalive.cancel()
        except* (_Silent, _NotReading):
            pass  # the keepalive or the writer ended the session: the reader was cancelled
        finally:
            if self._peers.get(peer.id) is peer:
                del self._peers[peer.id]
            for reactor in self.reactors:
                reactor.remove_peer(peer)
            peer.outbox.clear()  # what it never read goes now, not when the peer is collected
            await peer.channel.close()
            stats = peer.channel.stats()
            log.info(
                "peer_disconnected",
                reason=None if reason is None else reason.name,
                transport=stats.transport,
                bytes_received=stats.bytes_received,
                rdma_landed_bytes=stats.rdma_landed_bytes,
            )
        return SessionEnd(reason, peer.silent, isinstance(peer.broken, ChannelBroken))

    async def disconnect(self, peer_id: str) -> bool:
        """Send a peer away at the operator's request; False if it is not connected."""
        peer = self._peers.get(peer_id)
        if peer is None:
            return False
        await self._send_away(peer, GoAwayReason.NO_REASON, "disconnect requested")
        return True

    def status(self) -> list[dict[str, object]]:
        return [peer.info() for peer in self._peers.values()]

    # --- a session's tasks -----------------------------------------------------------------

    async def _reader(self, peer: Peer) -> GoAwayReason | None:
        """Receive and route until the channel ends; returns a go_away reason if sent one."""
        while True:
            try:
                message = await peer.channel.recv()
            except ChannelClosed as err:
                peer.broken = err
                return None
            except MalformedMessage as err:
                log.warning("malformed_message", why=str(err))
                self.ban(peer.node_id)
                return None
            peer.last_recv = time.monotonic()
            if isinstance(message, GoAway):
                log.info("peer_sent_us_away", reason=message.reason.name, why=message.detail)
                return message.reason
            if isinstance(message, Time):
                self._on_time(peer, message)
                continue
            reactor = self._routes.get(type(message))
            if reactor is not None:
                await reactor.receive(peer, message)
            # Anything else (a repeated hello, a request mode we do not serve) is harmless.

    def _on_time(self, peer: Peer, message: Time) -> None:
        now = time.time_ns()
        if message.org:
            peer.rtt = (now - message.org) / 1e9
        elif message.xmt:
            peer.offer(Time(message.xmt, now, time.time_ns(), 0))

    async def _writer(self, peer: Peer) -> None:
        with contextlib.suppress(ChannelClosed):
            while True:
                message = await peer.outbox.get()
                # Only small messages go in a burst: a big one (a block) goes alone, and one
                # too big for a frame is dropped alone (below).
                room = BURST_BYTES - wire_size(message)
                burst = [message, *peer.outbox.take_burst(room, BURST_MESSAGES - 1)]
                try:
                    async with asyncio.timeout(write_limit(burst)):
                        await peer.channel.send_many(burst)
                except TimeoutError:
                    log.info(
                        "peer_not_reading",
                        message=type(message).__name__,
                        queued_bytes=peer.outbox.bytes,
                    )
                    # No go_away: it would wait behind what the peer does not read.
                    raise _NotReading from None
                except OversizedFrame as err:
                    # Our bug, not the peer's (a block is bounded by the chain's
                    # max_block_bytes, below the frame limit): a channel frames a message
                    # before it writes a byte, so dropping it leaves the session whole.
                    log.error(
                        "outgoing_message_dropped",
                        message=type(message).__name__,
                        why=str(err),
                    )

    async def _keepalive(self, peer: Peer) -> None:
        interval = self.config.keepalive
        while True:
            peer.offer(Time(0, 0, time.time_ns(), 0))
            await asyncio.sleep(interval)
            if time.monotonic() - peer.last_recv > 3 * interval:
                log.info("peer_silent", seconds=round(time.monotonic() - peer.last_recv, 1))
                peer.silent = True
                await peer.channel.close()
                # Closing need not wake the reader: a TCP channel with bytes queued for a cut
                # link waits to flush them before it reports the end, which takes as long as
                # the kernel retransmits (minutes). Raising cancels the reader instead.
                raise _Silent

    async def _send_away(self, peer: Peer, reason: GoAwayReason, detail: str) -> None:
        log.info("sending_peer_away", peer=peer.id, reason=reason.name, why=detail)
        with contextlib.suppress(ChannelClosed, TimeoutError):
            async with asyncio.timeout(SEND_AWAY_SECONDS):
                await peer.channel.send(GoAway(reason, self.node_id, detail))
        await peer.channel.close()


def write_limit(burst: Sequence[Outbound]) -> float:
    """How long sending ``burst`` (in one write) may take before the peer counts as not
    reading."""
    return WRITE_SECONDS + sum(wire_size(m) for m in burst) / WRITE_BYTES_PER_SECOND


class _Silent(Exception):
    """The peer stopped answering keepalives; its session ends."""


class _NotReading(Exception):
    """The peer's socket took nothing for a message's write limit; its session ends."""
