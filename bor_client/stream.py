"""Following the chain: ``/v1/chain/stream`` as an async iterator that resumes by itself.

The stream keeps the consumer's cursor: a frame's cursor is stored when the consumer asks
for the next frame (it has then processed that one), in memory and, given ``cursor_file``,
in that file, written whole by a rename. After a disconnect, a ``lagged`` frame or a node's
"try again later", the stream subscribes again from the stored cursor: the node replays what
was missed, with no gap and no duplicate, and a fork switch that happened meanwhile arrives
as ``Undo`` frames, which the consumer gets like any other. A consumer that stops mid-frame
(a crash) gets that frame again on its next run: at least once, never lost.

``subscribed`` and ``lagged`` frames are the stream's own business and are not yielded; an
``error`` frame closed with 1008 (the subscription is wrong) raises ``StreamRefused``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

from bor_client.errors import MalformedResponse, NodeUnreachable, StreamRefused
from bor_client.frames import (
    Cursor,
    ErrorFrame,
    Frame,
    Lagged,
    Moving,
    Subscribed,
    parse_frame,
)

STREAM_PATH = "/v1/chain/stream"
POLICY_VIOLATION = 1008  # the node's close code for a subscription that will never work
# Reconnection: the first retry at once, then doubling waits up to the cap; this many
# failures in a row (no subscription between) and the stream gives up (NodeUnreachable).
RETRY_FIRST_S = 0.1
RETRY_CAP_S = 5.0
MAX_FAILURES = 10
# Seconds between pings; a connection silent for twice this is taken for dead.
HEARTBEAT_S = 30.0
# The largest frame read: a block's transactions frame at the chain's largest block size
# with room to spare; a bigger one is not a frame of this node.
MAX_FRAME_BYTES = 64 << 20

__all__ = ["Cursor", "Stream"]


class _Retry(Exception):
    """The node asked for the subscription to be tried again later."""


def read_cursor(path: Path) -> Cursor | None:
    """The cursor stored in ``path``; None when there is no file yet."""
    try:
        return Cursor.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, MalformedResponse) as err:
        raise MalformedResponse(0, f"{path} holds no cursor: {err}") from err


def write_cursor(path: Path, cursor: Cursor) -> None:
    """``cursor`` into ``path``, whole or not at all (a crash mid-write keeps the old one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(cursor.json()))
    os.replace(tmp, path)


class Stream:
    """One subscription, resumed across connections; iterate it with ``async for``."""

    def __init__(
        self,
        url: str,
        *,
        stream: str = "blocks",
        accounts: Sequence[str] = (),
        actions: Sequence[str] = (),
        irreversible_only: bool = False,
        transactions: bool = False,
        cursor: Cursor | None = None,
        cursor_file: str | Path | None = None,
        max_failures: int = MAX_FAILURES,
    ) -> None:
        self.url = url.rstrip("/") + STREAM_PATH
        self._request: dict[str, Any] = {"type": "subscribe", "stream": stream}
        self._request |= {"accounts": list(accounts)} if accounts else {}
        self._request |= {"actions": list(actions)} if actions else {}
        self._request |= {"irreversible_only": True} if irreversible_only else {}
        self._request |= {"transactions": True} if transactions else {}  # blocks: contract D
        self.irreversible_only = irreversible_only
        self.cursor_file = None if cursor_file is None else Path(cursor_file)
        if cursor is None and self.cursor_file is not None:
            cursor = read_cursor(self.cursor_file)
        self._cursor = cursor  # stored: processed by the consumer
        self._pending: Cursor | None = None  # the last frame yielded, not yet processed
        self.max_failures = max_failures
        self.subscriptions = 0  # more than one: it resumed after a disconnect or lagged
        self.lagged = 0
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None

    @property
    def cursor(self) -> Cursor | None:
        """The stored cursor: the last frame the consumer has processed."""
        return self._cursor

    def __aiter__(self) -> Stream:
        return self

    async def __aenter__(self) -> Stream:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection (the stored cursor stays: a new Stream resumes from it)."""
        await self._drop()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def store(self, cursor: Cursor) -> None:
        self._cursor = cursor
        if self.cursor_file is not None:
            write_cursor(self.cursor_file, cursor)

    async def __anext__(self) -> Frame:
        if self._pending is not None:  # asked for the next: the last one is processed
            self.store(self._pending)
            self._pending = None
        failures = 0
        while True:
            if self._ws is None:
                try:
                    await self._subscribe()
                    failures = 0
                except (aiohttp.ClientError, OSError, TimeoutError, _Retry) as err:
                    failures += 1
                    if failures >= self.max_failures:
                        raise NodeUnreachable(f"cannot follow {self.url}: {err}") from err
                    await asyncio.sleep(min(RETRY_CAP_S, RETRY_FIRST_S * 2 ** (failures - 1)))
                    continue
            frame = await self._receive()
            if frame is None:
                continue  # the connection ended: subscribe again from the cursor
            if isinstance(frame, Moving):
                self._pending = frame.cursor
            return frame

    async def _subscribe(self) -> None:
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
            self._session = aiohttp.ClientSession(timeout=timeout)
        ws = await self._session.ws_connect(
            self.url, heartbeat=HEARTBEAT_S, max_msg_size=MAX_FRAME_BYTES
        )
        try:
            cursor = None if self._cursor is None else self._cursor.json()
            await ws.send_str(json.dumps(self._request | {"cursor": cursor}))
            message = await ws.receive()
            if message.type != aiohttp.WSMsgType.TEXT:
                raise aiohttp.ClientConnectionError(f"the stream closed ({ws.close_code})")
            first = parse_frame(message.data)
            if isinstance(first, ErrorFrame):
                await ws.receive()  # the close that follows: its code says why
                if ws.close_code == POLICY_VIOLATION:
                    raise StreamRefused(first.reason, ws.close_code)
                raise _Retry(first.reason)  # a cap of the node: try again later
            if not isinstance(first, Subscribed):
                raise MalformedResponse(200, f"the stream began with {first!r}")
        except BaseException:
            await ws.close()
            raise
        if self._cursor is None:  # a fresh start: nothing before this point is owed
            self.store(first.lib if self.irreversible_only else first.head)
        self.subscriptions += 1
        self._ws = ws

    async def _receive(self) -> Frame | None:
        """The next frame to yield; None when the connection ended and must be renewed."""
        ws = self._ws
        assert ws is not None
        while True:
            message = await ws.receive()
            if message.type != aiohttp.WSMsgType.TEXT:
                await self._drop()
                return None
            frame = parse_frame(message.data)
            if isinstance(frame, Lagged):
                self.lagged += 1
                await self._drop()
                return None
            if isinstance(frame, ErrorFrame):
                await ws.receive()  # the close that follows
                code = ws.close_code
                await self._drop()
                if code == POLICY_VIOLATION:
                    raise StreamRefused(frame.reason, code)
                await asyncio.sleep(RETRY_CAP_S)  # a cap of the node (1013) or its fault
                return None
            if isinstance(frame, Subscribed):
                continue
            return frame

    async def _drop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(aiohttp.ClientError, OSError):
                await ws.close()
