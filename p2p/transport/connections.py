"""The transport: listening, dialling with back-off, the handshake and the RDMA upgrade.

It is the only part of the peer layer that knows transports exist. Each connection it
accepts or dials is moved to TLS 1.3 unless ``p2p-tls = off`` (``p2p.transport.tls``), authenticated
here (``Hello``, then a ``Handshake`` signed over the peer's nonce and the TLS session:
``p2p.wire.handshake``), possibly moved to RDMA (``p2p.rdma.upgrade``), and handed
to the switch as a ``Connection`` whose channel is TCP or RDMA — above this module it does
not matter which. Admission decisions about authenticated peers (bans, limits, duplicates) are
the switch's: the transport asks its ``Gate`` at the right moments of the handshake.

Before a peer has authenticated it gets little. A new inbound connection waits for its
8-byte preamble in a waiting room (``max_waiting``, ``max_waiting_per_address``) for at most
``preamble_timeout``; when the room is full the oldest connection still waiting gives way.
With its preamble read it takes one of ``max_unauthenticated`` handshake slots (of which one
address holds ``max_unauthenticated_per_address``) and counts against ``max_per_address``,
or is closed unanswered if those are full. Frames are refused above ``HANDSHAKE_MAX_FRAME``,
and the handshake must finish within ``handshake_timeout_ms``. An honest dialler writes its
preamble as it connects, so strangers that drip theirs give way to each other rather than
lock honest peers out, as they would if every connection took a handshake slot on
arrival.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from chain.core.primitives.crypto import PrivateKey
from p2p.errors import ChannelBroken, ChannelClosed, HandshakeFailed, MalformedMessage
from p2p.rdma.upgrade import RdmaUpgrade
from p2p.service import ChainService
from p2p.transport.channel import Channel
from p2p.transport.switch import Connection, SessionEnd
from p2p.transport.tcp import TcpChannel
from p2p.transport.tls import TlsIdentity, negotiate
from p2p.wire.codec import HANDSHAKE_MAX_FRAME, MAX_FRAME_SIZE
from p2p.wire.handshake import AuthPolicy, check_handshake, check_hello, make_handshake
from p2p.wire.messages import PROTOCOL_VERSION, GoAway, GoAwayReason, Handshake, Hello

log = structlog.get_logger("p2p")

FIRST_REDIAL_SECONDS = 0.5  # doubles after each failed dial, to 30 s
MAX_REDIAL_SECONDS = 30.0
REFUSAL_LOG_SECONDS = 10.0  # refused inbound connections are logged as one count this often


# The preamble waiting room's size: also what the node keeps fds for (node.process.fds).
MAX_WAITING = 256


@dataclass(kw_only=True, slots=True)
class TransportConfig:
    # Made from options (node.config.model's p2p-*, declared there with their defaults) by
    # node.config.builders.transport_config.
    listen: tuple[str, int] | None
    p2p_server_address: str  # the address we tell peers to reach us at
    policy: AuthPolicy  # allowed-connection, peer-key
    handshake_timeout_ms: int
    max_unauthenticated: int  # inbound connections in their handshake (0: no limit)
    max_per_address: int  # inbound connections from one IP address (0: no limit)
    tls: TlsIdentity | None  # p2p-tls = on: TLS 1.3 on every connection (``p2p.transport.tls``)
    # Tuning, not options.
    rdma_probe_timeout: float = 5.0
    # Of the handshake slots, one address may hold this many: a host of strangers needs many
    # addresses to fill them all.
    max_unauthenticated_per_address: int = 4  # (0: no limit)
    # Connections waiting for their 8-byte preamble: a socket and a few bytes each. An honest
    # dialler writes its preamble as it connects, so it keeps its place unless this many
    # newer connections come before we read it: 32 per address let 26 of 26 honest
    # handshakes through 40 strangers dripping the preamble from the same address; room for
    # 4 let none through (given up, the strangers reconnect at once, ~450 times a second).
    max_waiting: int = MAX_WAITING
    max_waiting_per_address: int = 32
    # An honest dialler writes its preamble as it connects; 2 s is for a lossy link.
    preamble_timeout: float = 2.0


@dataclass(eq=False, slots=True)
class _Slot:
    host: str
    waiting: bool = True  # for its preamble: in the waiting room, not yet in a handshake slot
    handshaking: bool = False


@dataclass(slots=True)
class InboundCount:
    """Inbound connections being counted, by channel, in two tiers. A new connection enters
    the waiting room (``max_waiting``, ``max_waiting_per_address``), which never refuses: when
    full it gives up the oldest connection still waiting for its preamble. Once its preamble
    has come (``preamble_read``) a connection takes a handshake slot (``max_unauthenticated``,
    ``max_unauthenticated_per_address``) and counts against ``max_per_address`` until it is
    closed, or is refused if those are full. An honest dialler sends its preamble as it
    connects, so it needs its place in the waiting room for a moment only."""

    max_unauthenticated: int
    max_per_address: int
    max_unauthenticated_per_address: int = 0
    max_waiting: int = 0
    max_waiting_per_address: int = 0
    unauthenticated: int = 0
    per_address: dict[str, int] = field(default_factory=dict)
    unauthenticated_per_address: dict[str, int] = field(default_factory=dict)
    waiting: int = 0
    waiting_per_address: dict[str, int] = field(default_factory=dict)
    _slots: dict[TcpChannel, _Slot] = field(default_factory=dict)  # in order of arrival

    def __contains__(self, channel: object) -> bool:
        return channel in self._slots

    def make_room(self, host: str) -> TcpChannel | None:
        """The connection to give up for a new one from ``host``, if the waiting room is full:
        the oldest waiting, of ``host`` if it holds its share, of anyone otherwise."""
        cap = self.max_waiting_per_address
        if cap and self.waiting_per_address.get(host, 0) >= cap:
            return self._oldest_waiting(host)
        if self.max_waiting and self.waiting >= self.max_waiting:
            return self._oldest_waiting(None)
        return None

    def opened(self, channel: TcpChannel, host: str) -> None:
        self._slots[channel] = _Slot(host)
        self.waiting += 1
        _add(self.waiting_per_address, host, 1)

    def preamble_read(self, channel: TcpChannel) -> str | None:
        """Move ``channel`` to a handshake slot; or say why it is refused (and count it out)."""
        slot = self._slots[channel]
        host = slot.host
        self._leave_waiting(slot)
        refusal = None
        if self.max_per_address and self.per_address.get(host, 0) >= self.max_per_address:
            refusal = "too many connections from this address"
        elif self.max_unauthenticated and self.unauthenticated >= self.max_unauthenticated:
            refusal = "too many unauthenticated connections"
        else:
            cap = self.max_unauthenticated_per_address
            if cap and self.unauthenticated_per_address.get(host, 0) >= cap:
                refusal = "too many unauthenticated connections from this address"
        if refusal is not None:
            del self._slots[channel]
            return refusal
        slot.handshaking = True
        self.unauthenticated += 1
        _add(self.unauthenticated_per_address, host, 1)
        _add(self.per_address, host, 1)
        return None

    def handshake_over(self, channel: TcpChannel) -> None:
        """The handshake is over (whether or not it succeeded)."""
        slot = self._slots.get(channel)
        if slot is not None and slot.handshaking:
            slot.handshaking = False
            self.unauthenticated -= 1
            _add(self.unauthenticated_per_address, slot.host, -1)

    def closed(self, channel: TcpChannel) -> None:
        """The connection is gone (or given up for another: counted out at once)."""
        slot = self._slots.get(channel)
        if slot is None:
            return
        counted = not slot.waiting  # past its preamble: it counts against its address
        self._leave_waiting(slot)
        self.handshake_over(channel)
        del self._slots[channel]
        if counted:
            _add(self.per_address, slot.host, -1)

    def _leave_waiting(self, slot: _Slot) -> None:
        if slot.waiting:
            slot.waiting = False
            self.waiting -= 1
            _add(self.waiting_per_address, slot.host, -1)

    def _oldest_waiting(self, host: str | None) -> TcpChannel | None:
        for channel, slot in self._slots.items():
            if slot.waiting and (host is None or slot.host == host):
                return channel
        return None


def _add(counts: dict[str, int], host: str, step: int) -> None:
    left = counts.get(host, 0) + step
    if left:
        counts[host] = left
    else:
        counts.pop(host, None)


class Gate(Protocol):
    """The switch's side of a connection: admission, then the session itself."""

    def check_hello(self, node_id: bytes, dialed: bool) -> None: ...

    async def admit(self, node_id: bytes, dialed: bool) -> None: ...

    async def serve(self, conn: Connection) -> SessionEnd: ...


class Transport:
    def __init__(
        self,
        config: TransportConfig,
        node_id: bytes,
        node_key: PrivateKey,
        chain: ChainService,
        gate: Gate,
        rdma: RdmaUpgrade | None = None,
    ) -> None:
        self.config = config
        self.node_id = node_id
        self.node_key = node_key
        self.chain = chain
        self.gate = gate
        self.rdma = rdma
        self.listen_port: int | None = None
        self._server: asyncio.Server | None = None
        self._tg: asyncio.TaskGroup | None = None
        # Set while ``run``'s task group is open (``dial`` works), so that whoever needs that
        # waits for it instead of polling.
        self.started = asyncio.Event()
        self._dialing: set[tuple[str, int]] = set()
        self._connected: set[tuple[str, int]] = set()
        self._errors: dict[tuple[str, int], str] = {}  # why a dialled address is not connected
        self.inbound = InboundCount(
            config.max_unauthenticated,
            config.max_per_address,
            config.max_unauthenticated_per_address,
            config.max_waiting,
            config.max_waiting_per_address,
        )
        self._refused: dict[str, int] = {}  # refusals not logged yet, by reason
        self._refusals_logged = 0.0

    # --- lifecycle --------------------------------------------------------------------------

    async def listen(self) -> None:
        """Open the listening socket (raises OSError if the endpoint is taken)."""
        if self.config.listen is not None and self._server is None:
            host, port = self.config.listen
            self._server = await asyncio.start_server(self._on_inbound, host, port)
            self.listen_port = self._server.sockets[0].getsockname()[1]
            log.info("p2p_listening", address=f"{host}:{self.listen_port}")

    async def run(self, peers: list[tuple[str, int]]) -> None:
        """Accept and dial (``peers``, then whatever ``dial`` adds) until cancelled."""
        await self.listen()
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                self.started.set()
                for address in peers:
                    self.dial(address)
                await asyncio.Event().wait()
        finally:
            self._tg = None
            self.started.clear()
            if self._server is not None:
                self._server.close()

    def dial(self, address: tuple[str, int]) -> bool:
        """Dial ``address`` (and keep redialling it); False if already dialling it."""
        if address in self._dialing or self._tg is None:
            return False
        self._dialing.add(address)
        self._tg.create_task(self._dial_loop(address), name=f"dial-{address[0]}:{address[1]}")
        return True

    def forget(self, address: tuple[str, int]) -> None:
        """Stop redialling ``address`` (the operator disconnected it)."""
        self._dialing.discard(address)
        self._errors.pop(address, None)

    def status(self) -> list[dict[str, object]]:
        """Dialled addresses that are not connected, with the last error."""
        dialing: list[dict[str, object]] = [
            {"address": _where(a), "state": "dialing", "error": self._errors.get(a)}
            for a in sorted(self._dialing - self._connected)
        ]
        given_up: list[dict[str, object]] = [
            {"address": _where(a), "state": "given_up", "error": error}
            for a, error in sorted(self._errors.items())
            if error.startswith("refused") and a not in self._dialing
        ]
        return dialing + given_up

    # --- connecting -------------------------------------------------------------------------

    async def _on_inbound(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._tg is None:
            writer.transport.abort()
            return
        peer = writer.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        victim = self.inbound.make_room(host)
        if victim is not None:
            self.inbound.closed(victim)
            victim.abort()  # its pending read ends; its task finds it counted out already
            self._count_refusal("waiting room full: the oldest still owing its preamble given up")
        channel = TcpChannel(reader, writer)
        self.inbound.opened(channel, host)
        self._tg.create_task(self._inbound(channel), name=f"in-{channel.remote}")

    async def _inbound(self, channel: TcpChannel) -> None:
        try:
            await self._connection(channel, dialed=False)
        finally:
            self.inbound.closed(channel)

    def _preamble_read(self, channel: TcpChannel) -> None:
        """The preamble of an inbound connection came: it takes a handshake slot, or is
        closed, unanswered, if none is free."""
        if channel in self.inbound:
            refusal = self.inbound.preamble_read(channel)
            if refusal is not None:
                self._count_refusal(refusal)
                raise _Refused(refusal)

    def _count_refusal(self, reason: str) -> None:
        """Refusals come in floods: log the first, then how many there were since, at most
        every ``REFUSAL_LOG_SECONDS``."""
        self._refused[reason] = self._refused.get(reason, 0) + 1
        now = time.monotonic()
        if now - self._refusals_logged >= REFUSAL_LOG_SECONDS:
            log.warning("inbound_refused", counts=self._refused)
            self._refused = {}
            self._refusals_logged = now

    async def _dial_loop(self, address: tuple[str, int]) -> None:
        delay = FIRST_REDIAL_SECONDS
        host, port = address
        where = _where(address)
        while address in self._dialing:  # ``forget`` takes it out
            try:
                channel = await TcpChannel.connect(host, port)
            except ChannelBroken as err:
                self._errors[address] = str(err)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_REDIAL_SECONDS)
                continue
            if address not in self._dialing:
                await channel.close()
                return
            connected, reason = await self._connection(channel, dialed=True, address=address)
            if reason is not None:
                self._errors[address] = f"refused: {reason.name}"
            if reason is not None and not reason.retry and reason != GoAwayReason.DUPLICATE:
                log.warning("peer_refused_for_good", address=where, reason=reason.name)
                self._dialing.discard(address)
                return
            delay = FIRST_REDIAL_SECONDS if connected else min(delay * 2, MAX_REDIAL_SECONDS)
            await asyncio.sleep(delay)

    async def _connection(
        self, channel: TcpChannel, dialed: bool, address: tuple[str, int] | None = None
    ) -> tuple[bool, GoAwayReason | None]:
        """Handshake, then hand the session to the switch: (whether the handshake succeeded,
        the go_away reason that ended it, if any)."""
        channel.max_frame = HANDSHAKE_MAX_FRAME  # a stranger gets no 8 MiB buffer
        try:
            limit = self.config.handshake_timeout_ms / 1000
            if self.rdma is not None:
                limit += self.config.rdma_probe_timeout
            async with asyncio.timeout(limit):
                conn = await self._handshake(channel, dialed, address)
        except HandshakeFailed as err:
            refusal = GoAwayReason(err.reason)
            log.info("peer_refused", remote=channel.remote, reason=refusal.name, why=err.detail)
            with contextlib.suppress(ChannelClosed):
                await channel.send(GoAway(refusal, self.node_id, err.detail))
            await channel.close()
            return False, refusal
        except _Refused:
            channel.abort()  # nothing sent, nothing left to linger
            return False, None
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
        finally:
            if not dialed:
                self.inbound.handshake_over(channel)
        channel.max_frame = MAX_FRAME_SIZE
        if address is not None:
            self._errors.pop(address, None)
            self._connected.add(address)
        try:
            end = await self.gate.serve(conn)
        finally:
            if address is not None:
                self._connected.discard(address)
            await channel.close()
        if self.rdma is not None and conn.channel is not channel and (end.silent or end.broken):
            # The RDMA path failed under a live session: TCP with this node for a while.
            self.rdma.failed(conn.node_id, "silent" if end.silent else "channel broke")
        return True, end.reason

    async def _handshake(
        self, channel: Channel, dialed: bool, address: tuple[str, int] | None
    ) -> Connection:
        assert isinstance(channel, TcpChannel), "connections start on TCP"
        tcp = channel
        tls_binding = await negotiate(
            tcp,
            self.config.tls,
            dialed,
            self.config.handshake_timeout_ms / 1000,
            preamble_timeout=self.config.preamble_timeout,
            preamble_read=lambda: self._preamble_read(tcp),
        )
        chain_id = self.chain.chain_id
        nonce = os.urandom(32)
        await channel.send(Hello(PROTOCOL_VERSION, chain_id, self.node_id, nonce))
        hello = await channel.recv()
        if isinstance(hello, GoAway):
            raise _WentAway(hello)
        if not isinstance(hello, Hello):
            raise HandshakeFailed(GoAwayReason.FATAL_OTHER, "expected hello")
        check_hello(hello, chain_id, self.node_id)
        self.gate.check_hello(hello.node_id, dialed)
        position = self.chain.position()
        rdma_offered = self.rdma is not None and self.rdma.offered(hello.node_id)
        await channel.send(
            make_handshake(
                chain_id=chain_id,
                node_id=self.node_id,
                node_key=self.node_key,
                peer_nonce=hello.nonce,
                position=position,
                p2p_address=self.config.p2p_server_address,
                rdma=rdma_offered,
                tls_binding=tls_binding,
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
            chain_id=chain_id,
            policy=self.config.policy,
            producer_keys=self.chain.producer_keys(),
            our_lib=position.lib_num,
            our_id_at=lambda num: ours,
            tls_binding=tls_binding,
        )
        await self.gate.admit(hs.node_id, dialed)
        if self.rdma is not None and rdma_offered and hs.rdma:
            channel = await self.rdma.upgrade(channel, hs.node_id, dialed)
        return Connection(channel, hs.node_id, hs, dialed, address)


def _where(address: tuple[str, int]) -> str:
    return f"{address[0]}:{address[1]}"


class _Refused(Exception):
    """No handshake slot for an inbound connection: it is closed without a word."""


class _WentAway(Exception):
    """The peer sent go_away during the handshake."""

    def __init__(self, message: GoAway) -> None:
        super().__init__(message.detail)
        self.reason = message.reason
        self.detail = message.detail
