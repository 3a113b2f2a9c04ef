"""RdmaChannel beyond the common contract: chunking, credits, immediates, broken paths."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Awaitable, Callable

import pytest

from chain.actions import Transfer
from chain.block import BlockHeader, SignedBlock
from chain.crypto import PrivateKey
from chain.merkle import merkle_root
from chain.transaction import SignedTransaction, Transaction
from chain.types import AccountName, BlockId, BlockNum
from p2p.errors import ChannelBroken, ChannelClosed, MalformedMessage
from p2p.messages import BlockMessage, RawBlock, SyncRequest, TransactionMessage
from p2p.rdma.channel import RdmaChannel
from p2p.rdma.device import RdmaDevice, detect
from p2p.rdma.wire import immediate

Scenario = Callable[[RdmaChannel, RdmaChannel], Awaitable[None]]


def run(scenario: Scenario, slots: int = 4, slot_size: int = 4096) -> None:
    info = detect()
    if not info.available:
        if os.environ.get("BOR_RDMA_REQUIRED"):
            pytest.fail(f"RDMA required but unavailable: {info.reason}")
        pytest.skip(f"no RDMA here: {info.reason}")

    async def main() -> None:
        device = RdmaDevice(info, channels=2, slots=slots, slot_size=slot_size)
        device.start(asyncio.get_running_loop())
        a, b = RdmaChannel(device, "b"), RdmaChannel(device, "a")
        a.connect(b.endpoint())
        b.connect(a.endpoint())
        try:
            async with asyncio.timeout(60):
                await scenario(a, b)
        finally:
            await a.close()
            await b.close()
            device.close()

    asyncio.run(main())


def big_transaction(memo_bytes: int) -> TransactionMessage:
    key = PrivateKey(b"\x05" * 32)
    memo = "x" * min(memo_bytes, 256)
    actions = tuple(
        Transfer(AccountName("alice"), AccountName("bob"), i + 1, memo)
        for i in range(max(1, memo_bytes // 256))
    )
    tx = SignedTransaction.sign(Transaction(9, 1, 2, actions), b"c" * 32, [key])
    return TransactionMessage.of(tx)


def test_a_frame_larger_than_a_slot_travels_in_chunks() -> None:
    async def scenario(a: RdmaChannel, b: RdmaChannel) -> None:
        message = big_transaction(4096)  # 16 actions: five slots of 1 KiB, more than the ring
        assert len(message.raw) > 4 * 1024

        async def send_both() -> None:
            await a.send(message)
            await a.send(SyncRequest(1, 2))  # waits for the credits of the first

        sender = asyncio.create_task(send_both())
        assert await b.recv() == message
        assert await b.recv() == SyncRequest(1, 2)
        await sender
        assert a.writes >= 6 and b.bytes_received == a.bytes_sent
        assert a.inline_max > 0 and a.inline_writes >= 1, "the small request went inline"

    run(scenario, slots=4, slot_size=1024)


def test_credits_come_back_so_a_long_stream_never_stalls() -> None:
    async def scenario(a: RdmaChannel, b: RdmaChannel) -> None:
        count = 200  # fifty times the ring

        async def send_all() -> None:
            for i in range(count):
                await a.send(SyncRequest(i, i))

        sender = asyncio.create_task(send_all())
        assert [await b.recv() for _ in range(count)] == [SyncRequest(i, i) for i in range(count)]
        await sender

    run(scenario)


def test_an_unknown_immediate_is_a_malformed_stream() -> None:
    async def scenario(a: RdmaChannel, b: RdmaChannel) -> None:
        a._post_control(9, 0)
        with pytest.raises(MalformedMessage, match="unknown immediate"):
            await b.recv()
        assert b.closed
        assert immediate(9, 0) >> 28 == 9

    run(scenario)


def test_an_error_completion_breaks_the_channel() -> None:
    """A write the peer's device refuses (here: a wrong rkey, so a remote access error)
    completes in error, and the channel breaks instead of skipping it. (A peer that vanishes
    without a word is caught a level up, by the keepalive: tests/rdma/test_sync_over_rdma.)"""

    async def scenario(a: RdmaChannel, b: RdmaChannel) -> None:
        assert a._peer is not None
        a._peer = dataclasses.replace(a._peer, rkey=a._peer.rkey ^ 0x5A5A)
        with pytest.raises(ChannelBroken, match="completion error"):
            for _ in range(20):
                await a.send(SyncRequest(1, 2))
                await asyncio.sleep(0.1)
        with pytest.raises(ChannelClosed):
            await a.recv()

    run(scenario)


def block_with(transactions: int, num: int) -> RawBlock:
    key = PrivateKey(b"\x06" * 32)
    txs = tuple(
        SignedTransaction.sign(
            Transaction(9, 1, 2, (Transfer(AccountName("alice"), AccountName("bob"), i + 1, "m"),)),
            b"c" * 32,
            [key],
        )
        for i in range(transactions)
    )
    header = BlockHeader(
        BlockNum(num),
        BlockId(num.to_bytes(4, "big") + b"\x01" * 28),
        num,
        AccountName("pa"),
        0,
        merkle_root([t.id for t in txs]),
        b"\x02" * 32,
    )
    return RawBlock(SignedBlock.sign(header, txs, b"c" * 32, key).encode())


def test_a_range_is_written_straight_into_the_zone_its_request_named() -> None:
    """The requester's sync_request names its landing zone; the blocks of the range land
    there (wrapping around the zone, credited back as they are read), in order."""

    async def scenario(a: RdmaChannel, b: RdmaChannel) -> None:
        await a.send(SyncRequest(1, 12))
        assert await b.recv() == SyncRequest(1, 12), "above the channel it is a sync_request"
        blocks = [block_with(10, n) for n in range(1, 13)]
        assert all(1024 < len(x.raw) < 2048 for x in blocks), "two KiB units each"

        async def serve() -> None:
            for block in blocks:
                await b.send(block)

        server = asyncio.create_task(serve())
        for block in blocks:
            got = await a.recv()
            assert isinstance(got, BlockMessage) and got.raw == block.raw
        await server
        assert b.landed_bytes > sum(len(x.raw) for x in blocks), "all of it landed"

    run(scenario, slots=5, slot_size=1024)  # a 5 KiB zone: the third block skips its tail
