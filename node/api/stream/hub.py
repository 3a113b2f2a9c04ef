"""``/v1/chain/stream``: the chain's events as a websocket on the public listener.

The hub is one more subscriber of the runner's ``ChainUpdate`` stream. Its callback runs on
the event loop and only hands each update to every session's bounded inbox
(``session``), so a slow client, or a hundred of them, never delays the chain thread,
production, relay or another subscriber. Each connection carries one subscription, and is
served by its handler (which reads what the client sends: pongs, or a protocol violation)
and the session's task (which sends), both owned by the handler's task group.

A connection that has upgraded but not yet subscribed counts apart from the subscriptions:
it has ``subscribe_timeout_ms`` to subscribe and each address may hold only a few such
(``max_unsubscribed_per_address``), so sockets that never subscribe cannot fill
``http-max-streams`` and crowd out subscribers. Its place under the stream caps is taken
when its subscribe message arrives.

Sessions replaying history share the blocks they read (``replay.ReplayCache``), and
once the last session that held much memory ends (a replay, or a client cut for not reading)
the hub gives the allocator's free memory back to the system.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections import OrderedDict
from dataclasses import dataclass

import structlog
from aiohttp import WSCloseCode, WSMsgType, web

from chain.core.primitives.types import BlockId
from chain.events import ChainUpdate
from node.api.stream.abis import StreamAbis
from node.api.stream.frames import (
    MAX_SUBSCRIBE_BYTES,
    POLICY_VIOLATION,
    TRY_AGAIN_LATER,
    IndexCache,
    Refused,
    Subscription,
    error_frame,
    parse_subscribe,
)
from node.api.stream.replay import ReplayCache
from node.api.stream.session import Session
from node.api.views import dumps
from node.metrics import NodeMetrics
from node.process.malloc import give_back_free_memory
from node.runner import ChainRunner

log = structlog.get_logger("stream")

STREAM_PATH = "/v1/chain/stream"
# A closing handshake (our close frame, the client's answer) takes this long at most; a
# client that does not answer is cut off.
CLOSE_TIMEOUT_S = 5.0
# Blocks popped by fork switches that a cursor may still name (id -> number, parent): a
# client resuming from a block that was undone gets the undo messages back to our chain.
# 72 bytes an entry; a fork switch pops at most the reversible blocks.
POPPED_BLOCKS = 4096
# The free memory is given back this long after a heavy session ends (once for a burst of
# them: 200 clients cut together cost one trim, which takes milliseconds per GB of heap).
TRIM_DELAY_S = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamLimits:
    """What the stream serves (0 turns a cap off): the ``stream`` options (declared, with
    their defaults and the reasons for them, in ``node.config.model.StreamConfig``), made by
    ``node.config.builders.stream_limits``."""

    # Each stream holds a connection (an fd, counted under http-max-connections too) and a
    # buffer of up to ``buffer`` messages (and ``buffer_bytes`` of blocks).
    max_streams: int
    max_streams_per_address: int
    buffer: int
    buffer_bytes: int
    # A connection must subscribe this soon after the upgrade.
    subscribe_timeout_ms: int
    # Upgraded connections not yet subscribed, from one address; they do not count under
    # max_streams until they subscribe.
    max_unsubscribed_per_address: int
    # Pings go out this often; a client that does not answer within half of it is closed.
    ping_ms: int


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
        self._open = 0  # subscribed connections
        self._by_address: dict[str, int] = {}  # subscribed connections by address
        self._waiting: dict[str, int] = {}  # upgraded, not yet subscribed, by address
        self._replays = ReplayCache(runner.view.params)
        self._trim: asyncio.TimerHandle | None = None
        self._popped: OrderedDict[BlockId, tuple[int, BlockId]] = OrderedDict()
        self._indexes = IndexCache(runner.view.params)
        self._abis = StreamAbis()
        self._stopping = False

    # --- the chain's side ---------------------------------------------------------------

    def chain_updated(self, update: ChainUpdate) -> None:
        """(A runner subscriber.) Remember popped blocks; queue the update for every session."""
        steps = update.events.steps
        self._abis.deployed(steps)  # before any session decodes these blocks
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
        if self._trim is not None:
            self._trim.cancel()
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
        refusal = self._waiting_refusal(address)
        if refusal is not None:
            await _close(ws, error_frame(refusal), TRY_AGAIN_LATER)
            return ws
        _count(self._waiting, address, 1)
        self._unsubscribed.add(ws)
        try:
            sub = await self._subscription(ws)
        finally:
            self._unsubscribed.discard(ws)
            _count(self._waiting, address, -1)
        if sub is None:
            return ws
        refusal = self._refusal(address)
        if refusal is not None:
            await _close(ws, error_frame(refusal), TRY_AGAIN_LATER)
            return ws
        self._open += 1
        _count(self._by_address, address, 1)
        try:
            await self._serve(ws, sub)
        finally:
            self._open -= 1
            _count(self._by_address, address, -1)
        return ws

    def _origin_allowed(self, origin: str, request: web.Request) -> bool:
        return self._cors_origin in ("*", origin) or origin == f"{request.scheme}://{request.host}"

    def _waiting_refusal(self, address: str) -> str | None:
        if self._stopping:
            return "the node is stopping"
        each = self.limits.max_unsubscribed_per_address
        if each and self._waiting.get(address, 0) >= each:
            return (
                f"{each} streams from {address} have not subscribed yet; subscribe on those"
                f" first (http-max-unsubscribed-streams-per-address = {each})"
            )
        return None

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

    async def _subscription(self, ws: web.WebSocketResponse) -> Subscription | None:
        """The subscription the client's first message asks for; None (the connection
        closed, with an error frame where it is still open) if it sends none in time, or a
        bad one."""
        timeout_s = self.limits.subscribe_timeout_ms / 1000
        try:
            message = await ws.receive(timeout=timeout_s)
        except TimeoutError:
            what = (
                f"no subscribe message within {timeout_s:g} s"
                f" (http-stream-subscribe-timeout-ms = {self.limits.subscribe_timeout_ms})"
            )
            await _close(ws, error_frame(what), POLICY_VIOLATION)
            return None
        if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
            return None
        if message.type is not WSMsgType.TEXT:
            what = "the subscribe message must be a JSON text frame"
            await _close(ws, error_frame(what), POLICY_VIOLATION)
            return None
        try:
            return parse_subscribe(message.data)
        except Refused as refused:
            await _close(ws, error_frame(refused.reason), refused.code)
            return None

    async def _serve(self, ws: web.WebSocketResponse, sub: Subscription) -> None:
        limits = self.limits
        session = Session(
            sub,
            limits.buffer,
            self._indexes,
            self._popped,
            limits.buffer_bytes,
            self._replays,
            self._abis,
        )
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
            if session.heavy:
                self._trim_soon()

    def _trim_soon(self) -> None:
        """Give the free memory back in TRIM_DELAY_S, unless that is already due."""
        if self._trim is None and not self._stopping:
            self._trim = asyncio.get_running_loop().call_later(TRIM_DELAY_S, self._trim_now)

    def _trim_now(self) -> None:
        self._trim = None
        if self._replays.replaying:  # not yet: a session that ends after its replay trims
            return
        # A client that leaves first gets its request's task cancelled, and the CancelledError
        # holds the task, its frames, the websocket and its buffers in a cycle that only a
        # full collection frees, which the node's thresholds make rare (GC_THRESHOLDS): 64
        # clients leaving a replay kept ~100 MiB so. One collection per burst of such ends
        # (scripts/bench_stream_memory.py: a few ms; the blocks are not in the cycle).
        started = time.perf_counter()
        collected = gc.collect()
        given = give_back_free_memory()
        log.debug(
            "stream_memory_trimmed",
            collected=collected,
            given_back=given,
            ms=round((time.perf_counter() - started) * 1000, 1),
        )

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


def _count(counts: dict[str, int], address: str, change: int) -> None:
    """Add ``change`` to ``address``'s count, dropping it at zero."""
    left = counts.get(address, 0) + change
    if left:
        counts[address] = left
    else:
        del counts[address]


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
