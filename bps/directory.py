"""What the chain says about BPS, as one sidecar or client sees it: brokers, tenants, their
members, topics, partitions and ACLs, read from the ``bps`` contract's tables.

``allowed`` is the one place an ACL is evaluated off chain; it follows the contract's
``canaccess`` rule (a test runs both on the same entries): a tenant's owner has every right on
its topics; a member has the union of the rights of its unexpired entries in the tenant's ACLs
whose pattern covers the topic (its name, a prefix ending in ``*``, or ``*``); anyone else has
none. ACLs live in the tenant's scope, so a tenant's owner can only grant on its own topics.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from bor_client import AsyncClient

CONTRACT = "bps"
PRODUCE, CONSUME, ADMIN = 1, 2, 4
RIGHTS = {"produce": PRODUCE, "consume": CONSUME, "admin": ADMIN}
REFRESH_S = 0.25


@dataclass(frozen=True, slots=True)
class Broker:
    account: str
    url: str
    key: bytes


@dataclass(frozen=True, slots=True)
class Acl:
    id: int
    principal: str
    pattern: str
    rights: int
    expires: int  # microseconds since the epoch, 0: never

    def live(self, now_us: int) -> bool:
        return self.expires == 0 or self.expires > now_us

    def matches(self, topic: str) -> bool:
        p = self.pattern
        return p == "*" or p == topic or (p.endswith("*") and topic.startswith(p[:-1]))


@dataclass(frozen=True, slots=True)
class Topic:
    tenant: str
    name: str
    id: int
    partitions: int
    replicas: int
    retention_s: int


@dataclass(slots=True)
class Part:
    partition: int
    broker: str
    last: int
    head: bytes


@dataclass(slots=True)
class Tenant:
    name: str
    owner: str
    members: dict[str, bytes] = field(default_factory=dict)
    acls: dict[int, Acl] = field(default_factory=dict)
    topics: dict[str, Topic] = field(default_factory=dict)


def allowed(tenant: Tenant | None, principal: str, topic: str, right: int, now_us: int) -> bool:
    if tenant is None or topic not in tenant.topics:
        return False
    if principal == tenant.owner:
        return True
    if principal not in tenant.members:
        return False
    held = 0
    for acl in tenant.acls.values():
        if acl.principal == principal and acl.live(now_us) and acl.matches(topic):
            held |= acl.rights
    return held & right == right


def _bytes(value: Any) -> bytes:
    return bytes.fromhex(value) if isinstance(value, str) else b""


class Directory:
    """The contract's tables, reloaded whole (they are small) when an action changes them."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.contract = client.contract(CONTRACT)
        self.brokers: dict[str, Broker] = {}
        self.tenants: dict[str, Tenant] = {}
        self.by_id: dict[int, Topic] = {}
        self.loaded_at = 0.0
        self._loading = asyncio.Lock()

    def tenant(self, name: str) -> Tenant | None:
        return self.tenants.get(name)

    def topic(self, tenant: str, name: str) -> Topic | None:
        found = self.tenants.get(tenant)
        return None if found is None else found.topics.get(name)

    def allowed(self, principal: str, tenant: str, topic: str, right: int, now_us: int) -> bool:
        return allowed(self.tenants.get(tenant), principal, topic, right, now_us)

    async def rows(self, table: str, scope: str | int) -> list[dict[str, Any]]:
        return [row async for row in self.contract.rows(table, scope)]

    async def refresh(self, min_age_s: float = REFRESH_S) -> None:
        """Read the tables again unless that was done in the last ``min_age_s`` seconds: a
        request naming a topic or a right the directory does not know yet may be ahead of
        the follower by a block, and a burst of such requests reads the chain once."""
        async with self._loading:
            if time.monotonic() - self.loaded_at >= min_age_s:
                await self.load()

    async def load(self) -> None:
        brokers = {
            r["account"]: Broker(r["account"], r["url"], _bytes(r["key"]))
            for r in await self.rows("brokers", CONTRACT)
        }
        tenants: dict[str, Tenant] = {}
        for row in await self.rows("tenants", CONTRACT):
            tenants[row["tenant"]] = await self._tenant(row["tenant"], row["owner"])
        self.brokers, self.tenants = brokers, tenants
        self.loaded_at = time.monotonic()
        self.by_id = {t.id: t for tenant in tenants.values() for t in tenant.topics.values()}

    async def _tenant(self, name: str, owner: str) -> Tenant:
        tenant = Tenant(name, owner)
        for row in await self.rows("members", name):
            tenant.members[row["account"]] = _bytes(row["enckey"])
        for row in await self.rows("acls", name):
            acl = Acl(
                int(row["id"]),
                row["principal"],
                row["pattern"],
                int(row["rights"]),
                int(row["expires"]),
            )
            tenant.acls[acl.id] = acl
        for row in await self.rows("topics", name):
            topic = Topic(
                name,
                row["topic"],
                int(row["id"]),
                int(row["partitions"]),
                int(row["replicas"]),
                int(row["retention_s"]),
            )
            tenant.topics[topic.name] = topic
        return tenant

    async def parts(self, topic_id: int) -> dict[int, Part]:
        return {
            int(r["partition"]): Part(
                int(r["partition"]), r["broker"], int(r["last"]), bytes.fromhex(r["head"])
            )
            for r in await self.rows("parts", topic_id)
        }
