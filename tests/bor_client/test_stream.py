"""``Stream`` against a scripted websocket server on loopback: it stores a frame's cursor once
the consumer asks for the next, resumes from it after a ``lagged`` frame and after a dropped
connection, hands ``undo`` frames on, keeps its cursor in a file, and raises on a refusal."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import WSCloseCode, web
from aiohttp.test_utils import TestServer

from bor_client.errors import StreamRefused
from bor_client.frames import BlockFrame, Cursor, Undo
from bor_client.stream import STREAM_PATH, Stream, read_cursor

Script = Callable[[web.WebSocketResponse], Awaitable[None]]


def _id(num: int, fork: int = 0) -> str:
    return f"{num:08x}" + f"{fork:02x}" * 28


def _cursor(num: int, fork: int = 0) -> dict[str, Any]:
    return {"num": num, "id": _id(num, fork)}


def _block(num: int, fork: int = 0) -> dict[str, Any]:
    return {
        "type": "block",
        "cursor": _cursor(num, fork),
        "irreversible": False,
        "block": {"num": num, "id": _id(num, fork), "transaction_count": 0},
    }


def _subscribed(head: int) -> dict[str, Any]:
    return {"type": "subscribed", "head": _cursor(head), "lib": _cursor(1), "resume_from": head}


async def _lagged(ws: web.WebSocketResponse) -> None:
    await ws.send_json({"type": "lagged", "cursor": _cursor(7), "reason": "too slow"})
    await ws.close(code=WSCloseCode.TRY_AGAIN_LATER)


async def _first(ws: web.WebSocketResponse) -> None:
    await ws.send_json(_subscribed(5))
    for num in (6, 7):
        await ws.send_json(_block(num))
    await _lagged(ws)


async def _fork(ws: web.WebSocketResponse) -> None:
    await ws.send_json(_subscribed(7))
    await ws.send_json({"type": "undo", "cursor": _cursor(6), "block": {"num": 7, "id": _id(7)}})
    await ws.send_json(_block(7, fork=1))
    await ws.close()  # dropped: no lagged, no error


async def _refuse(ws: web.WebSocketResponse) -> None:
    await ws.send_json({"type": "error", "reason": "the cursor is too old"})
    await ws.close(code=WSCloseCode.POLICY_VIOLATION)


def _serve(scripts: list[Script], check: Callable[[str, list[Any]], Awaitable[None]]) -> None:
    """Run ``check`` with the URL of a server whose n-th connection follows ``scripts[n]``,
    and the subscribe messages it got."""
    subscribes: list[Any] = []

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        subscribes.append(json.loads((await ws.receive()).data))
        await scripts[len(subscribes) - 1](ws)
        return ws

    async def main() -> None:
        app = web.Application()
        app.router.add_get(STREAM_PATH, handler)
        server = TestServer(app)
        await server.start_server()
        try:
            await asyncio.wait_for(check(str(server.make_url("")), subscribes), 20)
        finally:
            await server.close()

    asyncio.run(main())


def test_resumes_after_lagged_and_a_drop_and_hands_undo_on(tmp_path: Path) -> None:
    """Frames 6 and 7, then lagged: resubscribed from 7; an undo of 7 and the fork's 7, then
    a dropped connection: resubscribed from the fork's 7; a refusal ends it (StreamRefused),
    with the cursor file holding the last processed block."""
    path = tmp_path / "cursor.json"
    seen: list[Any] = []

    async def check(url: str, subscribes: list[Any]) -> None:
        stream = Stream(url, cursor_file=path)
        with pytest.raises(StreamRefused, match="too old"):
            async for frame in stream:
                seen.append(frame)
        await stream.aclose()
        assert [s["cursor"] for s in subscribes] == [None, _cursor(7), _cursor(7, fork=1)]
        assert subscribes[0] == {"type": "subscribe", "stream": "blocks", "cursor": None}
        assert stream.subscriptions == 2 and stream.lagged == 1  # the third was refused

    _serve([_first, _fork, _refuse], check)
    assert [type(f) for f in seen] == [BlockFrame, BlockFrame, Undo, BlockFrame]
    assert isinstance(seen[2], Undo) and seen[2].cursor == Cursor(6, _id(6))
    assert read_cursor(path) == Cursor(7, _id(7, fork=1))


def test_a_frame_not_yet_processed_is_not_stored(tmp_path: Path) -> None:
    """A consumer that stops inside a frame (it never asks for the next) leaves the cursor at
    the one before: that frame comes again on the next run. A fresh start stores the head."""
    path = tmp_path / "cursor.json"

    async def check(url: str, subscribes: list[Any]) -> None:
        stream = Stream(url, cursor_file=path, transactions=True)
        first = await stream.__anext__()
        assert isinstance(first, BlockFrame) and first.cursor.num == 6
        assert read_cursor(path) == Cursor(5, _id(5))  # the head it started at
        await stream.__anext__()  # 7: so 6 was processed
        assert stream.cursor == Cursor(6, _id(6)) == read_cursor(path)
        await stream.aclose()
        assert subscribes[0]["transactions"] is True

    _serve([_first], check)
    again = Stream("http://127.0.0.1:9", cursor_file=path)
    assert again.cursor == Cursor(6, _id(6))
