"""A Channel pair in memory, for the logic above channels (switch, reactors) and the channel
contract suite: messages go through the real codec, so what arrives is what a TCP peer would
decode."""

from __future__ import annotations

import asyncio

from p2p.errors import ChannelClosed, MalformedMessage
from p2p.transport.channel import Channel
from p2p.wire.codec import decode_frame, encode_frame
from p2p.wire.messages import (
    Message,
    Outbound,
)

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
