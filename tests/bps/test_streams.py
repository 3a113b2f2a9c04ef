"""Waiting for a stream's leader, against a JetStream that answers as the test says: it
returns once a leader is named, asks again after errors, bounds a question that never comes
back by the time left, and says what it last heard when it gives up; ``ensure`` waits for
every new partition's leader at once and adds each stream only the first time."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any, cast

import nats.errors
import pytest
from nats.aio.client import Client as Nats
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from bps.directory import Topic
from bps.errors import Unavailable
from bps.streams import Streams, await_leader
from tests.support.wait import within


class FakeJetStream:
    """``stream_info`` answers from ``script`` in turn (its last entry for ever after): a
    leader's name, None for none yet, an exception to raise, or "hang". With ``meet``, no
    question is answered before that many streams have been asked about."""

    def __init__(self, script: list[Any], meet: int = 0) -> None:
        self.script = script
        self.meet = meet
        self.met = asyncio.Event()
        self.asked: list[str] = []
        self.added: list[str] = []

    async def stream_info(self, name: str) -> Any:
        step = self.script[min(len(self.asked), len(self.script) - 1)]
        self.asked.append(name)
        if len(set(self.asked)) >= self.meet:
            self.met.set()
        await self.met.wait()
        if step == "hang":
            await asyncio.Event().wait()
        if isinstance(step, BaseException):
            raise step
        return SimpleNamespace(cluster=SimpleNamespace(leader=step))

    async def add_stream(self, config: Any) -> None:
        self.added.append(config.name)


class FakeNats:
    def __init__(self, js: FakeJetStream) -> None:
        self.js = js

    def jetstream(self, timeout: float) -> FakeJetStream:
        return self.js


def wait(fake: FakeJetStream, timeout: float) -> float:
    """``await_leader`` on ``fake``; the seconds it took."""
    started = time.monotonic()
    asyncio.run(await_leader(cast(JetStreamContext, fake), "S", timeout))
    return time.monotonic() - started


def test_returns_once_a_leader_is_named_after_errors_and_none_yet() -> None:
    """An unanswered request, no leader, then a leader: three questions, then done."""
    fake = FakeJetStream([nats.errors.TimeoutError(), None, "n2"])
    assert wait(fake, 5) < 1
    assert fake.asked == ["S", "S", "S"]


def test_a_question_never_answered_is_cut_at_the_deadline() -> None:
    """A stream_info that never returns does not hold the wait past its timeout."""
    with pytest.raises(Unavailable, match=r"stream S has no leader after 0\.3 s: TimeoutError"):
        wait(FakeJetStream(["hang"]), 0.3)


def test_gives_up_naming_what_it_last_heard() -> None:
    """A stream that is not there: refused after the timeout, with the server's reason."""
    started = time.monotonic()
    with pytest.raises(Unavailable, match=r"after 0\.2 s: .*NotFoundError"):
        wait(FakeJetStream([NotFoundError()]), 0.2)
    assert 0.2 <= time.monotonic() - started < 1


def test_ensure_waits_for_every_new_partition_and_adds_each_once() -> None:
    """Three new partitions are waited for together: no leader is named before all three
    have been asked about (waited for one after another, the first would time out); a second
    ensure adds and asks nothing."""
    fake = FakeJetStream(["n1"], meet=3)
    streams = Streams(cast(Nats, FakeNats(fake)), cluster_size=3)
    topic = Topic("acme", "orders", 9, 3, 3, 0)

    async def twice() -> None:
        await within(streams.ensure(topic), "the three leaders")
        await streams.ensure(topic)

    asyncio.run(twice())
    assert fake.added == ["BPS_9_0", "BPS_9_1", "BPS_9_2"]
    assert sorted(fake.asked) == ["BPS_9_0", "BPS_9_1", "BPS_9_2"]
    assert streams.made == set(fake.added)
