"""A broker's sidecar: the only way to its NATS server. Clients connect over a websocket,
prove their account by signing a nonce, and every produce, fetch, commit and proof is checked
against the chain's ACLs as they stand now (the ``Follower`` reloads them the moment a block
changes them), so a revoked consumer's next request is refused.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
from aiohttp import WSMsgType, web

from bor_client import AsyncClient, RpcError
from bps import merkle, protocol
from bps.audit import anchor_for
from bps.directory import CONSUME, PRODUCE, Directory, Topic
from bps.errors import BpsError, Refused, Unavailable
from bps.protocol import Commit, Fetch, Place, Produce, ProofRequest
from bps.streams import Reader, Stored, Streams
from chain.core.primitives.crypto import public_key_from_text, recover
from chain.core.primitives.errors import BadSignature

log = logging.getLogger("bps.sidecar")
HELLO_TIMEOUT_S = 10.0
MAX_IN_FLIGHT = 64  # requests of one session being handled at once
MAX_PROOF_SPAN = 100_000  # what one anchor covers at most (the anchorer's MAX_ANCHOR)
PROOFS_AT_ONCE = 4
PROOF_QUEUE_S = 5.0


def now_us() -> int:
    return time.time_ns() // 1000


class Session:
    """One authenticated client: its account, and its readers (one per partition)."""

    def __init__(self, sidecar: Sidecar, account: str) -> None:
        self.sidecar = sidecar
        self.account = account
        self.readers: dict[tuple[int, int], Reader] = {}
        self.proving = False

    async def topic(self, place: Place, right: int) -> Topic:
        """The topic, if ``place`` names one and this session's account holds ``right`` on it
        (asking the chain again first when the answer would be no: it may be a block ahead)."""
        directory = self.sidecar.directory
        for attempt in range(2):
            topic = directory.topic(place.tenant, place.topic)
            if topic is not None and directory.allowed(
                self.account, place.tenant, place.topic, right, now_us()
            ):
                break
            if attempt == 0:
                await directory.refresh()
        if topic is None or place.partition >= topic.partitions:
            raise Refused("not_found", f"no topic {place.tenant}/{place.topic}:{place.partition}")
        if not directory.allowed(self.account, place.tenant, place.topic, right, now_us()):
            what = "produce to" if right == PRODUCE else "consume from"
            raise Refused(
                "forbidden", f"{self.account} may not {what} {place.tenant}/{place.topic}"
            )
        return topic

    def reader(self, topic: Topic, partition: int) -> Reader:
        key = (topic.id, partition)
        if key not in self.readers:
            self.readers[key] = Reader(
                self.sidecar.streams.js, topic.id, partition, read_ahead=True
            )
        return self.readers[key]

    async def produce(self, frame: dict[str, Any]) -> dict[str, Any]:
        request = Produce.of(frame)
        topic = await self.topic(request.place, PRODUCE)
        offsets = await self.sidecar.streams.publish(
            topic, request.place.partition, request.messages
        )
        return {"offsets": offsets}

    async def fetch(self, frame: dict[str, Any]) -> dict[str, Any]:
        request = Fetch.of(frame)
        topic = await self.topic(request.place, CONSUME)
        await self.sidecar.streams.ensure(topic)
        stored = await self.reader(topic, request.place.partition).read(
            request.start, request.max, request.wait_ms / 1000
        )
        return {"messages": [[m.offset, m.msg_id, m.payload] for m in stored]}

    def offsets_key(self, place: Place, group: str) -> str:
        return f"{place.tenant}.{place.topic}.{place.partition}.{self.account}.{group}"

    async def commit(self, frame: dict[str, Any]) -> dict[str, Any]:
        request = Commit.of(frame)
        await self.topic(request.place, CONSUME)
        await self.sidecar.streams.commit(
            self.offsets_key(request.place, request.group), request.offset
        )
        return {}

    async def committed(self, frame: dict[str, Any]) -> dict[str, Any]:
        request = Commit.of(frame | {"offset": 0})
        await self.topic(request.place, CONSUME)
        key = self.offsets_key(request.place, request.group)
        return {"offset": await self.sidecar.streams.committed(key)}

    async def proof(self, frame: dict[str, Any]) -> dict[str, Any]:
        """The message at an offset, and the path from it to the anchor that covers it
        (computed from the stream as it is now: a changed message gives a root the chain
        does not hold). A proof reads its anchor's whole span, so a session has one at a
        time and the sidecar PROOFS_AT_ONCE; a request finding no room is refused (busy)."""
        request = ProofRequest.of(frame)
        topic = await self.topic(request.place, CONSUME)
        if self.proving:
            raise Refused("busy", "this session is already getting a proof")
        self.proving = True
        try:
            async with asyncio.timeout(PROOF_QUEUE_S):
                await self.sidecar.proofs.acquire()
        except TimeoutError:
            self.proving = False
            raise Refused("busy", "the broker is computing other proofs; retry later") from None
        try:
            return await self._proof(topic, request)
        finally:
            self.sidecar.proofs.release()
            self.proving = False

    async def _proof(self, topic: Topic, request: ProofRequest) -> dict[str, Any]:
        partition = request.place.partition
        found = await anchor_for(self.sidecar.client, topic, partition, request.offset)
        if found is None:
            raise Refused("not_anchored", f"offset {request.offset} is not anchored yet")
        first, last = int(found["first"]), int(found["last"])
        if last - first >= MAX_PROOF_SPAN:
            raise Refused("too_large", "the anchor spans too many messages")
        by_offset: dict[int, Stored] = {}
        at = first
        while at <= last:
            got = await self.sidecar.streams.get(topic.id, partition, at, min(1000, last - at + 1))
            if not got:
                break
            by_offset.update((m.offset, m) for m in got if m.offset <= last)
            at = got[-1].offset + 1
        if request.offset not in by_offset:
            raise Refused("missing", f"the broker does not hold offset {request.offset}")
        leaves = [
            merkle.leaf(topic.id, partition, o, by_offset[o].payload)
            if o in by_offset
            else b"\x00" * 32
            for o in range(first, last + 1)
        ]
        message = by_offset[request.offset]
        return {
            "anchor": int(found["id"]),
            "payload": message.payload,
            "msg_id": message.msg_id,
            "path": merkle.proof(leaves, request.offset - first),
        }

    async def close(self) -> None:
        for reader in self.readers.values():
            await reader.close()


Handler = Callable[[Session, dict[str, Any]], Awaitable[dict[str, Any]]]
HANDLERS: dict[str, Handler] = {
    "produce": Session.produce,
    "fetch": Session.fetch,
    "commit": Session.commit,
    "committed": Session.committed,
    "proof": Session.proof,
}


class Sidecar:
    """The websocket service of one broker: ``/bps``."""

    def __init__(self, broker: str, client: AsyncClient, directory: Directory, streams: Streams):
        self.broker = broker
        self.client = client
        self.directory = directory
        self.streams = streams
        self.sessions = 0
        self.proofs = asyncio.Semaphore(PROOFS_AT_ONCE)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/bps", self.serve)
        app.router.add_get("/health", self.health)
        return app

    async def health(self, _request: web.Request) -> web.Response:
        return web.json_response({"broker": self.broker, "sessions": self.sessions})

    async def serve(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=protocol.MAX_FRAME, heartbeat=20)
        await ws.prepare(request)
        try:
            account = await self.authenticate(ws)
        except Refused as err:
            await ws.send_bytes(protocol.pack({"error": {"code": err.code, "what": err.what}}))
            await ws.close()
            return ws
        session = Session(self, account)
        self.sessions += 1
        try:
            await self.loop(ws, session)
        finally:
            self.sessions -= 1
            await session.close()
        return ws

    async def authenticate(self, ws: web.WebSocketResponse) -> str:
        nonce = secrets.token_bytes(32)
        await ws.send_bytes(
            protocol.pack({"op": "challenge", "broker": self.broker, "nonce": nonce})
        )
        try:
            msg = await ws.receive(timeout=HELLO_TIMEOUT_S)
        except TimeoutError:
            raise Refused("unauthenticated", "no hello in time") from None
        if msg.type != WSMsgType.BINARY:
            raise Refused("unauthenticated", "hello is a binary frame")
        hello = protocol.unpack(msg.data)
        account = protocol.text(hello, "account")
        signature = protocol.blob(hello, "signature", 65)
        try:
            key = recover(signature, protocol.auth_digest(self.broker, nonce))
            known = public_key_from_text((await self.client.get_account(account)).key)
        except (BadSignature, RpcError, ValueError) as err:
            raise Refused("unauthenticated", str(err)) from None
        if key != known:
            raise Refused("unauthenticated", f"the signature is not {account}'s key")
        await ws.send_bytes(protocol.pack({"op": "welcome", "account": account}))
        return account

    async def loop(self, ws: web.WebSocketResponse, session: Session) -> None:
        slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        tasks: set[asyncio.Task[None]] = set()
        async for msg in ws:
            if msg.type != WSMsgType.BINARY:
                break
            await slots.acquire()
            task = asyncio.create_task(self.answer(ws, session, msg.data, slots))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        for task in list(tasks):
            task.cancel()

    async def answer(
        self, ws: web.WebSocketResponse, session: Session, data: bytes, slots: asyncio.Semaphore
    ) -> None:
        request_id: Any = None
        try:
            frame = protocol.unpack(data)
            request_id = frame.get("id")
            handler = HANDLERS.get(frame.get("op", ""))
            if handler is None:
                raise Refused("bad_request", f"unknown op {frame.get('op')!r}")
            answer = {"id": request_id, "ok": True} | await handler(session, frame)
        except Refused as err:
            answer = {"id": request_id, "error": {"code": err.code, "what": err.what}}
        except (TimeoutError, Unavailable, BpsError, nats.errors.Error) as err:
            # The stream without a leader for now (a broker died, a stream just made): the
            # client tries again, here or at another broker.
            what = str(err) or type(err).__name__
            answer = {"id": request_id, "error": {"code": "unavailable", "what": what}}
        except Exception as err:  # a handler's fault must not end the session silently
            log.exception("request failed")
            answer = {"id": request_id, "error": {"code": "internal", "what": type(err).__name__}}
        finally:
            slots.release()
        if not ws.closed:
            await ws.send_bytes(protocol.pack(answer))
