"""``TcpChannel``: length-prefixed frames over asyncio streams, TCP_NODELAY set.

The send buffer is the stream's own, bounded by its high-water mark: ``send`` writes the
frame and waits in ``drain`` while more than ``SEND_BUFFER_BYTES`` are queued, which is the
back-pressure the contract asks for. Only one ``send`` writes at a time, so frames never
interleave.
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
        self._max_frame = max_frame
        self._send_lock = asyncio.Lock()
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
            header = await self._reader.readexactly(HEADER_SIZE)
        except asyncio.IncompleteReadError as err:
            await self.close()
            if not err.partial:
                raise ChannelClosed(f"{self._remote} closed the connection") from err
            raise ChannelBroken(f"{self._remote} closed mid-frame") from err
        except _BROKEN as err:
            await self.close()
            raise ChannelBroken(f"receive from {self._remote} failed: {err}") from err
        try:
            kind, length = frame_length(header, self._max_frame)
            payload = await self._reader.readexactly(length)
            message = decode_message(kind, payload)
        except MalformedMessage:
            await self.close()
            raise
        except _BROKEN as err:
            await self.close()
            raise ChannelBroken(f"{self._remote} closed mid-frame") from err
        self._received += HEADER_SIZE + length
        return message

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._writer.close()
        try:
            async with asyncio.timeout(2.0):
                await self._writer.wait_closed()
        except (TimeoutError, *_BROKEN):
            pass
