"""Peers played by hand against a real node, for the hostile-peer benches and tests: a dialler
that opens a real connection up to its first frame; a liar about its head; one that backs its
lie with a trickle of blocks that link to nothing; and a snapshot offerer that never answers.
They are tools of the test harness, not of the node, so they live beside the benches."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable

from chain.core.consensus.block import BlockHeader, SignedBlock
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName, BlockId, BlockNum, block_num_of
from p2p.errors import ChannelBroken, ChannelClosed, HandshakeFailed, MalformedMessage, P2PError
from p2p.transport.channel import Channel
from p2p.transport.tcp import TcpChannel
from p2p.transport.tls import TlsIdentity, negotiate
from p2p.wire.handshake import ChainPosition, make_handshake
from p2p.wire.messages import (
    PROTOCOL_VERSION,
    BlockMessage,
    GoAway,
    GoAwayReason,
    Hello,
    Message,
    Notice,
    SnapshotChunkRequest,
    SnapshotList,
    SnapshotListRequest,
    SnapshotManifestRequest,
    SnapshotOffer,
    SyncRequest,
    Time,
)

# --- a dialler played by hand ---------------------------------------------------------------


@functools.cache
def _dialler_identity() -> TlsIdentity:
    """The TLS identity hand-played diallers use: a dialler presents no certificate (only its
    client context is used), so one serves every connection, and each costs ~10 ms to make."""
    return TlsIdentity.generate()


async def dial(
    host: str, port: int, *, tls: bool = True, source: str | None = None, timeout: float = 5.0
) -> tuple[TcpChannel, bytes]:
    """Connect to a node (from address ``source``) and do what its dialler does before the
    first frame (``negotiated``). Raises ChannelBroken if the connection cannot be opened, and
    what ``negotiated`` raises."""
    try:
        async with asyncio.timeout(timeout):
            local = None if source is None else (source, 0)
            reader, writer = await asyncio.open_connection(host, port, local_addr=local)
    except (TimeoutError, OSError) as err:
        raise ChannelBroken(f"cannot connect to {host}:{port}: {err}") from err
    return await negotiated(reader, writer, tls=tls, timeout=timeout)


async def negotiated(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    tls: bool = True,
    timeout: float = 5.0,
) -> tuple[TcpChannel, bytes]:
    """On a connection we dialled, do what a node's dialler does before the first frame, with
    ``p2p.transport.tls.negotiate``: the preamble, then with ``tls`` TLS 1.3. Returns the channel,
    which then carries frames (or, with ``send_raw``, any bytes) inside TLS, and the binding a
    handshake on it must be signed over. Raises ChannelClosed (ChannelBroken) if the node
    refuses or closes the connection, HandshakeFailed if its preamble disagrees. Reading the
    node's preamble has no time limit here: wrap the call in one."""
    channel = TcpChannel(reader, writer)
    try:
        binding = await negotiate(channel, _dialler_identity() if tls else None, True, timeout)
    except BaseException:
        await channel.close()
        raise
    return channel, binding


async def until_closed(channel: Channel) -> None:
    """Receive (and drop) messages until the other end closes or breaks ``channel``."""
    with contextlib.suppress(ChannelClosed):
        while True:
            await channel.recv()


def refusal(message: Message) -> HandshakeFailed:
    if isinstance(message, GoAway):
        return HandshakeFailed(message.reason, message.detail)
    return HandshakeFailed(GoAwayReason.FATAL_OTHER, f"got {type(message).__name__}")


# --- a peer that lies about its head --------------------------------------------------------

CLAIM = 10**9  # the head and LIB a liar claims


class LyingPeer:
    """Claims head and LIB of ``CLAIM``, answers pings, serves nothing. It runs TLS as the
    node's default asks (a stranger can run TLS as well as anyone) and signs a valid handshake
    with its own key. One identity (node id and key) across its connections, so that a ban of
    it shows on its next dial; ``renew`` makes it someone new."""

    def __init__(self, chain_id: bytes, address: tuple[str, int]) -> None:
        self.chain_id = chain_id
        self.address = address
        self.renew()
        self.connected = threading.Event()
        self.sent_away: GoAway | None = None
        self.session_ended = threading.Event()
        self.sync_requests = 0
        self.heard_head = 0  # the node's head, as its notices and relayed blocks tell

    def renew(self) -> None:
        self.node_id = os.urandom(32)
        self.key = PrivateKey.generate()

    async def session(self) -> None:
        """One connection: handshake, then answer pings until sent away or closed."""
        channel, binding = await dial(*self.address)
        try:
            refused = await self._handshake(channel, binding)
            if refused is not None:
                self.sent_away = refused
                return
            self.connected.set()
            await self._talk(channel)
        except ChannelClosed:
            return
        finally:
            await channel.close()
            self.session_ended.set()

    async def _talk(self, channel: TcpChannel) -> None:
        """Answer pings until sent away."""
        while True:
            message = await channel.recv()
            if isinstance(message, GoAway):
                self.sent_away = message
                return
            if isinstance(message, Time) and message.xmt and not message.org:
                now = time.time_ns()
                await channel.send(Time(message.xmt, now, time.time_ns(), 0))
            elif isinstance(message, SyncRequest):
                self.sync_requests += 1
            elif isinstance(message, Notice) and len(message.ids) == 2:
                self.heard_head = max(self.heard_head, block_num_of(message.ids[0]))
            elif isinstance(message, BlockMessage):  # the node relays the blocks it makes
                self.heard_head = max(self.heard_head, message.block.num)

    def start(self) -> threading.Thread:
        """A session in a thread of its own."""
        self.connected.clear()
        self.session_ended.clear()
        thread = threading.Thread(target=asyncio.run, args=(self.session(),), daemon=True)
        thread.start()
        return thread

    def claim(self) -> ChainPosition:
        """The position the handshake claims."""
        return ChainPosition(CLAIM, _claimed_id(CLAIM), CLAIM, _claimed_id(CLAIM))

    async def _handshake(self, channel: TcpChannel, binding: bytes) -> GoAway | None:
        await channel.send(Hello(PROTOCOL_VERSION, self.chain_id, self.node_id, os.urandom(32)))
        hello = await channel.recv()
        if isinstance(hello, GoAway):
            return hello
        if not isinstance(hello, Hello):
            raise MalformedMessage(f"expected a hello, got {type(hello).__name__}")
        claim = self.claim()
        handshake = make_handshake(
            chain_id=self.chain_id,
            node_id=self.node_id,
            node_key=self.key,
            peer_nonce=hello.nonce,
            position=claim,
            p2p_address="",
            tls_binding=binding,
        )
        await channel.send(handshake)
        answer = await channel.recv()
        return answer if isinstance(answer, GoAway) else None


def _claimed_id(num: int) -> BlockId:
    return BlockId(num.to_bytes(4, "big") + os.urandom(28))


# --- a peer that backs its lie with blocks that link to nothing --------------------------------

TRICKLE_AHEAD = 50  # how far above the node's head a trickler claims its head to be


class TricklingPeer(LyingPeer):
    """Claims the node's LIB (a true one, so that the handshake is accepted) and a head
    ``TRICKLE_AHEAD`` above the node's, serves no range, and every ``every`` seconds sends a
    well-formed block, signed by its own key, numbered the node's head + 1 with a random
    parent: each one "delivers" into whatever range it was asked for, and none links.
    ``position`` reads the node's position (its public RPC tells it to anyone)."""

    def __init__(
        self,
        chain_id: bytes,
        address: tuple[str, int],
        position: Callable[[], ChainPosition],
        every: float = 1.0,
    ) -> None:
        super().__init__(chain_id, address)
        self.position = position
        self.every = every
        self.blocks_sent = 0

    def claim(self) -> ChainPosition:
        ours = self.position()
        self.heard_head = ours.head_num
        ahead = ours.head_num + TRICKLE_AHEAD
        return ChainPosition(ours.lib_num, ours.lib_id, ahead, _claimed_id(ahead))

    async def _talk(self, channel: TcpChannel) -> None:
        """Answer pings and trickle blocks, until sent away."""
        trickle = asyncio.create_task(self._trickle(channel))
        try:
            await super()._talk(channel)
        finally:
            trickle.cancel()
            with contextlib.suppress(asyncio.CancelledError, ChannelClosed):
                await trickle

    async def _trickle(self, channel: TcpChannel) -> None:
        while True:
            await asyncio.sleep(self.every)
            await channel.send(BlockMessage.of(self.random_block(self.heard_head + 1)))
            self.blocks_sent += 1

    def random_block(self, num: int) -> SignedBlock:
        """Block ``num``, well-formed and signed, whose parent is no block at all."""
        header = BlockHeader(
            num=BlockNum(num),
            previous=_claimed_id(num - 1),
            slot=int(time.time() * 2),
            producer=AccountName("producera"),
            schedule_version=0,
            tx_root=os.urandom(32),
            state_root=os.urandom(32),
        )
        return SignedBlock.sign(header, (), self.chain_id, self.key)


# --- a snapshot offerer that never answers --------------------------------------------------


class SilentOfferer(LyingPeer):
    """Offers ``offer`` (a snapshot of the block a state-syncing node trusts, under a root
    of the attacker's choosing) whenever asked for its list, and never answers a manifest or
    chunk request; ``haunt`` comes back after every session, banned or not."""

    def __init__(self, chain_id: bytes, address: tuple[str, int], offer: SnapshotOffer) -> None:
        super().__init__(chain_id, address)
        self.offer = offer
        self.manifest_requests = 0
        self.chunk_requests = 0
        self.dropped: list[GoAway] = []  # the go_aways that ended its sessions

    async def _talk(self, channel: TcpChannel) -> None:
        """Answer pings and list requests until sent away; ignore the rest."""
        while True:
            message = await channel.recv()
            if isinstance(message, GoAway):
                self.sent_away = message
                self.dropped.append(message)
                return
            if isinstance(message, Time) and message.xmt and not message.org:
                now = time.time_ns()
                await channel.send(Time(message.xmt, now, time.time_ns(), 0))
            elif isinstance(message, SnapshotListRequest):
                await channel.send(SnapshotList((self.offer,)))
            elif isinstance(message, SnapshotManifestRequest):
                self.manifest_requests += 1
            elif isinstance(message, SnapshotChunkRequest):
                self.chunk_requests += 1

    def haunt(self, stop: threading.Event, pause: float = 0.5) -> threading.Thread:
        """Sessions one after another (``pause`` apart, refused ones too) until ``stop``,
        in a thread of its own."""

        async def sessions() -> None:
            while not stop.is_set():
                with contextlib.suppress(P2PError, OSError):
                    await self.session()
                await asyncio.sleep(pause)

        thread = threading.Thread(target=asyncio.run, args=(sessions(),), daemon=True)
        thread.start()
        return thread
