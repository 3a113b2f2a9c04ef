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

from bor_client import AsyncClient, ClientError, RpcError
from bor_client.errors import Busy
from bps import merkle
from bps.directory import Directory, Topic
from bps.errors import BpsError
from bps.streams import Streams, Survey, stream_name
from chain.core.execution.actions import Call
from chain.core.primitives.crypto import PrivateKey

log = logging.getLogger("bps.anchorer")
MAX_ANCHOR = 100_000  # messages one anchor covers at most
READ_BATCH = 1000
MAX_BATCH = 200  # anchor transactions pushed in one request
MAX_ACTIONS = 16  # assign actions in one transaction
PARALLEL = 8  # partitions read and anchored at once (JetStream's API, the node's RPC)
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
                log.warning("anchoring round failed: %s", str(err) or repr(err))
            await asyncio.sleep(self.interval_s)

    async def round(self) -> None:
        """Survey the streams (one request), take or let go of partitions as leadership
        moved, read what each led partition received since (only those that received
        something, a few at a time), then anchor all that have new leaves in one batch of
        transactions (one each, so that one refusal sinks no other), answered on admission:
        the next round chains on without waiting for the block, and an anchor that never
        lands makes the contract refuse its successor, which sends the partition back to the
        chain's last anchor."""
        survey = await self.streams.survey()
        await self.check_leaders(survey)
        slots = asyncio.Semaphore(PARALLEL)

        async def read(state: Partition, last: int) -> None:
            async with slots:
                await self.read(state, last)

        reads = []
        for state in self.led.values():
            seen = survey.get(stream_name(state.topic.id, state.partition))
            if seen is not None and seen.last > state.last + len(state.leaves):
                reads.append(read(state, seen.last))
        await asyncio.gather(*reads)
        ready = [state for state in self.led.values() if state.leaves]
        for start in range(0, len(ready), MAX_BATCH):
            await self.push(ready[start : start + MAX_BATCH])

    async def check_leaders(self, survey: dict[str, Survey]) -> None:
        """Take the partitions whose stream this broker's server now leads (reading each
        topic's partitions from the chain once, and recording the takeovers on the chain in
        one transaction), and let go of those it no longer leads."""
        for topic in list(self.directory.by_id.values()):
            await self.streams.ensure(topic)
            mine = set()
            for p in range(topic.partitions):
                seen = survey.get(stream_name(topic.id, p))
                if seen is not None and seen.leader == self.broker:
                    mine.add(p)
                else:
                    self.led.pop((topic.id, p), None)
            new = [p for p in sorted(mine) if (topic.id, p) not in self.led]
            if not new:
                continue
            parts = await self.directory.parts(topic.id)
            taken = [p for p in new if parts[p].broker != self.broker]
            for start in range(0, len(taken), MAX_ACTIONS):
                await self.client.push(
                    [await self.assign(topic, p) for p in taken[start : start + MAX_ACTIONS]]
                )
            for p in new:
                if p in taken:
                    log.info("took over %s/%s:%d from %s", topic.tenant, topic.name, p,
                             parts[p].broker)  # fmt: skip
                part = parts[p]
                self.led[(topic.id, p)] = Partition(topic, p, part.last, part.head)

    async def assign(self, topic: Topic, p: int) -> Call:
        data = {"tenant": topic.tenant, "topic": topic.name, "partition": p, "broker": self.broker}
        return await self.client.contract("bps").action("assign", data, self.broker)

    async def read(self, state: Partition, last: int) -> None:
        """The leaves of what arrived since the last anchor (or since the last read), up to
        ``last``, the stream's last offset when surveyed: each fetch asks for what is there,
        so none waits on an empty partition."""
        topic, p = state.topic, state.partition
        try:
            start = state.last + 1 + len(state.leaves)
            while len(state.leaves) < MAX_ANCHOR and start <= last:
                want = min(READ_BATCH, last - start + 1, MAX_ANCHOR - len(state.leaves))
                got = await self.streams.get(topic.id, p, start, want)
                if not got or got[0].offset != start:
                    break  # nothing (a gap would mean aged-out messages: never anchored)
                for m in got:
                    if m.offset != start:
                        break
                    state.leaves.append(merkle.leaf(topic.id, p, m.offset, m.payload))
                    start += 1
        except RETRIED as err:
            log.warning("reading %s:%d failed: %s", topic.name, p, str(err) or repr(err))

    async def push(self, ready: list[Partition]) -> None:
        """One anchor transaction per partition, pushed as one batch. A busy node leaves a
        partition as it is for the next round; a refused anchor (the chain moved on without
        this broker) makes the next check read the chain again."""
        anchors = []
        for state in ready:
            first, last = state.last + 1, state.last + len(state.leaves)
            root = merkle.root(state.leaves)
            digest = merkle.anchor_digest(state.topic.id, state.partition, first, last, root,
                                          state.head)  # fmt: skip
            data = {
                "tenant": state.topic.tenant,
                "topic": state.topic.name,
                "partition": state.partition,
                "first": first,
                "last": last,
                "root": root.hex(),
                "prev": state.head.hex(),
                "signature": packed_signature(self.key, digest).hex(),
            }
            action = await self.client.contract("bps").action("anchor", data, self.broker)
            anchors.append(([action], last, digest))
        results = await self.client.push_many([a for a, _, _ in anchors], mode="sync")
        for state, (_, last, digest), result in zip(ready, anchors, results, strict=True):
            if not isinstance(result, RpcError):
                state.last, state.head, state.leaves = last, digest, []
                self.anchored += 1
            elif not isinstance(result, Busy):
                name, p = state.topic.name, state.partition
                log.warning("anchor of %s:%d refused, reading the chain again: %s", name, p,
                            result)  # fmt: skip
                self.led.pop((state.topic.id, p), None)  # the next round takes it again
