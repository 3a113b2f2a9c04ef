"""BPS's access control through real brokers: a tenant's topics are closed to another
tenant's accounts, a client must prove its account's key, and a revoked consumer is refused
within two blocks of the revocation."""

from __future__ import annotations

import asyncio
import time

import pytest

from bps.client import BpsClient
from bps.errors import Refused
from chain.core.primitives.crypto import PrivateKey
from tests.integration.bps.conftest import World


def test_tenant_a_cannot_reach_tenant_b_topics(world: World) -> None:
    """carol (globex's owner) produces and consumes on globex/secrets; acme's owner and
    acme's member are refused both, and carol is refused acme/orders."""

    async def own(client: BpsClient) -> list[bytes]:
        await client.produce("globex", "secrets", [b"plans"], partition=0)
        return [m.payload for m in await client.fetch("globex", "secrets", 0, 1, 10, 0)]

    assert world.run("carol", own) == [b"plans"]
    for outsider in ("alice", "bob"):
        for attempt in (
            lambda c: c.produce("globex", "secrets", [b"x"], partition=0),
            lambda c: c.fetch("globex", "secrets", 0, 1, 10, 0),
            lambda c: c.commit("globex", "secrets", 0, "g", 1),
        ):
            with pytest.raises(Refused) as refused:
                world.run(outsider, attempt)
            assert refused.value.code == "forbidden", refused.value
    with pytest.raises(Refused, match="carol may not produce to acme/orders"):
        world.run("carol", lambda c: c.produce("acme", "orders", [b"x"], partition=0))


def test_a_client_must_hold_its_accounts_key(world: World) -> None:
    """A session opened as alice with another key is refused before any request."""

    async def go() -> None:
        async with world.client("alice", PrivateKey.generate().to_text()) as client:
            await client.fetch("acme", "orders", 0, 1)

    with pytest.raises(Refused) as refused:
        asyncio.run(go())
    assert refused.value.code == "unauthenticated"


def test_revoked_consumer_is_refused_within_two_blocks(world: World) -> None:
    """bob, granted consume on orders*, reads; once the revocation is in block N, bob's
    next requests are refused by the time the chain's head is N + 2."""
    world.push("alice", "grant", {
        "tenant": "acme", "principal": "bob", "pattern": "orders*", "rights": 3, "expires": 0,
    })  # fmt: skip
    acl_id = max(
        int(row["id"]) for row in world.chain("alice").contract("bps").rows("acls", "acme")
        if (row["principal"], row["pattern"]) == ("bob", "orders*")
    )  # fmt: skip

    async def go() -> tuple[int, int]:
        async with world.client("bob") as bob:
            deadline = time.monotonic() + 5
            while True:  # the grant reaches the sidecars with its block
                try:
                    await bob.produce("acme", "orders", [b"by bob"], partition=1)
                    break
                except Refused:
                    assert time.monotonic() < deadline, "the grant never took effect"
                    await asyncio.sleep(0.05)
            revoked = world.push("alice", "revoke", {"tenant": "acme", "id": acl_id})
            revoked_in = int(revoked.block_num)
            while True:
                try:
                    await bob.fetch("acme", "orders", 1, 1, 10, 0)
                except Refused as err:
                    assert err.code == "forbidden"
                    return revoked_in, world.head()
                assert world.head() <= revoked_in + 3, "still served 3 blocks after"
                await asyncio.sleep(0.05)

    revoked_in, refused_at = asyncio.run(go())
    assert refused_at <= revoked_in + 2, (revoked_in, refused_at)
