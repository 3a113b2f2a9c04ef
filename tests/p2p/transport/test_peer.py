"""A peer's outbox: bounded in messages and in bytes, gossip dropped and served blocks
waiting when it is full, a replaced range's blocks taken out, and nothing kept at the end."""

from __future__ import annotations

import asyncio

from p2p.transport.peer import SMALL_MESSAGE_BYTES, Outbox, wire_size
from p2p.wire.messages import RawBlock, SyncRequest, Time
from tests.support.wait import settle

MIB = 1024 * 1024


def block(size: int) -> RawBlock:
    return RawBlock(bytes(size))


def test_wire_size_counts_a_block_s_bytes_and_a_small_message_as_a_small_bound() -> None:
    """A served block counts its bytes; a message without bulk counts SMALL_MESSAGE_BYTES."""
    assert wire_size(block(MIB)) == MIB + SMALL_MESSAGE_BYTES
    assert wire_size(SyncRequest(1, 2)) == SMALL_MESSAGE_BYTES


def test_offers_beyond_the_byte_bound_are_dropped_though_few_messages_wait() -> None:
    """Three 1 MiB blocks in a 2.5 MiB outbox: the third is refused, with 2 of 2,000
    messages queued; the bytes counted go back to zero as the writer takes them."""
    box = Outbox(max_messages=2000, max_bytes=5 * MIB // 2)
    assert box.offer(block(MIB)) and box.offer(block(MIB))
    assert not box.offer(block(MIB))
    assert box.qsize() == 2 and box.bytes == 2 * wire_size(block(MIB))
    box.get_nowait()
    box.get_nowait()
    assert box.bytes == 0 and box.empty()


def test_a_message_bigger_than_the_bound_goes_through_an_empty_outbox_alone() -> None:
    """No message is unsendable: an 8 MiB block fits an empty 1 MiB outbox, and nothing
    fits beside it."""
    box = Outbox(max_bytes=MIB)
    assert box.offer(block(8 * MIB))
    assert not box.offer(Time(0, 0, 1, 0))


def test_put_waits_for_room_in_bytes_and_goes_on_when_the_writer_takes_some() -> None:
    """A served block waits while the outbox holds its byte bound and is queued as soon as
    the writer takes a message out."""

    async def main() -> None:
        box = Outbox(max_bytes=2 * MIB)
        await box.put(block(MIB))
        waiting = asyncio.ensure_future(box.put(block(3 * MIB // 2)))
        await settle()
        assert not waiting.done() and box.qsize() == 1
        await box.get()
        await asyncio.wait_for(waiting, 1)
        assert box.qsize() == 1 and box.bytes == wire_size(block(3 * MIB // 2))

    asyncio.run(main())


def test_discard_takes_out_one_kind_and_frees_its_bytes_for_a_waiting_put() -> None:
    """A replaced range's blocks leave the outbox, other messages stay in order, and a put
    waiting for room goes on."""

    async def main() -> None:
        box = Outbox(max_bytes=2 * MIB)
        await box.put(Time(0, 0, 1, 0))
        await box.put(block(MIB))
        waiting = asyncio.ensure_future(box.put(block(MIB)))
        await settle()
        assert not waiting.done()
        assert box.discard(RawBlock) == wire_size(block(MIB))
        await asyncio.wait_for(waiting, 1)
        assert box.get_nowait() == Time(0, 0, 1, 0)
        assert isinstance(box.get_nowait(), RawBlock) and box.bytes == 0

    asyncio.run(main())


def test_clear_drops_everything_queued() -> None:
    """At a session's end nothing queued is kept and no bytes stay counted."""
    box = Outbox()
    for _ in range(5):
        box.offer(block(MIB))
    box.clear()
    assert box.empty() and box.bytes == 0


def test_a_burst_takes_the_oldest_messages_within_its_bounds_in_order() -> None:
    """``take_burst`` takes messages oldest first while each fits the bytes left and the
    count allows, stops at the first that does not fit, and frees their bytes."""
    box = Outbox(max_messages=100, max_bytes=1 << 30)
    small = [Time(i, 0, 0) for i in range(5)]
    for message in small[:3]:
        box.offer(message)
    block = RawBlock(bytes(10_000))
    box.offer(block)
    for message in small[3:]:
        box.offer(message)
    assert box.take_burst(1 << 20, 2) == small[:2]
    assert box.take_burst(5_000, 10) == small[2:3], "stops before the block that does not fit"
    assert box.take_burst(100, 10) == []
    assert box.qsize() == 3 and box.bytes == wire_size(block) + 2 * SMALL_MESSAGE_BYTES
