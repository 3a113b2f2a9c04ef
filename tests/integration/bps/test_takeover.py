"""A broker killed with ``kill -9`` (its sidecar and its nats-server) while it leads a
partition under load: producers and consumers carry on through the other brokers, a consumer
that commits its offsets gets every acknowledged message exactly once, and another broker
takes the partition over on the chain and anchors on from where the dead one stopped."""

from __future__ import annotations

import asyncio
import time

from bps.audit import Audit
from tests.integration.bps.conftest import BROKERS, World, eventually

BATCH = 20


async def load(
    world: World, leader: str
) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]], float]:
    """Produce and consume (committing) through ``leader`` first; kill it midway. Returns the
    acknowledged and the consumed (offset, payload) pairs, and the seconds from the kill to
    the first acknowledgement after it."""
    acked: list[tuple[int, bytes]] = []
    consumed: list[tuple[int, bytes]] = []
    stop = asyncio.Event()
    produced = asyncio.Event()  # the producer's last batch is acknowledged
    killed: list[float] = []
    resumed: list[float] = []
    async with world.client("alice") as producer, world.client("alice") as consumer:
        producer.turn = consumer.turn = BROKERS.index(leader)

        async def produce() -> None:
            n = 0
            while not stop.is_set():
                payloads = [b"m%06d" % (n + k) for k in range(BATCH)]
                ids = [f"load-{n + k}" for k in range(BATCH)]
                offsets = await producer.produce("acme", "orders", payloads, 0, msg_ids=ids)
                if killed and not resumed:
                    resumed.append(time.monotonic())
                acked.extend(zip(offsets, payloads, strict=True))
                n += BATCH
            produced.set()

        async def consume() -> None:
            while True:
                got = await consumer.consume("acme", "orders", 0, "audit", 200, 100)
                consumed.extend((m.offset, m.payload) for m in got)
                if got:
                    await consumer.commit("acme", "orders", 0, "audit", got[-1].offset)
                elif produced.is_set() and consumed and consumed[-1][0] >= max(o for o, _ in acked):
                    return

        async def chaos() -> None:
            await asyncio.sleep(1.5)
            killed.append(time.monotonic())
            await asyncio.to_thread(world.kill, leader)
            await asyncio.sleep(4)
            stop.set()

        await asyncio.gather(produce(), consume(), chaos())
    return acked, consumed, resumed[0] - killed[0]


def test_kill_9_of_a_partitions_leader_under_load(world: World) -> None:
    """The leader of acme/orders:0 killed 1.5 s into a produce-and-consume load."""
    world.run("alice", lambda c: c.produce("acme", "orders", [b"warm-up"], 0))
    topic_id = world.run("alice", lambda c: c.topic("acme", "orders")).id
    leader = world.leader(topic_id, 0)
    acked, consumed, takeover_s = asyncio.run(load(world, leader))
    print(f"takeover: first acknowledgement {takeover_s:.2f} s after kill -9 of {leader}")
    assert len(acked) > 4 * BATCH
    offsets = [o for o, _ in consumed]
    assert len(offsets) == len(set(offsets)), "a message consumed twice"
    assert offsets == list(range(offsets[0], offsets[-1] + 1)), "a gap in what was consumed"
    assert sorted(acked) == [c for c in consumed if c[0] >= acked[0][0]][: len(acked)]
    assert {p for _, p in acked} <= {p for _, p in consumed}

    def anchored_by_another() -> Audit:
        parts = world.run("alice", lambda c: c.directory.parts(topic_id))
        assert parts[0].broker != leader, parts[0]
        audit = world.run("alice", lambda c: c.audit("acme", "orders"))
        assert audit.covered.get(0) == max(o for o, _ in acked), audit
        return audit

    audit = eventually(anchored_by_another, 30, "partition 0 anchored on by another broker")
    assert audit.ok, audit.problems
