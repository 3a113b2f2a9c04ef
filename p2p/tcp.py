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
"""

from __future__ import annotations

import asyncio
import socket

from p2p.channel import Channel
from p2p.codec import HEADER_SIZE, MAX_FRAME_SIZE, decode_message, encode_frame, frame_length
from p2p.errors import ChannelBroken, ChannelClosed, MalformedMessage
from p2p.messages import Message, Outbound

# Enough for a few large blocks in flight to one peer; a slow peer then holds up only the
# tasks sending to it.
SEND_BUFFER_BYTES = 4 * 1024 * 1024

# A frame's time limit, from its first byte: a floor that covers a retransmission or two on a
# lossy link, plus 1 s per MiB (8 Mbit/s, the slowest link between consortium nodes we
# accept). The largest frame (8 MiB) gets 11 s.
FRAME_SECONDS = 3.0
MIN_BYTES_PER_SECOND = 1024 * 1024

_BROKEN = (ConnectionError, OSError, asyncio.IncompleteReadError)


class TcpChannel(Channel):
    transport = "tcp"

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
        except (TimeoutError, OSError) as err:
            raise ChannelBroken(f"cannot connect to {host}:{port}: {err}") from err
        return cls(reader, writer, max_frame)

    async def send(self, message: Outbound) -> None:
        frame = encode_frame(message)
        async with self._send_lock:
            if self._closed:
                raise ChannelClosed(f"channel to {self._remote} is closed")
            try:
                self._writer.write(frame)
                await self._writer.drain()
            except _BROKEN as err:
                await self.close()
                raise ChannelBroken(f"send to {self._remote} failed: {err}") from err
        self._sent += len(frame)

    async def recv(self) -> Message:
        if self._closed:
            raise ChannelClosed(f"channel to {self._remote} is closed")
        try:
            first = await self._reader.readexactly(1)
        except asyncio.IncompleteReadError as err:
            await self.close()
            raise ChannelClosed(f"{self._remote} closed the connection") from err
        except _BROKEN as err:
            await self.close()
            raise ChannelBroken(f"receive from {self._remote} failed: {err}") from err
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

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._writer.close()
        try:
            async with asyncio.timeout(2.0):
                await self._writer.wait_closed()
        except (TimeoutError, *_BROKEN):
            pass
