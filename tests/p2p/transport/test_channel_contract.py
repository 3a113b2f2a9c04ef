"""The Channel contract, run against every implementation (memory fake, TCP and TCP inside
TLS on loopback, on asyncio's loop and on uvloop, which the node runs on; RDMA where there is
a device)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import pytest
import uvloop

from chain.core.consensus.block import BlockHeader, SignedBlock
from chain.core.consensus.qc import Vote
from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.merkle import merkle_root
from chain.core.primitives.types import AccountName, BlockId, BlockNum
from p2p.errors import ChannelClosed, MalformedMessage, OversizedFrame
from p2p.transport.channel import Channel
from p2p.transport.tcp import TcpChannel
from p2p.transport.tls import TlsIdentity, negotiate
from p2p.wire.codec import encode_frame
from p2p.wire.messages import (
    BlockMessage,
    GoAway,
    GoAwayReason,
    Handshake,
    Hello,
    IdListMode,
    Message,
    Notice,
    RdmaSetup,
    RdmaStep,
    Request,
    SyncRequest,
    Time,
    TransactionMessage,
    TxAnnounce,
    TxRequest,
    VoteMessage,
)
from tests.support.channels import MemoryChannel
from tests.support.wait import SLOWDOWN, settle, until, within

KEY = PrivateKey(b"\x07" * 32)
ID = BlockId(b"\x00\x00\x00\x05" + b"\x01" * 28)


def sample_messages() -> list[Message]:
    tx = SignedTransaction.sign(
        Transaction(9, 1, 2, (Transfer(AccountName("alice"), AccountName("bob"), 5, "m"),)),
        b"c" * 32,
        [KEY],
    )
    header = BlockHeader(
        BlockNum(5), ID, 10, AccountName("pa"), 0, merkle_root([tx.id]), b"\x02" * 32
    )
    block = SignedBlock.sign(header, (tx,), b"c" * 32, KEY)
    return [
        Hello(1, b"c" * 32, b"n" * 32, b"r" * 32),
        Handshake(
            1,
            b"c" * 32,
            b"n" * 32,
            KEY.public_key,
            KEY.sign(b"\x00" * 32),
            "h:1",
            3,
            ID,
            5,
            ID,
            "bor",
            1,
            True,
        ),
        GoAway(GoAwayReason.WRONG_CHAIN, b"n" * 32, "other chain"),
        Time(1, 2, 3, 0),
        Notice(IdListMode.CATCH_UP, 7, (ID,)),
        Request(IdListMode.CATCH_UP, (ID,)),
        SyncRequest(1, 100),
        BlockMessage.of(block),
        TransactionMessage.of(tx),
        TxAnnounce((tx.id,)),
        TxRequest((tx.id,)),
        VoteMessage(Vote.sign(b"c" * 32, ID, True, KEY)),
        RdmaSetup(RdmaStep.OFFER, (7, 99, "0000:0000:0000:0000:0000:ffff:0a4d:0001", 3), "x"),
    ]


@dataclass
class Pair:
    a: Channel
    b: Channel
    inject: Callable[[bytes], Awaitable[None]]  # raw bytes arriving at b


@asynccontextmanager
async def memory_pair() -> AsyncIterator[Pair]:
    a, b = MemoryChannel.pair(capacity=8)

    async def inject(raw: bytes) -> None:
        await b._inbox.put(raw)

    yield Pair(a, b, inject)
    await a.close()
    await b.close()


@asynccontextmanager
async def tcp_pair(tls: TlsIdentity | None = None) -> AsyncIterator[Pair]:
    accepted: asyncio.Queue[TcpChannel] = asyncio.Queue()

    async def on_connect(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        channel = TcpChannel(r, w)
        await negotiate(channel, tls, dialed=False, timeout=5)
        await accepted.put(channel)

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    a = await TcpChannel.connect("127.0.0.1", port)
    await negotiate(a, tls, dialed=True, timeout=5)
    b = await accepted.get()
    # A raw side door into b: a second connection whose bytes b's reader never sees is no
    # use, so inject through a's writer, bypassing the codec.

    async def inject(raw: bytes) -> None:
        a._writer.write(raw)
        await a._writer.drain()

    yield Pair(a, b, inject)
    await a.close()
    await b.close()
    server.close()
    await server.wait_closed()


@asynccontextmanager
async def rdma_pair() -> AsyncIterator[Pair]:
    """Two RdmaChannels on one device (the Soft-RoCE VM runs this; elsewhere it skips)."""
    from p2p.rdma.channel import RdmaChannel
    from p2p.rdma.device import RdmaDevice, detect

    info = detect()
    if not info.available:
        if os.environ.get("BOR_RDMA_REQUIRED"):
            pytest.fail(f"RDMA required but unavailable: {info.reason}")
        pytest.skip(f"no RDMA here: {info.reason}")
    device = RdmaDevice(info, channels=4, slots=8, slot_size=4096)
    device.start(asyncio.get_running_loop())
    a, b = RdmaChannel(device, "b"), RdmaChannel(device, "a")
    a.connect(b.endpoint())
    b.connect(a.endpoint())

    async def inject(raw: bytes) -> None:
        await a._send_frame(raw)  # bytes no honest peer would send

    try:
        yield Pair(a, b, inject)
    finally:
        await a.close()
        await b.close()
        device.close()


def tls_pair() -> AbstractAsyncContextManager[Pair]:
    """TCP channels that negotiated TLS 1.3 (``inject`` then writes inside TLS)."""
    return tcp_pair(TlsIdentity.generate())


PAIRS = {
    "memory": memory_pair,
    "tcp": tcp_pair,
    "tls": tls_pair,
    "tcp-uvloop": tcp_pair,
    "tls-uvloop": tls_pair,
    "rdma": rdma_pair,
}


def run(kind: str, scenario: Callable[[Pair], Awaitable[None]]) -> None:
    async def main() -> None:
        async with PAIRS[kind]() as pair:
            # The Soft-RoCE VM emulates its CPU: TLS there decrypts tens of times slower.
            await asyncio.wait_for(scenario(pair), 20 * SLOWDOWN)

    if kind.endswith("-uvloop"):
        uvloop.run(main())
    else:
        asyncio.run(main())


@pytest.fixture(params=sorted(PAIRS))
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_every_message_arrives_in_order_and_equal(kind: str) -> None:
    """Every message type sent over a channel arrives in order and equal to what was sent."""

    async def scenario(p: Pair) -> None:
        messages = sample_messages() * 3

        async def send_all() -> None:
            for m in messages:
                await p.a.send(m)

        sender = asyncio.create_task(send_all())
        assert [await p.b.recv() for _ in messages] == messages
        await sender

    run(kind, scenario)


def test_a_burst_sent_at_once_arrives_in_order_and_equal(kind: str) -> None:
    """Messages handed to ``send_many`` (the switch's bursts of small messages) arrive in
    order and equal to what was sent, interleaved rightly with single sends."""

    async def scenario(p: Pair) -> None:
        messages = sample_messages()
        burst = [m for m in messages if not isinstance(m, BlockMessage)] * 3

        async def send_all() -> None:
            await p.a.send(messages[0])
            await p.a.send_many(burst)
            await p.a.send(messages[-1])

        sender = asyncio.create_task(send_all())
        received = [await p.b.recv() for _ in range(len(burst) + 2)]
        await sender
        assert received == [messages[0], *burst, messages[-1]]

    run(kind, scenario)


def test_close_is_seen_by_the_peer_and_is_idempotent(kind: str) -> None:
    """After close (twice is harmless) the peer gets what was sent, then ChannelClosed; sending
    after close raises it too."""

    async def scenario(p: Pair) -> None:
        await p.a.send(SyncRequest(1, 2))
        await p.a.close()
        await p.a.close()
        assert await p.b.recv() == SyncRequest(1, 2)
        with pytest.raises(ChannelClosed):
            await p.b.recv()
        with pytest.raises(ChannelClosed):
            await p.a.send(SyncRequest(1, 2))
        assert p.a.closed

    run(kind, scenario)


def test_send_waits_while_the_receiver_does_not_read(kind: str) -> None:
    """Send blocks while the receiver does not read, and reading lets the sender go on."""

    async def scenario(p: Pair) -> None:
        big = sample_messages()[7]
        filler = BlockMessage(big.block, big.raw) if isinstance(big, BlockMessage) else big
        sent = 0

        async def flood() -> None:
            nonlocal sent
            for _ in range(100_000):
                await p.a.send(filler)
                sent += 1

        async def stalled() -> int:
            """How many were sent once a pass of the loop sends no more."""
            while True:
                before = sent
                await settle()
                if sent == before:
                    return sent

        task = asyncio.create_task(flood())
        stalled_at = await within(stalled(), "the sender stalled")
        assert not task.done(), "send must block when nobody reads"
        for _ in range(stalled_at):
            await p.b.recv()
        # Freed within seconds, however slow the machine (an emulated guest takes a while).
        await until(lambda: sent > stalled_at, "reading frees the sender", timeout=30)
        task.cancel()

    run(kind, scenario)


def test_malformed_bytes_raise_and_close(kind: str) -> None:
    """A frame of undecodable bytes makes recv raise MalformedMessage and closes the channel."""

    async def scenario(p: Pair) -> None:
        garbage = (5).to_bytes(4, "big") + bytes([2]) + b"\xc1\xc1\xc1\xc1"  # go_away of junk
        await p.inject(garbage)
        with pytest.raises(MalformedMessage):
            await p.b.recv()
        assert p.b.closed

    run(kind, scenario)


def test_oversized_frame_is_refused_from_its_header(kind: str) -> None:
    """A frame header announcing 2 GiB makes recv raise OversizedFrame with no body sent."""

    async def scenario(p: Pair) -> None:
        header = (2**31).to_bytes(4, "big") + bytes([7])
        await p.inject(header)
        with pytest.raises(OversizedFrame):
            await p.b.recv()

    run(kind, scenario)


def test_unknown_message_type(kind: str) -> None:
    """A frame with an unknown message type byte makes recv raise MalformedMessage."""

    async def scenario(p: Pair) -> None:
        await p.inject((2).to_bytes(4, "big") + bytes([99, 0]))
        with pytest.raises(MalformedMessage, match="unknown message type"):
            await p.b.recv()

    run(kind, scenario)


def test_a_frame_starts_with_the_length_of_the_rest() -> None:
    """Each message's frame starts with a 4-byte big-endian length of the rest of the frame."""
    for m in sample_messages():
        frame = encode_frame(m)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
