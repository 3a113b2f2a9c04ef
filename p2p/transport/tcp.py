"""``TcpChannel``: length-prefixed frames over asyncio streams, TCP_NODELAY set.

The send buffer is the stream's own, bounded by its high-water mark: ``send`` writes the
frame and waits in ``drain`` while more than ``SEND_BUFFER_BYTES`` are queued, which is the
back-pressure the contract asks for. Only one ``send`` writes at a time, so frames never
interleave.

Receiving is bounded in size and in time. A frame longer than ``max_frame`` is refused from
its header, before anything is buffered for it; the transport keeps ``max_frame`` small until
the peer has authenticated. A frame must also arrive whole within ``FRAME_SECONDS`` plus one
second per ``MIN_BYTES_PER_SECOND`` of its length, counted from its first byte, so a peer
that drips a frame slowly (slowloris) is cut off. Waiting for that first byte has no limit
here: an idle peer is the session's business (handshake timeout, keepalive).

Before the first frame, ``p2p.transport.tls`` exchanges a few raw bytes (``send_raw``, ``recv_raw``)
and may move the connection to TLS (``start_tls``); frames then travel inside TLS, through
the same ``send`` and ``recv``.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Sequence
from typing import cast

from p2p.errors import ChannelBroken, ChannelClosed, MalformedMessage
from p2p.transport.channel import Channel
from p2p.wire.codec import HEADER_SIZE, MAX_FRAME_SIZE, decode_message, encode_frame, frame_length
from p2p.wire.messages import Message, Outbound

# Enough for a few large blocks in flight to one peer; a slow peer then holds up only the
# tasks sending to it.
SEND_BUFFER_BYTES = 4 * 1024 * 1024

# A frame's time limit, from its first byte: a floor that covers a retransmission or two on a
# lossy link, plus 1 s per MiB (8 Mbit/s, the slowest link between consortium nodes we
# accept). The largest frame (8 MiB) gets 11 s.
FRAME_SECONDS = 3.0
MIN_BYTES_PER_SECOND = 1024 * 1024

_BROKEN = (ConnectionError, OSError, asyncio.IncompleteReadError)
# A TLS connection being closed whose close_notify cannot be flushed (the peer reads nothing)
# must not keep its buffers for asyncio's default 30 s (``close`` aborts it sooner anyway).
TLS_SHUTDOWN_SECONDS = 2.0
# How long ``close`` lets what is queued (and TLS's close_notify) flush before it aborts the
# connection. A peer across a cut link acknowledges nothing, so that flush never ends. A closed
# session needs nothing it queued to arrive except a final GoAway, which is small and first in
# line; 2 s carries it over a retransmission or two.
CLOSE_SECONDS = 2.0


class TcpChannel(Channel):
    transport = "tcp"
    _plaintext: asyncio.StreamWriter | None = None  # under TLS: the TCP stream's own writer

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_frame: int = MAX_FRAME_SIZE,
    ) -> None:
        peer = writer.get_extra_info("peername")
        super().__init__(f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer))
        self._reader = reader
        self._writer = writer
        self.max_frame = max_frame  # settable: the transport raises it after the handshake
        self._send_lock = asyncio.Lock()
        self._loop = asyncio.get_running_loop()
        self._due: float | None = None  # when the frame being received must be complete
        self._watchdog: asyncio.TimerHandle | None = None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        writer.transport.set_write_buffer_limits(high=SEND_BUFFER_BYTES)

    @classmethod
    async def connect(
        cls, host: str, port: int, timeout: float = 5.0, max_frame: int = MAX_FRAME_SIZE
    ) -> TcpChannel:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, port)
        except (TimeoutError, OSError, UnicodeError) as err:
            # UnicodeError: the resolver's idna codec refusing a label (over 63 characters,
            # or empty): a bad host name is a failed dial, never the end of the dial loop.
            raise ChannelBroken(f"cannot connect to {host}:{port}: {err}") from err
        return cls(reader, writer, max_frame)

    async def send(self, message: Outbound) -> None:
        frame = encode_frame(message)
        async with self._send_lock:
            if self._closed:
                raise ChannelClosed(f"channel to {self._remote} is closed")
            await self._write(frame)
        self._sent += len(frame)

    async def send_many(self, messages: Sequence[Outbound]) -> None:
        """The frames of ``messages`` in one write: with TLS, one record and one system call
        for a burst of small messages (transactions, announcements, votes) instead of one
        each, which cost a producer under load a seventh of its CPU."""
        data = b"".join([encode_frame(m) for m in messages])
        async with self._send_lock:
            if self._closed:
                raise ChannelClosed(f"channel to {self._remote} is closed")
            await self._write(data)
        self._sent += len(data)

    async def _write(self, data: bytes) -> None:
        """Write ``data`` and wait while the send buffer is over its high-water mark."""
        try:
            self._writer.write(data)
            await self._writer.drain()
        except _BROKEN as err:
            await self.close()
            raise ChannelBroken(f"send to {self._remote} failed: {err}") from err

    async def recv(self) -> Message:
        if self._closed:
            raise ChannelClosed(f"channel to {self._remote} is closed")
        first = await self.recv_raw(1)  # waiting for a frame to begin has no deadline
        due = self._frame_begins()
        try:
            header = first + await self._reader.readexactly(HEADER_SIZE - 1)
            kind, length = frame_length(header, self.max_frame)
            self._due = due + length / MIN_BYTES_PER_SECOND
            payload = await self._reader.readexactly(length)
            self._due = None
            message = decode_message(kind, payload)
        except MalformedMessage:
            await self.close()
            raise
        except TimeoutError as err:
            await self.close()
            raise ChannelBroken(str(err)) from err
        except _BROKEN as err:
            await self.close()
            raise ChannelBroken(f"{self._remote} closed mid-frame") from err
        self._received += HEADER_SIZE + length
        return message

    def _frame_begins(self) -> float:
        """Set the deadline of a frame whose first byte just came (returned), and make sure
        the watchdog looks at it in time. One timer per channel, re-armed when it fires, costs
        next to nothing per frame; a timer (or ``asyncio.timeout``) per frame measured 10-20 µs
        here, more than receiving a small frame takes."""
        self._due = due = self._loop.time() + FRAME_SECONDS
        watchdog = self._watchdog
        if watchdog is None or watchdog.when() > due:
            if watchdog is not None:
                watchdog.cancel()
            self._watchdog = self._loop.call_at(due, self._watch)
        return due

    def _watch(self) -> None:
        """Fail a frame that is overdue (its pending read raises TimeoutError); otherwise
        look again when the frame now in progress is due, or rest if none is."""
        self._watchdog = None
        due = self._due
        if due is None or self._closed:
            return
        if self._loop.time() < due:
            self._watchdog = self._loop.call_at(due, self._watch)
            return
        self._reader.set_exception(
            TimeoutError(f"{self._remote} too slow: a frame did not arrive whole in time")
        )

    def abort(self) -> None:
        """Close at once, dropping whatever is queued either way (a connection given up
        before its handshake: nothing of ours is worth flushing to it)."""
        if self._closed:
            return
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._writer.transport.abort()
        if self._plaintext is not None:
            self._plaintext.transport.abort()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._writer.close()  # under TLS: our close_notify, after what is already queued
        if self._plaintext is not None:
            # Then close TCP once that is flushed, as without TLS, instead of waiting for the
            # peer's close_notify (TLS 1.3 does not ask us to, RFC 8446 6.1). Waiting, a peer
            # still sending made the shutdown fail with an SSLError whose traceback held the
            # connection's TLS state (a 256 KiB buffer, OpenSSL's) in a reference cycle until
            # the garbage collector ran: the flood test's reconnecting strangers (8 MiB hellos
            # through TLS) grew a node from 60 to 150-320 MiB of RSS, to 74 MiB with this.
            self._plaintext.close()
        try:
            async with asyncio.timeout(CLOSE_SECONDS):
                await self._writer.wait_closed()
        except TimeoutError:
            # The flush did not finish (a cut link, a peer that reads nothing): drop what is
            # queued and the socket now, or the transport and its buffers stay until TCP gives
            # up, minutes later.
            self._writer.transport.abort()
            if self._plaintext is not None:
                self._plaintext.transport.abort()
        except _BROKEN:
            pass

    # --- before the first frame: the preamble and TLS (``p2p.transport.tls``)
    # ---------------------------

    async def send_raw(self, data: bytes) -> None:
        """Write ``data`` as is, outside any frame."""
        await self._write(data)

    async def recv_raw(self, size: int) -> bytes:
        """Read exactly ``size`` bytes with no deadline: the preamble, or a frame's first byte."""
        try:
            return await self._reader.readexactly(size)
        except asyncio.IncompleteReadError as err:
            await self.close()
            raise ChannelClosed(f"{self._remote} closed the connection") from err
        except _BROKEN as err:
            await self.close()
            raise ChannelBroken(f"receive from {self._remote} failed: {err}") from err

    async def start_tls(
        self,
        context: ssl.SSLContext,
        *,
        server_side: bool,
        timeout: float,
        preface: bytes = b"",
    ) -> None:
        """Run TLS on this connection from here on; raises ChannelBroken if TLS fails.

        ``preface`` is written in plaintext first, with reading already paused: whatever it
        prompts the peer to send (its ClientHello) stays in the socket for TLS to read
        instead of being taken into our plaintext buffer. TLS gets a fresh reader, so bytes
        that arrived before TLS and were not read are dropped, never taken as if they came
        from inside TLS."""
        loop = asyncio.get_running_loop()
        # A TCP stream's transport reads and writes (uvloop's does not subclass asyncio's).
        raw = cast(asyncio.Transport, self._writer.transport)
        raw.pause_reading()
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        try:
            if preface:
                raw.write(preface)
            tls = await loop.start_tls(
                raw,
                protocol,
                context,
                server_side=server_side,
                ssl_handshake_timeout=timeout,
                ssl_shutdown_timeout=TLS_SHUTDOWN_SECONDS,
            )
        except _BROKEN as err:  # ssl.SSLError is an OSError; a timeout a ConnectionError
            await self.close()
            raise ChannelBroken(f"TLS with {self._remote} failed: {err}") from err
        if tls is None:  # only when the transport was closed under us
            await self.close()
            raise ChannelBroken(f"TLS with {self._remote} failed: connection closed")
        # loop.start_tls does not call connection_made (the old protocol had it); the reader
        # needs the transport to pause reading when its buffer fills.
        protocol.connection_made(tls)
        tls.set_write_buffer_limits(high=SEND_BUFFER_BYTES)
        # Kept, not dropped: a StreamWriter closes its transport when collected (3.11), and
        # the plaintext writer's transport is the TCP connection TLS now runs over.
        self._plaintext = self._writer
        self._reader = reader
        self._writer = asyncio.StreamWriter(tls, protocol, reader, loop)

    @property
    def tls(self) -> ssl.SSLObject | None:
        """The TLS session, once ``start_tls`` has run."""
        session: ssl.SSLObject | None = self._writer.get_extra_info("ssl_object")
        return session
