"""Stand-ins for tests and benches: a Channel pair in memory, for the logic above channels
(and the contract suite); a dialler that opens a real connection to a node up to its
first frame, for peers played by hand; and one such peer, a liar about its head."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import time

from chain.crypto import PrivateKey
from chain.types import BlockId
from p2p.channel import Channel
from p2p.codec import decode_frame, encode_frame
from p2p.errors import ChannelBroken, ChannelClosed, MalformedMessage
from p2p.handshake import ChainPosition, make_handshake
from p2p.messages import (
    PROTOCOL_VERSION,
    GoAway,
    Hello,
    Message,
    Outbound,
    SyncRequest,
    Time,
)
from p2p.tcp import TcpChannel
from p2p.tls import TlsIdentity, negotiate

_EOF = b""


class MemoryChannel(Channel):
    """One end of an in-memory pair. Messages go through the real codec, so what arrives is
    exactly what a TCP peer would decode; the queue is bounded, so ``send`` back-pressures."""

    transport = "memory"

    def __init__(self, name: str, capacity: int) -> None:
        super().__init__("memory:?")
        self._name = name
        self._inbox: asyncio.Queue[bytes] = asyncio.Queue(capacity)
        self._peer: MemoryChannel | None = None

    @classmethod
    def pair(cls, capacity: int = 64) -> tuple[MemoryChannel, MemoryChannel]:
        a, b = cls("a", capacity), cls("b", capacity)
        a._peer, b._peer = b, a
        return a, b

    @property
    def remote(self) -> str:
        return f"memory:{self._peer._name if self._peer else '?'}"

    async def send(self, message: Outbound) -> None:
        if self._closed or self._peer is None or self._peer._closed:
            raise ChannelClosed("memory channel is closed")
        await self._peer._inbox.put(encode_frame(message))

    async def recv(self) -> Message:
        if self._closed:
            raise ChannelClosed("memory channel is closed")
        frame = await self._inbox.get()
        if frame == _EOF:
            self._closed = True
            raise ChannelClosed("peer closed the memory channel")
        try:
            return decode_frame(frame)
        except MalformedMessage:
            await self.close()
            raise

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        peer = self._peer
        if peer is not None and not peer._closed:
            while peer._inbox.full():  # make room for the end-of-stream marker
                peer._inbox.get_nowait()
            peer._inbox.put_nowait(_EOF)
        while not self._inbox.empty():
            self._inbox.get_nowait()
        self._inbox.put_nowait(_EOF)  # wakes our own pending recv


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
    ``p2p.tls.negotiate``: the preamble, then with ``tls`` TLS 1.3. Returns the channel, which
    then carries frames (or, with ``send_raw``, any bytes) inside TLS, and the binding a
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
        except ChannelClosed:
            return
        finally:
            await channel.close()
            self.session_ended.set()

    def start(self) -> threading.Thread:
        """A session in a thread of its own."""
        self.connected.clear()
        self.session_ended.clear()
        thread = threading.Thread(target=asyncio.run, args=(self.session(),), daemon=True)
        thread.start()
        return thread

    async def _handshake(self, channel: TcpChannel, binding: bytes) -> GoAway | None:
        await channel.send(Hello(PROTOCOL_VERSION, self.chain_id, self.node_id, os.urandom(32)))
        hello = await channel.recv()
        if isinstance(hello, GoAway):
            return hello
        if not isinstance(hello, Hello):
            raise MalformedMessage(f"expected a hello, got {type(hello).__name__}")
        claim = ChainPosition(CLAIM, _claimed_id(CLAIM), CLAIM, _claimed_id(CLAIM))
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
