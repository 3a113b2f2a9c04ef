"""The listener's sockets: what one HTTP listener accepts (``HttpLimits``), and the guard
that holds each connection to it below aiohttp, where a request handler cannot reach: caps on
connections in total and per client address (503 at accept), a bounded kernel send queue, and
a write deadline for clients that never read."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from aiohttp import web

from node.api.rpc import log
from node.api.views import dumps

# The kernel send queue of each HTTP connection (Linux doubles it for its bookkeeping): 256
# KiB takes a 2.3 MB block to a client 100 ms away in about a second, and bounds the kernel
# memory a never-reading client holds to 512 KiB.
SEND_BUFFER_BYTES = 256 << 10
REFUSAL_LOG_S = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpLimits:
    """What one listener accepts (0 turns a limit off): the ``http`` options (declared, with
    their defaults and the reasons for them, in ``node.config.model.HttpConfig``), made by
    ``node.config.builders.http_limits``."""

    max_body_bytes: int
    max_in_flight: int
    max_response_s: float
    read_timeout_s: float
    # Each open connection holds a file descriptor: past these the listener answers 503 at
    # accept and closes, so idle connections cannot take the fds the node's own files need
    # (node.process.fds derives the node's caps from its fd limit).
    max_connections: int
    max_connections_per_address: int
    write_timeout_s: float
    max_response_bytes_in_flight: int


class Connections:
    """The open connections of one listener, in total and by client address."""

    def __init__(self, limits: HttpLimits) -> None:
        self.limits = limits
        self.total = 0
        self.by_address: dict[str, int] = {}
        self._refused = {"total": 0, "per_address": 0}  # refusals not logged yet
        self._refusals_logged = 0.0

    def refusal(self, address: str) -> str | None:
        """Why a new connection from ``address`` is refused (counted for the log); None if
        it may open."""
        most, each = self.limits.max_connections, self.limits.max_connections_per_address
        if most and self.total >= most:
            self._count_refusal("total")
            return f"{self.total} connections open; retry later"
        if each and self.by_address.get(address, 0) >= each:
            self._count_refusal("per_address")
            return f"{each} connections open from {address}; close one first"
        return None

    def _count_refusal(self, cap: str) -> None:
        """Refusals come in floods: the first is logged, then how many since, at most every
        ``REFUSAL_LOG_S``."""
        self._refused[cap] += 1
        now = time.monotonic()
        if now - self._refusals_logged >= REFUSAL_LOG_S:
            log.warning("http_connections_refused", open=self.total, **self._refused)
            self._refused = dict.fromkeys(self._refused, 0)
            self._refusals_logged = now

    def opened(self, address: str) -> None:
        self.total += 1
        self.by_address[address] = self.by_address.get(address, 0) + 1

    def closed(self, address: str) -> None:
        self.total -= 1
        left = self.by_address[address] - 1
        if left:
            self.by_address[address] = left
        else:
            del self.by_address[address]


def _refusal_bytes(what: str) -> bytes:
    """A whole HTTP 503 answer, sent at accept: the refused client gets a reason, not a reset."""
    body = dumps({"code": 503, "message": what, "error": {"name": "busy", "what": what}})
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


class _Guarded(asyncio.Protocol):
    """aiohttp's protocol for one connection, admitted under ``Connections`` and cut off
    when its writes stall: asyncio pauses a protocol's writing once the transport holds more
    than its high-water mark, and a connection still paused ``write_timeout_s`` later is
    aborted, freeing the response held for it."""

    def __init__(
        self, connections: Connections, make: Callable[[], asyncio.Protocol], timeout_s: float
    ) -> None:
        self._connections = connections
        self._make = make
        self._timeout_s = timeout_s
        self._inner: asyncio.Protocol | None = None
        self._address = ""
        self._transport: asyncio.Transport | None = None
        self._stall: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's does not subclass asyncio.Transport).
        transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._address = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        refusal = self._connections.refusal(self._address)
        if refusal is not None:
            transport.write(_refusal_bytes(refusal))
            transport.close()  # after the answer is flushed
            return
        self._connections.opened(self._address)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # The kernel's send queue is sized here, not autotuned up to tcp_wmem's 4 MiB:
            # 200 clients that never read held 597 MB of kernel memory that way.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        self._transport = transport
        self._inner = self._make()
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is None:
            return
        self._inner.pause_writing()
        if self._timeout_s and self._stall is None:
            loop = asyncio.get_running_loop()
            self._stall = loop.call_later(self._timeout_s, self._stalled)

    def resume_writing(self) -> None:
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        if self._inner is not None:
            self._inner.resume_writing()

    def _stalled(self) -> None:
        self._stall = None
        if self._transport is not None:
            log.info("http_write_stalled", client=self._address, timeout_s=self._timeout_s)
            self._transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        if self._inner is not None:
            self._inner.connection_lost(exc)
            self._inner = None
            self._transport = None
            self._connections.closed(self._address)


class GuardedSite(web.TCPSite):
    """A TCP site whose connections go through ``_Guarded``."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, limits: HttpLimits) -> None:
        super().__init__(runner, host, port)
        self._connections = Connections(limits)
        self._write_timeout_s = limits.write_timeout_s

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with its runner
        server = self._runner.server
        assert server is not None
        connections, timeout_s = self._connections, self._write_timeout_s
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _Guarded(connections, server, timeout_s), self._host, self._port
        )
