"""``/v1/chain/stream``: the chain's events as a websocket on the public listener.

The hub is one more subscriber of the runner's ``ChainUpdate`` stream. Its callback runs on
the event loop and only hands each update to every session's bounded inbox
(``stream_session``), so a slow client, or a hundred of them, never delays the chain thread,
production, relay or another subscriber. Each connection carries one subscription, and is
served by its handler (which reads what the client sends: pongs, or a protocol violation)
and the session's task (which sends), both owned by the handler's task group.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

import structlog
from aiohttp import WSCloseCode, WSMsgType, web

from chain.core.types import BlockId
from chain.events import ChainUpdate
from node.api.stream_frames import (
    MAX_SUBSCRIBE_BYTES,
    POLICY_VIOLATION,
    TRY_AGAIN_LATER,
    IndexCache,
    Refused,
    error_frame,
    parse_subscribe,
)
from node.api.stream_session import Session
from node.api.views import dumps
from node.metrics import NodeMetrics
from node.runner import ChainRunner

log = structlog.get_logger("stream")

STREAM_PATH = "/v1/chain/stream"
# The subscribe message must come this soon after the upgrade: a connection that says
# nothing holds a place under http-max-streams.
SUBSCRIBE_TIMEOUT_S = 10.0
# A closing handshake (our close frame, the client's answer) takes this long at most; a
# client that does not answer is cut off.
CLOSE_TIMEOUT_S = 5.0
# Blocks popped by fork switches that a cursor may still name (id -> number, parent): a
# client resuming from a block that was undone gets the undo messages back to our chain.
# 72 bytes an entry; a fork switch pops at most the reversible blocks.
POPPED_BLOCKS = 4096


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """What the stream serves (0 turns a cap off)."""

    # Each stream holds a connection (an fd, counted under http-max-connections too) and a
    # buffer of up to ``buffer`` messages.
    max_streams: int = 1024
    max_streams_per_address: int = 64
    # Messages queued for one client before it is cut off with ``lagged``: 4096 is over half
    # an hour of blocks at 2 a second, or a fork switch of any depth the chain allows.
    buffer: int = 4096
    # Pings go out this often; a client that does not answer within half of it is closed.
    ping_ms: int = 20_000


class StreamHub:
    """The websocket subscriptions of the public listener."""

    def __init__(
        self,
        runner: ChainRunner,
        limits: StreamLimits,
        metrics: NodeMetrics,
        cors_origin: str = "",
    ) -> None:
        """``cors_origin``: the public listener's Access-Control-Allow-Origin ('' for
        none): a page of another site may open a stream only where it may read answers."""
        self.runner = runner
        self.limits = limits
        self._metrics = metrics
        self._cors_origin = cors_origin
        self._sessions: set[Session] = set()
        self._unsubscribed: set[web.WebSocketResponse] = set()  # waiting for their subscribe
        self._open = 0  # upgraded connections, subscribed or not yet
        self._by_address: dict[str, int] = {}
        self._popped: OrderedDict[BlockId, tuple[int, BlockId]] = OrderedDict()
        self._indexes = IndexCache()
        self._stopping = False

    # --- the chain's side ---------------------------------------------------------------

    def chain_updated(self, update: ChainUpdate) -> None:
        """(A runner subscriber.) Remember popped blocks; queue the update for every session."""
        steps = update.events.steps
        for step in steps:
            if step.undo:
                block = step.block
                self._popped[block.id] = (block.num, block.header.previous)
                self._popped.move_to_end(block.id)
                if len(self._popped) > POPPED_BLOCKS:
                    self._popped.popitem(last=False)
        if not steps and not update.lib_advanced:
            return  # the mempool's size changed: nothing to send
        for session in self._sessions:
            if not session.offer(update):
                self._metrics.stream_lagged.inc()

    async def shutdown(self, app: web.Application) -> None:
        """(on_shutdown) End every stream: the node is stopping."""
        self._stopping = True
        for session in self._sessions:
            session.fail("the node is stopping", WSCloseCode.GOING_AWAY)
        stopping = error_frame("the node is stopping")
        closes = [_close(ws, stopping, WSCloseCode.GOING_AWAY) for ws in self._unsubscribed]
        await asyncio.gather(*closes)

    # --- one connection -----------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """GET /v1/chain/stream: upgrade, read the subscription, serve it until it ends."""
        ws = web.WebSocketResponse(
            heartbeat=self.limits.ping_ms / 1000 if self.limits.ping_ms else None,
            max_msg_size=MAX_SUBSCRIBE_BYTES,
            timeout=CLOSE_TIMEOUT_S,
        )
        if not ws.can_prepare(request).ok:
            what = f"{STREAM_PATH} is a websocket: send a GET with Upgrade: websocket"
            return _error(426, "upgrade_required", what, {"Upgrade": "websocket"})
        origin = request.headers.get("Origin")
        if origin is not None and not self._origin_allowed(origin, request):
            return _error(403, "cross_origin", "streams are not served to this origin")
        await ws.prepare(request)
        address = request.remote or ""
        refusal = self._refusal(address)
        if refusal is not None:
            await _close(ws, error_frame(refusal), TRY_AGAIN_LATER)
            return ws
        self._open += 1
        self._by_address[address] = self._by_address.get(address, 0) + 1
        try:
            await self._serve(ws)
        finally:
            self._open -= 1
            left = self._by_address[address] - 1
            if left:
                self._by_address[address] = left
            else:
                del self._by_address[address]
        return ws

    def _origin_allowed(self, origin: str, request: web.Request) -> bool:
        return self._cors_origin in ("*", origin) or origin == f"{request.scheme}://{request.host}"

    def _refusal(self, address: str) -> str | None:
        if self._stopping:
            return "the node is stopping"
        most, each = self.limits.max_streams, self.limits.max_streams_per_address
        if most and self._open >= most:
            return f"{self._open} streams open; try again later (http-max-streams = {most})"
        if each and self._by_address.get(address, 0) >= each:
            return (
                f"{each} streams open from {address}; close one first"
                f" (http-max-streams-per-address = {each})"
            )
        return None

    async def _serve(self, ws: web.WebSocketResponse) -> None:
        self._unsubscribed.add(ws)
        try:
            message = await ws.receive(timeout=SUBSCRIBE_TIMEOUT_S)
        except TimeoutError:
            what = f"no subscribe message within {SUBSCRIBE_TIMEOUT_S:g} s"
            await _close(ws, error_frame(what), POLICY_VIOLATION)
            return
        finally:
            self._unsubscribed.discard(ws)
        if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
            return
        if message.type is not WSMsgType.TEXT:
            what = "the subscribe message must be a JSON text frame"
            await _close(ws, error_frame(what), POLICY_VIOLATION)
            return
        try:
            sub = parse_subscribe(message.data)
        except Refused as refused:
            await _close(ws, error_frame(refused.reason), refused.code)
            return
        session = Session(sub, self.limits.buffer, self._indexes, self._popped)
        self._sessions.add(session)
        self._metrics.stream_subscribers.set(len(self._sessions))
        try:
            async with asyncio.TaskGroup() as tg:
                writer = tg.create_task(self._write(ws, session), name="stream-writer")
                await _read(ws, session)
                writer.cancel()  # the client went away: nothing more to send
        finally:
            self._sessions.discard(session)
            self._metrics.stream_subscribers.set(len(self._sessions))

    async def _write(self, ws: web.WebSocketResponse, session: Session) -> None:
        messages = self._metrics.stream_messages

        async def send(frame: bytes) -> None:
            await ws.send_frame(frame, WSMsgType.TEXT)
            messages.inc()

        try:
            ending = await session.run(self.runner, send)
            frame, code = ending.frame, ending.code
        except Refused as refused:
            frame, code = error_frame(refused.reason), refused.code
        except ConnectionError:
            return  # the client is gone
        await _close(ws, frame, code)
        messages.inc()


async def _read(ws: web.WebSocketResponse, session: Session) -> None:
    """Read until the connection closes: aiohttp answers pings and takes pongs here; one
    subscription per connection, so anything else the client sends ends it."""
    async for message in ws:
        if message.type in (WSMsgType.TEXT, WSMsgType.BINARY):
            session.fail("one subscription per connection: open another for more", POLICY_VIOLATION)
        elif message.type is WSMsgType.ERROR:
            return


async def _close(ws: web.WebSocketResponse, frame: bytes, code: int) -> None:
    """Send ``frame`` (if any) and close with ``code``, within CLOSE_TIMEOUT_S."""
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            if frame:
                await ws.send_frame(frame, WSMsgType.TEXT)
            await ws.close(code=code)
    except (TimeoutError, ConnectionError):
        pass  # the client is gone, or does not read: aiohttp drops the connection


def _error(
    status: int, name: str, what: str, headers: dict[str, str] | None = None
) -> web.Response:
    """The RPC's error object, for a request that never became a stream."""
    body = dumps({"code": status, "message": what, "error": {"name": name, "what": what}})
    return web.Response(
        status=status,
        body=body,
        content_type="application/json",
        charset="utf-8",
        headers=headers,
    )
