"""TcpChannel's receive limits, against a raw socket on loopback that sends what it likes."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

import p2p.transport.tcp
from p2p.errors import ChannelBroken, ChannelClosed, OversizedFrame
from p2p.transport.tcp import TcpChannel
from p2p.wire.codec import HEADER_SIZE, encode_frame
from p2p.wire.messages import GoAway, GoAwayReason, Time
from tests.support.wait import hold_async, pace, until

GO_AWAY = encode_frame(GoAway(GoAwayReason.NO_REASON, b"n" * 32, "x" * 200))


@asynccontextmanager
async def raw_peer() -> AsyncIterator[tuple[TcpChannel, asyncio.StreamWriter]]:
    """Our channel, accepted on loopback, and the raw writer of the socket at the other end."""
    accepted: asyncio.Queue[TcpChannel] = asyncio.Queue()

    async def on_client(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await accepted.put(TcpChannel(r, w))

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    channel = await accepted.get()
    try:
        yield channel, writer
    finally:
        writer.transport.abort()
        await channel.close()
        server.close()


async def dribble(writer: asyncio.StreamWriter, data: bytes, seconds: float) -> None:
    """Send ``data`` one byte at a time over ``seconds``."""
    for i in range(len(data)):
        writer.write(data[i : i + 1])
        await pace(seconds / len(data))


def test_a_frame_over_the_limit_is_refused_from_its_header() -> None:
    """With max_frame lowered (as before a handshake), a frame announcing more is refused as
    soon as its header is in, without waiting for or buffering its body, and the channel is
    closed."""

    async def main() -> None:
        async with raw_peer() as (channel, writer):
            channel.max_frame = len(GO_AWAY) - HEADER_SIZE
            writer.write(GO_AWAY[:HEADER_SIZE])  # the header alone: the body never comes
            async with asyncio.timeout(1):
                with pytest.raises(OversizedFrame):
                    await channel.recv()
            assert channel.closed

    asyncio.run(main())


def test_a_raised_limit_admits_the_larger_frame() -> None:
    """max_frame is read per frame: raised after the handshake, the next frame may be larger."""

    async def main() -> None:
        async with raw_peer() as (channel, writer):
            channel.max_frame = 64
            writer.write(encode_frame(Time(1, 2, 3, 4)) + GO_AWAY)
            assert await channel.recv() == Time(1, 2, 3, 4)
            channel.max_frame = len(GO_AWAY)
            message = await channel.recv()
            assert isinstance(message, GoAway) and message.detail == "x" * 200

    asyncio.run(main())


def test_a_frame_dripped_slower_than_its_deadline_breaks_the_channel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A peer that starts a frame and drips it (slowloris) is cut off once the frame's time is
    up (the floor, as this frame is tiny), however many bytes it keeps sending."""
    monkeypatch.setattr(p2p.transport.tcp, "FRAME_SECONDS", 0.3)

    async def main() -> None:
        async with raw_peer() as (channel, writer):
            drip = asyncio.ensure_future(dribble(writer, GO_AWAY, 3.0))
            start = time.monotonic()
            with pytest.raises(ChannelBroken, match="too slow"):
                await channel.recv()
            assert 0.3 <= time.monotonic() - start < 1.0
            assert channel.closed
            drip.cancel()

    asyncio.run(main())


def test_a_started_header_must_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two bytes of a header and then silence: the channel breaks at the frame's deadline."""
    monkeypatch.setattr(p2p.transport.tcp, "FRAME_SECONDS", 0.3)

    async def main() -> None:
        async with raw_peer() as (channel, writer):
            writer.write(GO_AWAY[:2])
            async with asyncio.timeout(1):
                with pytest.raises(ChannelBroken, match="too slow"):
                    await channel.recv()

    asyncio.run(main())


def test_a_large_frame_gets_time_in_proportion_to_its_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A frame may take the floor plus its length at the minimum rate: a 250-byte frame at
    500 B/s has 0.2 + 0.5 s, so taking 0.45 s (beyond the floor) is fine."""
    monkeypatch.setattr(p2p.transport.tcp, "FRAME_SECONDS", 0.2)
    monkeypatch.setattr(p2p.transport.tcp, "MIN_BYTES_PER_SECOND", 500)

    async def main() -> None:
        async with raw_peer() as (channel, writer):
            writer.write(GO_AWAY[:HEADER_SIZE])
            drip = asyncio.ensure_future(dribble(writer, GO_AWAY[HEADER_SIZE:], 0.45))
            assert isinstance(await channel.recv(), GoAway)
            await drip

    asyncio.run(main())


def test_an_idle_channel_is_not_cut_between_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline runs from a frame's first byte: silence between frames (idle) is not the
    channel's business, so a frame after a long pause arrives."""
    monkeypatch.setattr(p2p.transport.tcp, "FRAME_SECONDS", 0.1)

    async def main() -> None:
        async with raw_peer() as (channel, writer):
            writer.write(encode_frame(Time(1, 0, 0, 0)))
            assert await channel.recv() == Time(1, 0, 0, 0)
            await hold_async(0.4, "a silence past the frame deadline, between frames")
            writer.write(encode_frame(Time(2, 0, 0, 0)))
            assert await channel.recv() == Time(2, 0, 0, 0)
            writer.close()
            with pytest.raises(ChannelClosed):
                await channel.recv()

    asyncio.run(main())


def test_a_close_that_cannot_flush_in_time_aborts_the_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A peer that takes nothing (as across a cut link) cannot hold a closed channel's
    connection: after ``CLOSE_SECONDS`` what is still queued is dropped and the socket closed,
    so the peer gets less than was queued, then the end of the stream."""
    monkeypatch.setattr(p2p.transport.tcp, "CLOSE_SECONDS", 0.3)
    queued = 64 << 20  # far more than the kernel's socket buffers hold

    async def main() -> None:
        accepted: asyncio.Queue[TcpChannel] = asyncio.Queue()

        async def on_client(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await accepted.put(TcpChannel(r, w))

        server = await asyncio.start_server(on_client, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        channel = await accepted.get()
        sending = asyncio.create_task(channel.send_raw(bytes(queued)))
        await until(
            lambda: channel._writer.transport.get_write_buffer_size() > 0,
            "the send stuck behind the full buffers",
        )
        started = time.monotonic()
        await channel.close()
        assert time.monotonic() - started < 1.0
        async with asyncio.timeout(1):  # and the send stuck behind them returns
            with contextlib.suppress(ChannelBroken):
                await sending
        got = 0
        async with asyncio.timeout(5):
            while chunk := await reader.read(1 << 20):
                got += len(chunk)
        assert got < queued, "the rest was dropped, not flushed later"
        writer.close()
        server.close()

    asyncio.run(main())
