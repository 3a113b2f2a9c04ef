"""A broker's side of JetStream: one replicated stream per partition, publishing a batch,
reading from an offset, the stream's leader, and consumers' committed offsets.

A partition's offsets are its stream's sequence numbers (from 1), so an offset means the same
on every broker; the producer's message id goes in ``Nats-Msg-Id``, so a batch sent again
after a broker died is not stored twice (JetStream's de-duplication window).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass

import nats.errors
from nats.aio.client import Client as Nats
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, KeyValueConfig, StreamConfig
from nats.js.errors import KeyNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from bps.directory import Topic
from bps.errors import Unavailable

OFFSETS_BUCKET = "BPS_OFFSETS"
DEDUP_WINDOW_S = 120.0
READER_IDLE_S = 30.0
CONSUMER_CHECK_S = 5.0
AHEAD_WAIT_S = 0.05  # a read ahead waits this long for messages not yet stored
API_TIMEOUT_S = 10.0


def stream_name(topic_id: int, partition: int) -> str:
    return f"BPS_{topic_id}_{partition}"


def subject(topic_id: int, partition: int) -> str:
    return f"bps.{topic_id}.{partition}"


async def await_leader(js: JetStreamContext, name: str, timeout: float = API_TIMEOUT_S) -> None:
    """Return once stream ``name`` has a leader: a replicated stream just added takes no
    message until its servers have elected one (a publish meanwhile finds no responders).
    Each question is bounded by the time left, so the whole wait is ``timeout``."""
    deadline = time.monotonic() + timeout
    last = "not asked"
    while (left := deadline - time.monotonic()) > 0:
        try:
            async with asyncio.timeout(left):
                info = await js.stream_info(name)
        except (TimeoutError, nats.errors.Error) as err:  # asked again until the deadline
            last = str(err) or type(err).__name__
        else:
            if info.cluster is None or info.cluster.leader:
                return
            last = "none elected yet"
        await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    raise Unavailable(f"stream {name} has no leader after {timeout:g} s: {last}")


@dataclass(frozen=True, slots=True)
class Survey:
    """One partition's stream as the cluster's stream list shows it."""

    leader: str | None
    last: int


@dataclass(frozen=True, slots=True)
class Stored:
    """One message as the stream holds it."""

    offset: int
    msg_id: str
    payload: bytes


class Reader:
    """Reads one partition forwards from an offset; reading on from where it stopped reuses
    its JetStream consumer, reading from elsewhere makes a new one.

    With ``read_ahead``, a read that filled its limit asks for the next batch at once, in the
    background, so that a consumer reading on finds it here while its request crossed the
    network (a consumer's fetches otherwise wait for two round trips, the client's and
    JetStream's, one after the other). At most one batch is held ahead."""

    def __init__(
        self, js: JetStreamContext, topic_id: int, partition: int, read_ahead: bool = False
    ) -> None:
        self.js = js
        self.topic_id = topic_id
        self.partition = partition
        self.read_ahead = read_ahead
        self.next = 0
        self.sub: JetStreamContext.PullSubscription | None = None
        self.lock = asyncio.Lock()
        self.checked = time.monotonic()
        self.held: list[Stored] = []
        self.ahead: asyncio.Task[list[Stored]] | None = None

    async def read(self, start: int, limit: int, wait_s: float) -> list[Stored]:
        async with self.lock:
            return await self._read(start, limit, wait_s)

    async def _read(self, start: int, limit: int, wait_s: float) -> list[Stored]:
        if self.sub is None or start != self.next:
            await self.close()
            self.sub = await self.js.pull_subscribe(
                subject(self.topic_id, self.partition),
                stream=stream_name(self.topic_id, self.partition),
                config=ConsumerConfig(
                    deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                    opt_start_seq=start,
                    ack_policy=AckPolicy.NONE,
                    inactive_threshold=READER_IDLE_S,
                    mem_storage=True,
                    num_replicas=1,
                ),
            )
            self.next = start
        if not self.held and self.ahead is not None:
            task, self.ahead = self.ahead, None
            self.held = await task
        out, self.held = self.held[:limit], self.held[limit:]
        if not out:
            out = await self._fetch(limit, wait_s)
        if out:
            self.next = out[-1].offset + 1
        if self.read_ahead and len(out) == limit and not self.held and self.ahead is None:
            self.ahead = asyncio.create_task(self._fetch_ahead(limit))
        return out

    async def _fetch(self, limit: int, wait_s: float, check: bool = True) -> list[Stored]:
        assert self.sub is not None
        try:
            msgs = await self.sub.fetch(limit, timeout=max(wait_s, 0.05))
        except nats.errors.TimeoutError:
            if check:
                await self._check_consumer()
            return []
        return [
            Stored(m.metadata.sequence.stream, (m.headers or {}).get("Nats-Msg-Id", ""), m.data)
            for m in msgs
        ]

    async def _fetch_ahead(self, limit: int) -> list[Stored]:
        """The next batch if it is there now; a failure is the next read's to meet."""
        try:
            return await self._fetch(limit, AHEAD_WAIT_S, check=False)
        except (TimeoutError, nats.errors.Error):
            return []

    async def _check_consumer(self) -> None:
        """An idle consumer is deleted by JetStream after READER_IDLE_S, and one on a server
        that died is gone: a fetch on it only ever times out. Now and then, when reads come
        back empty, ask whether it still exists, and make a new one if not."""
        if self.sub is None or time.monotonic() - self.checked < CONSUMER_CHECK_S:
            return
        self.checked = time.monotonic()
        try:
            await self.sub.consumer_info()
        except (nats.errors.Error, TimeoutError):  # gone, or its server is
            await self.close()

    async def close(self) -> None:
        """Drop the consumer and what was read ahead (the next read starts a new one)."""
        if self.ahead is not None:
            ahead, self.ahead = self.ahead, None
            ahead.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ahead
        self.held = []
        if self.sub is not None:
            sub, self.sub = self.sub, None
            with contextlib.suppress(TimeoutError, nats.errors.Error):
                await sub.unsubscribe()


class Streams:
    """The JetStream of one broker's connection."""

    def __init__(self, nc: Nats, cluster_size: int) -> None:
        self.nc = nc
        self.js = nc.jetstream(timeout=API_TIMEOUT_S)
        self.cluster_size = cluster_size
        self.made: set[str] = set()
        self._offsets: KeyValue | None = None

    async def ensure(self, topic: Topic) -> None:
        """Every partition's stream exists (adding one that exists already is a no-op) and,
        the first time, has a leader, so that the produce that asked can be stored."""
        added = []
        for p in range(topic.partitions):
            name = stream_name(topic.id, p)
            if name in self.made:
                continue
            await self.js.add_stream(
                StreamConfig(
                    name=name,
                    subjects=[subject(topic.id, p)],
                    num_replicas=max(1, min(topic.replicas, self.cluster_size)),
                    max_age=float(topic.retention_s) if topic.retention_s else None,
                    duplicate_window=DEDUP_WINDOW_S,
                    allow_direct=True,
                )
            )
            added.append(name)
        await asyncio.gather(*(await_leader(self.js, name) for name in added))  # elected at once
        self.made.update(added)

    async def publish(
        self, topic: Topic, partition: int, messages: tuple[tuple[str, bytes], ...]
    ) -> list[int]:
        """Each message stored (all sent before the first acknowledgement is awaited, in
        order): their offsets, a duplicate's being the offset stored the first time."""
        await self.ensure(topic)
        to = subject(topic.id, partition)
        futures = [
            await self.js.publish_async(to, payload, headers={"Nats-Msg-Id": msg_id})
            for msg_id, payload in messages
        ]
        try:  # an acknowledgement never comes while the stream has no leader: give up
            acks = await asyncio.wait_for(asyncio.gather(*futures), API_TIMEOUT_S)
        except (TimeoutError, nats.errors.Error) as err:
            raise Unavailable(f"the stream did not acknowledge: {err}") from None
        return [ack.seq for ack in acks]

    async def survey(self) -> dict[str, Survey]:
        """Every BPS stream's leader and last offset, from the cluster's stream list: one
        request a page of 256 streams rather than one a partition. A stream whose leader did
        not answer in time is left out (the caller treats it as having none)."""
        found: dict[str, Survey] = {}
        offset = 0
        while True:
            ask = {"offset": offset, "subject": "bps.>"}
            try:
                answer = await self.nc.request(
                    "$JS.API.STREAM.LIST", json.dumps(ask).encode(), timeout=API_TIMEOUT_S
                )
            except (TimeoutError, nats.errors.Error) as err:
                raise Unavailable(f"the stream list did not come: {err}") from None
            page = json.loads(answer.data)
            if "error" in page:
                raise Unavailable(f"the stream list was refused: {page['error']}")
            streams = page.get("streams") or []
            for info in streams:
                name = str(info["config"]["name"])
                cluster = info.get("cluster") or {}
                found[name] = Survey(cluster.get("leader"), int(info["state"]["last_seq"]))
            offset += len(streams)
            if not streams or offset >= int(page.get("total", 0)):
                return found

    async def get(self, topic_id: int, partition: int, start: int, count: int) -> list[Stored]:
        """Up to ``count`` stored messages from offset ``start``, in one batched direct get
        (any replica answers; no consumer is made): what the anchorer reads, a range the
        survey saw stored. Ends at the server's end-of-batch, or with what came within
        API_TIMEOUT_S (a replica behind, a stream without servers)."""
        got: list[Stored] = []
        ended = asyncio.Event()

        async def take(msg: Msg) -> None:
            headers = msg.headers or {}
            if "Status" in headers:  # 204 end of batch, 404 nothing there, 503 no server
                ended.set()
            elif len(got) < count:
                sequence = int(headers.get("Nats-Sequence", 0))
                got.append(Stored(sequence, headers.get("Nats-Msg-Id", ""), msg.data))
                if len(got) == count:
                    ended.set()

        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox, cb=take)
        try:
            ask = json.dumps({"seq": start, "batch": count}).encode()
            await self.nc.publish(
                f"$JS.API.DIRECT.GET.{stream_name(topic_id, partition)}", ask, reply=inbox
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ended.wait(), API_TIMEOUT_S)
        finally:
            with contextlib.suppress(TimeoutError, nats.errors.Error):
                await sub.unsubscribe()
        return got

    async def offsets(self) -> KeyValue:
        if self._offsets is None:
            try:
                self._offsets = await self.js.key_value(OFFSETS_BUCKET)
            except NotFoundError:
                self._offsets = await self.js.create_key_value(
                    KeyValueConfig(bucket=OFFSETS_BUCKET, replicas=min(3, self.cluster_size))
                )
        return self._offsets

    async def commit(self, key: str, offset: int) -> None:
        await (await self.offsets()).put(key, str(offset).encode())

    async def committed(self, key: str) -> int:
        try:
            entry = await (await self.offsets()).get(key)
        except KeyNotFoundError:
            return 0
        return int(entry.value or b"0")
