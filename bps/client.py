"""The Python client of BPS: produce, consume with committed offsets, audit and verify.

It reads the brokers from the chain and talks to one sidecar at a time over a websocket,
with many requests in flight. When its broker dies it moves to the next one and sends again
what was not acknowledged, under the same message ids, so JetStream stores each message once.

With an encryption key (``enc_key``) it seals payloads end to end under a topic's key, which
the tenant's owner wraps on the chain for each reader's registered key (``bps.crypto``), and
opens sealed payloads it fetches when it holds a wrap of their key's version.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from bor_client import AsyncClient, Signer
from bps import crypto, protocol
from bps.audit import Audit, audit, verify
from bps.directory import CONSUME, CONTRACT, PRODUCE, Directory, Topic
from bps.errors import BpsError, CannotOpen, NotYet, Refused, Tampered, Unavailable
from chain.core.primitives.crypto import PrivateKey

FAILOVER_S = 15.0  # how long a request keeps trying other brokers
CONNECT_TIMEOUT_S = 3.0
REQUEST_TIMEOUT_S = 30.0
RW = (PRODUCE, CONSUME)  # who holds either is given the topic's key


@dataclass(frozen=True, slots=True)
class Message:
    """``payload`` is the plaintext when the client opened a sealed message; ``stored`` is
    always the bytes as the brokers store them (what the anchors' Merkle leaves cover)."""

    offset: int
    msg_id: str
    payload: bytes
    stored: bytes


class Connection:
    """One authenticated websocket to a sidecar."""

    def __init__(self, session: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse):
        self.session = session
        self.ws = ws
        self.ids = itertools.count(1)
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, url: str, account: str, key: PrivateKey) -> Connection:
        session = aiohttp.ClientSession()
        try:
            ws = await asyncio.wait_for(
                session.ws_connect(url, max_msg_size=protocol.MAX_FRAME, heartbeat=20),
                CONNECT_TIMEOUT_S,
            )
            challenge = protocol.unpack((await ws.receive(timeout=CONNECT_TIMEOUT_S)).data)
            digest = protocol.auth_digest(challenge["broker"], challenge["nonce"])
            await ws.send_bytes(protocol.pack({"account": account, "signature": key.sign(digest)}))
            welcome = protocol.unpack((await ws.receive(timeout=CONNECT_TIMEOUT_S)).data)
        except (TimeoutError, aiohttp.ClientError, OSError, TypeError, KeyError) as err:
            await session.close()
            raise Unavailable(f"{url}: {err or type(err).__name__}") from None
        if "error" in welcome:
            await session.close()
            raise Refused(welcome["error"]["code"], welcome["error"]["what"])
        return cls(session, ws)

    async def _read(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type != aiohttp.WSMsgType.BINARY:
                    break
                answer = protocol.unpack(msg.data)
                request_id = answer.get("id")
                future = self.waiting.pop(request_id, None) if type(request_id) is int else None
                if future is not None and not future.done():
                    future.set_result(answer)
        finally:
            for future in self.waiting.values():
                if not future.done():
                    future.set_exception(Unavailable("the broker closed the connection"))
            self.waiting.clear()

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        if self.ws.closed:
            raise Unavailable("the connection is closed")
        request_id = next(self.ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = future
        try:
            await self.ws.send_bytes(protocol.pack({"id": request_id, "op": op} | fields))
        except (aiohttp.ClientError, ConnectionError) as err:
            self.waiting.pop(request_id, None)
            raise Unavailable(str(err)) from None
        try:
            answer = await asyncio.wait_for(future, REQUEST_TIMEOUT_S)
        except TimeoutError:
            self.waiting.pop(request_id, None)
            raise Unavailable(f"no answer in {REQUEST_TIMEOUT_S:.0f} s") from None
        if "error" in answer:
            code, what = answer["error"]["code"], answer["error"]["what"]
            raise Unavailable(what) if code == "unavailable" else Refused(code, what)
        return answer

    async def close(self) -> None:
        await self.ws.close()
        await self.session.close()
        self.reader.cancel()


class BpsClient:
    """``account`` (whose key is ``key``) using BPS through the node at ``node_url``."""

    def __init__(
        self, node_url: str, account: str, key: PrivateKey, enc_key: PrivateKey | None = None
    ) -> None:
        self.node = AsyncClient(node_url, Signer([key]))
        self.account = account
        self.key = key
        self.enc_key = enc_key
        self.topic_keys: dict[tuple[int, int], bytes] = {}  # (topic id, version) -> key
        self.directory = Directory(self.node)
        self.conn: Connection | None = None
        self.broker_urls: list[str] = []
        self.turn = 0
        self._connecting = asyncio.Lock()

    async def __aenter__(self) -> BpsClient:
        await self.directory.load()
        self.broker_urls = [b.url for b in self.directory.brokers.values()]
        if not self.broker_urls:
            raise BpsError("no broker is registered on the chain")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()
            self.conn = None
        await self.node.close()

    async def topic(self, tenant: str, name: str) -> Topic:
        found = self.directory.topic(tenant, name)
        if found is None:
            await self.directory.load()
            found = self.directory.topic(tenant, name)
        if found is None:
            raise Refused("not_found", f"no topic {tenant}/{name}")
        return found

    async def _connection(self) -> Connection:
        async with self._connecting:  # requests in flight at once share one connection
            return await self._connect()

    async def _connect(self) -> Connection:
        if self.conn is not None:
            if not self.conn.ws.closed:
                return self.conn
            await self.conn.close()
            self.conn = None
        errors = []
        for _ in range(len(self.broker_urls)):
            url = self.broker_urls[self.turn % len(self.broker_urls)]
            try:
                self.conn = await Connection.open(url, self.account, self.key)
                return self.conn
            except Unavailable as err:
                errors.append(str(err))
                self.turn += 1
        raise Unavailable("no broker answered: " + "; ".join(errors))

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """``op`` on the current broker; on another one while brokers are unreachable or a
        stream has no leader (for up to FAILOVER_S)."""
        deadline = time.monotonic() + FAILOVER_S
        while True:
            try:
                conn = await self._connection()
                return await conn.request(op, **fields)
            except Unavailable:
                if time.monotonic() > deadline:
                    raise
                if self.conn is not None and self.conn.ws.closed:
                    await self.conn.close()
                    self.conn = None
                    self.turn += 1
                await asyncio.sleep(0.1)

    async def produce(
        self,
        tenant: str,
        topic: str,
        payloads: Sequence[bytes],
        partition: int | None = None,
        key: bytes | None = None,
        msg_ids: Sequence[str] | None = None,
        encrypt: bool = False,
    ) -> list[int]:
        """Store ``payloads`` in one partition (given, or by ``key``'s hash, else 0): their
        offsets once the stream has them on its replicas. ``encrypt``: sealed under the
        newest topic key this client holds a wrap of."""
        found = await self.topic(tenant, topic)
        if partition is None:
            partition = zlib.crc32(key) % found.partitions if key is not None else 0
        ids = list(msg_ids) if msg_ids is not None else [uuid.uuid4().hex for _ in payloads]
        if encrypt:
            version, topic_key = await self.newest_topic_key(found)
            payloads = [crypto.seal(topic_key, version, p) for p in payloads]
        offsets: list[int] = []
        for start in range(0, len(payloads), protocol.MAX_BATCH):
            chunk = [
                [i, p]
                for i, p in zip(
                    ids[start:], payloads[start : start + protocol.MAX_BATCH], strict=False
                )
            ]
            answer = await self.request(
                "produce", tenant=tenant, topic=topic, partition=partition, messages=chunk
            )
            offsets.extend(answer["offsets"])
        return offsets

    async def fetch(
        self,
        tenant: str,
        topic: str,
        partition: int,
        start: int,
        limit: int = 100,
        wait_ms: int = 500,
    ) -> list[Message]:
        answer = await self.request(
            "fetch",
            tenant=tenant,
            topic=topic,
            partition=partition,
            **{"from": start, "max": limit, "wait_ms": wait_ms},
        )
        stored = [(o, i, p) for o, i, p in answer["messages"]]
        opened = await self._open_all(tenant, topic, [p for _, _, p in stored])
        return [Message(o, i, plain, p) for (o, i, p), plain in zip(stored, opened, strict=True)]

    async def committed(self, tenant: str, topic: str, partition: int, group: str) -> int:
        answer = await self.request(
            "committed", tenant=tenant, topic=topic, partition=partition, group=group
        )
        return int(answer["offset"])

    async def commit(
        self, tenant: str, topic: str, partition: int, group: str, offset: int
    ) -> None:
        await self.request(
            "commit", tenant=tenant, topic=topic, partition=partition, group=group, offset=offset
        )

    async def consume(
        self,
        tenant: str,
        topic: str,
        partition: int,
        group: str,
        limit: int = 100,
        wait_ms: int = 500,
    ) -> list[Message]:
        """The messages after the group's committed offset (commit them once processed)."""
        start = await self.committed(tenant, topic, partition, group) + 1
        return await self.fetch(tenant, topic, partition, start, limit, wait_ms)

    # End-to-end encryption: the keys live on the chain, wrapped; brokers see sealed bytes.

    def _enc_key(self) -> PrivateKey:
        if self.enc_key is None:
            raise BpsError("this needs an encryption key (enc_key; --enc-key-file)")
        return self.enc_key

    async def set_enckey(self, tenant: str) -> bool:
        """Register this client's encryption public key as the account's in ``tenant``
        (``setenckey``); whether it pushed one: the tenant's owner, unless also a member,
        registers none, since it wraps each topic key for itself with the key it holds."""
        public = bytes(self._enc_key().public_key)
        await self.directory.load()
        found = self.directory.tenant(tenant)
        if found is None:
            raise Refused("not_found", f"no tenant {tenant}")
        if found.owner == self.account and self.account not in found.members:
            return False
        data = {"tenant": tenant, "account": self.account, "enckey": public.hex()}
        await self.node.contract(CONTRACT).push("setenckey", data, self.account)
        return True

    async def wraps(self, found: Topic) -> dict[str, tuple[int, bytes]]:
        """The topic's wrapped keys on the chain: account -> (version, wrap)."""
        rows = await self.directory.rows("wraps", found.id)
        return {r["account"]: (int(r["version"]), bytes.fromhex(r["wrapped"])) for r in rows}

    async def rotate_topic_key(self, tenant: str, topic: str) -> tuple[int, list[str]]:
        """(The tenant's owner.) A new random key for ``topic``, numbered one past the newest
        wrapped, wrapped in one transaction for the owner and for each member with an enckey
        who may produce or consume the topic: the version and the accounts it was wrapped for."""
        enc_key = self._enc_key()
        await self.directory.load()
        found = await self.topic(tenant, topic)
        owner = self.directory.tenants[tenant].owner
        if owner != self.account:
            raise Refused("not_owner", f"only {tenant}'s owner {owner} wraps its topics' keys")
        now_us = time.time_ns() // 1000
        readers = {
            member: enckey
            for member, enckey in self.directory.tenants[tenant].members.items()
            if enckey and any(self.directory.allowed(member, tenant, topic, r, now_us) for r in RW)
        }
        readers[owner] = bytes(enc_key.public_key)
        version = max((v for v, _ in (await self.wraps(found)).values()), default=0) + 1
        key = crypto.new_key()
        contract = self.node.contract(CONTRACT)
        actions = []
        for account, public in sorted(readers.items()):
            data = {"tenant": tenant, "topic": topic, "account": account, "version": version,
                    "wrapped": crypto.wrap(public, key).hex()}  # fmt: skip
            actions.append(await contract.action("wrapkey", data, owner))
        await self.node.push(actions)
        self.topic_keys[(found.id, version)] = key
        return version, sorted(readers)

    async def _own_wrap(self, found: Topic) -> tuple[int, bytes] | None:
        """The newest key of the topic wrapped for this account, unwrapped and kept."""
        held = (await self.wraps(found)).get(self.account)
        if held is None:
            return None
        version, wrapped = held
        if (found.id, version) not in self.topic_keys:
            self.topic_keys[(found.id, version)] = crypto.unwrap(self._enc_key(), wrapped)
        return version, self.topic_keys[(found.id, version)]

    async def newest_topic_key(self, found: Topic) -> tuple[int, bytes]:
        """The version and key a produce seals with."""
        self._enc_key()
        held = await self._own_wrap(found)
        if held is None:
            raise BpsError(
                f"no key of {found.tenant}/{found.name} is wrapped for {self.account}: "
                "its owner wraps one (bor-bps topickey) once your enckey is registered"
            )
        return held

    async def _open_all(self, tenant: str, topic: str, stored: list[bytes]) -> list[bytes]:
        """Each payload opened if it is sealed under a key this client holds, else as stored;
        CannotOpen for a sealed payload changed since it was sealed."""
        versions = [crypto.sealed_version(p) for p in stored]
        if self.enc_key is None or not any(v is not None for v in versions):
            return stored
        found = await self.topic(tenant, topic)
        if any(v is not None and (found.id, v) not in self.topic_keys for v in versions):
            with contextlib.suppress(CannotOpen):  # a wrap for a key it no longer holds
                await self._own_wrap(found)
        opened = []
        for payload, v in zip(stored, versions, strict=True):
            key = None if v is None else self.topic_keys.get((found.id, v))
            opened.append(payload if key is None else crypto.open_sealed(key, payload))
        return opened

    async def audit(self, tenant: str, topic: str) -> Audit:
        return await audit(self.node, await self.topic(tenant, topic))

    async def verify(
        self, tenant: str, topic: str, partition: int, offset: int, payload: bytes | None = None
    ) -> dict[str, Any]:
        """The message at ``offset`` (``payload`` if given, else as the broker serves it) is
        the one anchored on the chain; raises Tampered otherwise, NotYet while it is not
        anchored in an irreversible block."""
        found = await self.topic(tenant, topic)
        try:
            proof = await self.request(
                "proof", tenant=tenant, topic=topic, partition=partition, offset=offset
            )
        except Refused as err:
            if err.code == "not_anchored":
                raise NotYet(err.what) from None
            if err.code == "missing":
                raise Tampered(err.what) from None
            raise
        held = proof["payload"] if payload is None else payload
        return await verify(self.node, found, partition, offset, held, proof)
