"""RdmaChannel beyond the common contract: chunking, credits, immediates, broken paths."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Awaitable, Callable

import pytest

from chain.actions import Transfer
from chain.crypto import PrivateKey
from chain.transaction import SignedTransaction, Transaction
from chain.types import AccountName
from p2p.errors import ChannelBroken, ChannelClosed, MalformedMessage
from p2p.messages import SyncRequest, TransactionMessage
from p2p.rdma.channel import RdmaChannel, immediate
from p2p.rdma.device import RdmaDevice, detect

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
