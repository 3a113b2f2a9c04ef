"""Anchoring: the broker whose NATS server leads a partition's stream commits, block after
block, what the partition received since its last anchor: the Merkle root of the new
messages, linked to the previous anchor, signed with the broker's key.

Leadership is JetStream's: when a broker dies, its streams elect a leader among the others,
and that leader's sidecar takes the partition over on the chain (``assign``) and anchors on
from the chain's last anchor, reading the messages from the stream itself. So what is
anchored never depends on a sidecar's memory of what it was sent.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import nats.errors

from bor_client import AsyncClient, ClientError
from bps import merkle
from bps.directory import Directory, Topic
from bps.errors import BpsError
from bps.streams import Reader, Streams
from chain.core.primitives.crypto import PrivateKey

log = logging.getLogger("bps.anchorer")
MAX_ANCHOR = 100_000  # messages one anchor covers at most
READ_BATCH = 1000
# What a round meets when a broker dies or the cluster is forming: the next round tries again.
RETRIED = (BpsError, ClientError, OSError, TimeoutError, nats.errors.Error)


def packed_signature(key: PrivateKey, digest: bytes) -> bytes:
    """The signature as the contract's ``assert_recover_key`` takes it: Antelope's packed K1
    form (type byte 0, header 27 + 4 + recovery id, r, s)."""
    raw = key.sign(digest)
    return bytes([0, 27 + 4 + raw[64]]) + raw[:64]


@dataclass(slots=True)
class Partition:
    """One led partition: the chain's last anchor and the leaves read since."""

    topic: Topic
    partition: int
    last: int
    head: bytes
    reader: Reader
    leaves: list[bytes] = field(default_factory=list)


class Anchorer:
    def __init__(
        self,
        broker: str,
        key: PrivateKey,
        client: AsyncClient,
        directory: Directory,
        streams: Streams,
        interval_s: float = 0.5,
    ) -> None:
        self.broker = broker
        self.key = key
        self.client = client
        self.directory = directory
        self.streams = streams
        self.interval_s = interval_s
        self.led: dict[tuple[int, int], Partition] = {}
        self.anchored = 0

    async def run(self) -> None:
        while True:
            try:
                await self.round()
            except RETRIED as err:  # a cluster still forming, a stream without a leader
                log.warning("anchoring round failed: %s", err or type(err).__name__)
            await asyncio.sleep(self.interval_s)

    async def round(self) -> None:
        work = []
        for topic in list(self.directory.by_id.values()):
            await self.streams.ensure(topic)
            for p in range(topic.partitions):
                leader = await self.streams.leader(topic.id, p)
                state = self.led.get((topic.id, p))
                if leader != self.broker:
                    if state is not None:
                        await state.reader.close()
                        del self.led[(topic.id, p)]
                    continue
                work.append(self.anchor(topic, p, state))
        await asyncio.gather(*work)

    async def take(self, topic: Topic, p: int) -> Partition:
        """Start leading a partition from the chain's record of it."""
        part = (await self.directory.parts(topic.id))[p]
        if part.broker != self.broker:
            await self.client.contract("bps").push(
                "assign",
                {
                    "tenant": topic.tenant,
                    "topic": topic.name,
                    "partition": p,
                    "broker": self.broker,
                },
                self.broker,
            )
            log.info("took over %s/%s:%d from %s", topic.tenant, topic.name, p, part.broker)
        state = Partition(topic, p, part.last, part.head, Reader(self.streams.js, topic.id, p))
        self.led[(topic.id, p)] = state
        return state

    async def anchor(self, topic: Topic, p: int, state: Partition | None) -> None:
        try:
            if state is None:
                state = await self.take(topic, p)
            start = state.last + 1 + len(state.leaves)
            while len(state.leaves) < MAX_ANCHOR:
                got = await state.reader.read(start, READ_BATCH, 0.05)
                if not got or got[0].offset != start:
                    break  # nothing new (a gap would mean aged-out messages: never anchored)
                for m in got:
                    if m.offset != start:
                        break
                    state.leaves.append(merkle.leaf(topic.id, p, m.offset, m.payload))
                    start += 1
                if len(got) < READ_BATCH:
                    break
            if state.leaves:
                await self.push(state)
        except (TimeoutError, BpsError, ClientError, OSError) as err:
            log.warning("anchor of %s:%d failed, reading the chain again: %s", topic.name, p, err)
            if state is not None:
                await state.reader.close()
            self.led.pop((topic.id, p), None)

    async def push(self, state: Partition) -> None:
        first, last = state.last + 1, state.last + len(state.leaves)
        root = merkle.root(state.leaves)
        digest = merkle.anchor_digest(
            state.topic.id, state.partition, first, last, root, state.head
        )
        await self.client.contract("bps").push(
            "anchor",
            {
                "tenant": state.topic.tenant,
                "topic": state.topic.name,
                "partition": state.partition,
                "first": first,
                "last": last,
                "root": root.hex(),
                "prev": state.head.hex(),
                "signature": packed_signature(self.key, digest).hex(),
            },
            self.broker,
        )
        state.last, state.head, state.leaves = last, digest, []
        self.anchored += 1
