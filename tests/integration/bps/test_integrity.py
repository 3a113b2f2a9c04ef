"""What the chain's anchors prove, through real brokers: each message verifies against the
anchor in an irreversible block that covers it; a history rewritten in the brokers' store
(a message changed, every replica, sequence numbers kept) fails ``verify`` while messages
of other anchors still verify; and an audit of a topic reads that topic's anchors only."""

from __future__ import annotations

import asyncio
from typing import Any

import nats
import pytest

import bps.audit
from bps.audit import Audit
from bps.client import BpsClient
from bps.cluster import Secrets
from bps.errors import NotYet, Tampered
from bps.streams import Streams, Survey, await_leader, stream_name
from tests.integration.bps.conftest import World, eventually


def verified(world: World, account: str, tenant: str, topic: str, p: int, offset: int) -> Any:
    """verify's answer once the offset is anchored in an irreversible block."""

    def attempt() -> Any:
        try:
            return world.run(account, lambda c: c.verify(tenant, topic, p, offset))
        except NotYet as err:
            raise AssertionError(str(err)) from None

    return eventually(attempt, 20, f"offset {offset} anchored and irreversible")


async def rewrite(world: World, stream: str, subject: str, payloads: list[bytes]) -> None:
    """An insider with the brokers' NATS password replaces the stream with the same messages
    at the same offsets, one of them changed: the store is consistent, only the chain knows."""
    keys = Secrets.load(world.deployment.secrets_file)
    nc = await nats.connect(
        world.deployment.brokers[0].server.url, user=keys.user, password=keys.password
    )
    js = nc.jetstream()
    config = (await js.stream_info(stream)).config
    await js.delete_stream(stream)
    await js.add_stream(config)  # as it was: the same subject, replicas, direct reads
    await await_leader(js, stream)
    for payload in payloads:
        await js.publish(subject, payload)
    await nc.close()
    assert config.num_replicas == 3 and config.subjects == [subject] and config.allow_direct


def test_verify_and_a_rewritten_history(world: World) -> None:
    """Offsets 1-10 and 11-20 of acme/orders:0 go in two anchors and verify; after the
    rewrite, offset 5 as the store now holds it fails verify, offset 15 still verifies, and
    offset 5 as alice received it before still verifies (its proof needs only the others)."""
    first = [b"first %d" % i for i in range(10)]
    second = [b"second %d" % i for i in range(10)]
    assert world.run("alice", lambda c: c.produce("acme", "orders", first, partition=0)) == list(
        range(1, 11)
    )
    found = verified(world, "alice", "acme", "orders", 0, 10)
    assert (found["first"], found["last"]) == (1, 10)
    world.run("alice", lambda c: c.produce("acme", "orders", second, partition=0))
    assert verified(world, "alice", "acme", "orders", 0, 15)["first"] == 11
    topic_id = world.run("alice", lambda c: c.topic("acme", "orders")).id
    altered = [*first[:4], b"forged", *first[5:], *second]
    asyncio.run(rewrite(world, f"BPS_{topic_id}_0", f"bps.{topic_id}.0", altered))
    with pytest.raises(Tampered, match="offset 5 does not match anchor"):
        world.run("alice", lambda c: c.verify("acme", "orders", 0, 5))
    assert world.run("alice", lambda c: c.verify("acme", "orders", 0, 15))["first"] == 11
    kept = world.run("alice", lambda c: c.verify("acme", "orders", 0, 5, payload=b"first 4"))
    assert (kept["first"], kept["last"]) == (1, 10)


def test_audit_reads_only_its_topics_anchors(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """With many anchors of acme/orders on the chain, an audit of globex/secrets reads as many
    rows as that topic has anchors, and finds its chain of anchors intact; read two rows a
    page, each audit reads every anchor of its topic once (the index's keys are unique, so
    a page starts where the last one stopped)."""
    monkeypatch.setattr(bps.audit, "PAGE", 2)

    async def noisy(client: BpsClient) -> None:
        for round_ in range(6):
            for p in (0, 1):
                await client.produce("acme", "orders", [b"noise %d" % round_], partition=p)
            await asyncio.sleep(1.1)  # an anchoring round and its block

    async def quiet(client: BpsClient) -> int:
        return (await client.produce("globex", "secrets", [b"q1", b"q2"], partition=0))[-1]

    world.run("alice", noisy)
    last = world.run("carol", quiet)

    def settled() -> tuple[Audit, Audit]:
        busy = world.run("alice", lambda c: c.audit("acme", "orders"))
        calm = world.run("carol", lambda c: c.audit("globex", "secrets"))
        assert calm.covered.get(0) == last and busy.anchors > 3 * calm.anchors, (busy, calm)
        return busy, calm

    busy, calm = eventually(settled, 40, "both topics anchored")
    assert calm.ok and busy.ok
    assert calm.rows_read == calm.anchors
    orders = world.run("alice", lambda c: c.topic("acme", "orders")).id
    counted = world.chain("alice").contract("bps").rows("parts", orders)
    again = world.run("alice", lambda c: c.audit("acme", "orders"))  # anchors may have come
    assert again.ok and again.anchors >= sum(int(part["anchors"]) for part in counted) > 6
    assert all(again.covered[int(part["partition"])] >= int(part["last"]) for part in counted)


def test_the_survey_shows_each_partitions_leader_and_last_offset(world: World) -> None:
    """The anchorers' one-request survey of the streams names the leader that the servers'
    monitoring names and the last offset a producer was given, for every partition of every
    topic (and no stream but BPS's)."""
    produced = world.run("alice", lambda c: c.produce("acme", "orders", [b"s1", b"s2"], 1))
    orders = world.run("alice", lambda c: c.topic("acme", "orders")).id
    secrets = world.run("carol", lambda c: c.topic("globex", "secrets")).id

    async def survey() -> dict[str, Survey]:
        keys = Secrets.load(world.deployment.secrets_file)
        nc = await nats.connect(
            world.deployment.brokers[1].server.url, user=keys.user, password=keys.password
        )
        try:
            return await Streams(nc, 3).survey()
        finally:
            await nc.close()

    seen = asyncio.run(survey())
    wanted = {stream_name(orders, 0), stream_name(orders, 1), stream_name(secrets, 0)}
    assert wanted <= set(seen) and all(name.startswith("BPS_") for name in seen), seen
    for name in wanted:
        topic_id, p = (int(x) for x in name.split("_")[1:])
        assert seen[name].leader == world.leader(topic_id, p), name
    assert seen[stream_name(orders, 1)].last >= produced[-1]
