"""RdmaChannel beyond the common contract: chunking, credits, immediates, broken paths."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chain.core.consensus.block import BlockHeader, SignedBlock
from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.merkle import merkle_root
from chain.core.primitives.types import AccountName, BlockId, BlockNum
from p2p.errors import ChannelBroken, ChannelClosed, MalformedMessage
from p2p.rdma.channel import RdmaChannel
from p2p.rdma.device import RdmaDevice
from p2p.rdma.wire import Endpoint
from p2p.wire.codec import decode_frame, encode_frame
from p2p.wire.messages import (
    BlockMessage,
    RawBlock,
    RdmaSetup,
    RdmaStep,
    SnapshotChunk,
    SnapshotChunkRequest,
    SyncRequest,
    TransactionMessage,
)
from tests.rdma.test_device import device_info
from tests.support.wait import pace

Scenario = Callable[[RdmaChannel, RdmaChannel], Awaitable[None]]


def run(scenario: Scenario, slots: int = 4, slot_size: int = 4096) -> None:
    info = device_info()

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
    """A frame larger than a slot, and than the whole ring, arrives whole in chunks; a small frame
    after it goes inline."""

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
    """Two hundred messages through a four-slot ring arrive in order: credits come back and the
    sender never stalls."""

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
    """An immediate with an op we do not know makes recv raise MalformedMessage; the channel
    closes and lets go of its queue pair and region."""

    async def scenario(a: RdmaChannel, b: RdmaChannel) -> None:
        a._post_control(9, 0)
        # The op travels in the top four bits, in network byte order: 9 arrives as 0x9000_0000.
        with pytest.raises(MalformedMessage, match="unknown immediate 0x90000000"):
            await b.recv()
        assert b.closed
        assert b.qp is None and b._region in b.device._free_regions, "b let go of its QP"

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
                await pace(0.1)
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


def test_a_snapshot_chunk_is_written_straight_into_the_zone_its_request_named() -> None:
    """State sync's chunk request names the requester's landing zone too: the chunk lands
    there (not through the ring), and above the channel both are the plain messages."""

    async def scenario(a: RdmaChannel, b: RdmaChannel) -> None:
        block_id = BlockId(b"\x07" * 32)
        data = bytes(range(256)) * 12  # 3 KiB: 4 units of the 5 KiB zone with its header
        for index in range(4):  # the second wraps round the zone's tail
            await a.send(SnapshotChunkRequest(block_id, index))
            assert await b.recv() == SnapshotChunkRequest(block_id, index)
            landed = b.landed_bytes
            await b.send(SnapshotChunk(block_id, index, data))
            assert await a.recv() == SnapshotChunk(block_id, index, data)
            assert b.landed_bytes > landed + len(data), "the chunk landed in the zone"

    run(scenario, slots=5, slot_size=1024)


# --- endpoints: what a peer's rdma_setup may carry (pure: runs everywhere) --------------------

GID = "0000:0000:0000:0000:0000:ffff:0a4d:0001"
GOOD = (7, 99, GID, 3, 0x7F00_0000_1000, 0x1234, 32, 65536)

endpoints = st.builds(
    Endpoint,
    st.integers(0, 2**24 - 1),
    st.integers(0, 2**24 - 1),
    st.from_regex(r"[0-9a-f]{4}(:[0-9a-f]{4}){7}", fullmatch=True),
    st.integers(1, 5),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**32 - 1),
    st.integers(1, 0xFFFF),
    st.integers(5, 2**32 - 1),
)


# Generation is slow under the VM's emulation: fewer examples, no health check on speed.
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(endpoints)
def test_an_endpoint_survives_the_rdma_setup_message(endpoint: Endpoint) -> None:
    """Any endpoint verbs accept goes through an rdma_setup frame and back unchanged."""
    setup = decode_frame(encode_frame(RdmaSetup(RdmaStep.OFFER, endpoint.to_wire())))
    assert isinstance(setup, RdmaSetup)
    assert Endpoint.from_wire(setup.endpoint) == endpoint


def replaced(index: int, value: object) -> tuple[object, ...]:
    return (*GOOD[:index], value, *GOOD[index + 1 :])


MALFORMED = {
    "seven fields": GOOD[:7],
    "nine fields": (*GOOD, 1),
    "qp_num a string": replaced(0, "7"),
    "qp_num a boolean": replaced(0, True),
    "qp_num over 24 bits": replaced(0, 2**24),  # pyverbs: OverflowError
    "psn negative": replaced(1, -1),
    "gid an int": replaced(2, 17),
    "gid not 8 groups": replaced(2, "nonsense"),  # pyverbs: PyverbsUserError
    "gid not hex": replaced(2, "zzzz:0000:0000:0000:0000:ffff:0a4d:0001"),  # ValueError
    "mtu 0": replaced(3, 0),
    "mtu 6": replaced(3, 6),
    "addr over 64 bits": replaced(4, 2**64),
    "rkey over 32 bits": replaced(5, 2**32),
    "no slots": replaced(6, 0),
    "too many slots": replaced(6, 0x10000),
    "slot smaller than a header": replaced(7, 4),
}


@pytest.mark.parametrize("wire", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_endpoint_is_refused_before_it_reaches_verbs(wire: tuple[object, ...]) -> None:
    """A peer's endpoint with a field verbs would not take is a MalformedMessage, which the
    listening side answers with DECLINE, not a foreign error out of ``connect``."""
    Endpoint.from_wire(GOOD)
    with pytest.raises(MalformedMessage, match="bad RDMA endpoint"):
        Endpoint.from_wire(wire)


# --- connecting (Soft-RoCE VM) -----------------------------------------------------------------


def test_a_peer_ring_of_another_shape_is_refused_and_the_channel_stays_usable() -> None:
    """connect refuses a peer whose ring has other slots or slot size (the listening side
    then DECLINEs); the refused channel can still connect to a peer of its own shape."""

    async def main() -> None:
        device = RdmaDevice(device_info(), channels=2, slots=4, slot_size=4096)
        device.start(asyncio.get_running_loop())
        a, b = RdmaChannel(device, "b"), RdmaChannel(device, "a")
        try:
            ours = b.endpoint()
            for other in (
                dataclasses.replace(ours, slots=8),
                dataclasses.replace(ours, slot_size=8192),
            ):
                with pytest.raises(MalformedMessage, match="another shape"):
                    a.connect(Endpoint.from_wire(other.to_wire()))
            a.connect(b.endpoint())
            b.connect(a.endpoint())
            async with asyncio.timeout(30):
                await a.send(SyncRequest(3, 4))
                assert await b.recv() == SyncRequest(3, 4)
        finally:
            await a.close()
            await b.close()
            device.close()

    asyncio.run(main())
