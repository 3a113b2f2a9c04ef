"""Stand-ins for tests and benches: a Channel pair in memory, for the logic above channels
(and the contract suite); and a dialler that opens a real connection to a node up to its
first frame, for peers played by hand (hostile ones included)."""

from __future__ import annotations

import asyncio
import contextlib
import functools

from p2p.channel import Channel
from p2p.codec import decode_frame, encode_frame
from p2p.errors import ChannelBroken, ChannelClosed, MalformedMessage
from p2p.messages import Message, Outbound
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
