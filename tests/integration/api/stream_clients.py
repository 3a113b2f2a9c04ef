"""Clients of ``/v1/chain/stream`` for the integration tests: a follower that records what it
sees, the chain as seen, a load of transfers, and a one-producer node to follow."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp

from chain.core.primitives.crypto import PrivateKey
from node.commands.devnet import prepare
from tests.integration.conftest import (
    NodeProcess,
    Nodes,
    loopback_plan,
    push_transfers,
    wait_for,
)

STREAM = "/v1/chain/stream"


def readme_consumer() -> Callable[[str, Path], Coroutine[Any, Any, None]]:
    """The README's resuming consumer, taken from the README itself (all but its last line,
    which runs it against a fixed address), so the two cannot drift apart."""
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    code = next(b for b in blocks if "async def follow" in b)
    lines = [line for line in code.splitlines() if not line.startswith("asyncio.run(")]
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), "README.md", "exec"), namespace)
    follow: Callable[[str, Path], Coroutine[Any, Any, None]] = namespace["follow"]
    return follow


class Follower:
    """A websocket subscriber on a thread of its own, connecting from ``source``, keeping
    every frame it receives, in order; ``stop`` closes it politely, ``kill`` drops its
    connection as a dead process would (no close frame, nothing more read)."""

    def __init__(self, url: str, subscribe: dict[str, Any], source: str = "127.0.0.1") -> None:
        self.frames: list[dict[str, Any]] = []
        self.close_code: int | None = None
        self._url = url
        self._source = source
        self._subscribe = {"type": "subscribe", **subscribe}
        self._loop = asyncio.new_event_loop()
        self._task: asyncio.Task[None] | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._killed = False
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()
        wait_for(lambda: bool(self.frames) or self.done, 10, f"an answer to {self._subscribe}")

    def _main(self) -> None:
        self._task = self._loop.create_task(self._run())
        try:
            self._loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass
        finally:
            self._loop.close()

    async def _run(self) -> None:
        connector = aiohttp.TCPConnector(local_addr=(self._source, 0))
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.ws_connect(self._url + STREAM, heartbeat=None) as ws,
        ):
            self._ws = ws
            await ws.send_json(self._subscribe)
            async for message in ws:
                if self._killed:
                    return
                if message.type == aiohttp.WSMsgType.TEXT:
                    self.frames.append(json.loads(message.data))
            self.close_code = ws.close_code

    def _drop(self) -> None:
        self._killed = True
        assert self._ws is not None and self._task is not None
        self._ws.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
        self._task.cancel()

    def kill(self) -> None:
        self._loop.call_soon_threadsafe(self._drop)
        self._thread.join(timeout=10)

    def stop(self) -> None:
        if self._thread.is_alive():
            assert self._task is not None
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(timeout=10)

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    @property
    def subscribed(self) -> bool:
        return bool(self.frames) and self.frames[0]["type"] == "subscribed"

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in list(self.frames) if f["type"] == kind]


class SeenChain:
    """The chain as a reversible subscriber sees it: a block must extend the top, an undo must
    take off the top and leave the cursor on its parent. A subscription that starts live
    starts on the head its ``subscribed`` frame names, which a fork switch may undo first."""

    def __init__(self, frames: list[dict[str, Any]]) -> None:
        self.blocks: list[tuple[int, str]] = []
        self.undone: list[tuple[int, str]] = []
        for frame in frames:
            if frame["type"] == "subscribed" and not self.blocks:
                head = frame["head"]
                if frame["resume_from"] == head["num"] + 1:
                    self.blocks.append((head["num"], head["id"]))
            elif frame["type"] == "block":
                self._apply(frame)
            elif frame["type"] == "undo":
                self._undo(frame)

    def _apply(self, frame: dict[str, Any]) -> None:
        block = frame["block"]
        if self.blocks:
            assert (block["num"] - 1, block["previous"]) == self.blocks[-1], (block, self.top)
        assert frame["cursor"] == {"num": block["num"], "id": block["id"]}, frame
        self.blocks.append((block["num"], block["id"]))

    def _undo(self, frame: dict[str, Any]) -> None:
        popped = (frame["block"]["num"], frame["block"]["id"])
        assert self.blocks and self.blocks[-1] == popped, f"undo {popped} not the top {self.top}"
        self.blocks.pop()
        self.undone.append(popped)
        if self.blocks:
            assert (frame["cursor"]["num"], frame["cursor"]["id"]) == self.blocks[-1], frame
        else:
            assert frame["cursor"]["num"] == popped[0] - 1, frame

    @property
    def top(self) -> tuple[int, str] | None:
        return self.blocks[-1] if self.blocks else None


def reached(follower: Follower, num: int) -> bool:
    top = SeenChain(follower.frames).top
    return top is not None and top[0] >= num


def block_id(node: NodeProcess, num: int) -> str:
    return str(node.rpc("/v1/chain/get_block", {"block_num_or_id": num})["id"])


def one_producer(nodes: Nodes, tmp: Path, *options: str) -> NodeProcess:
    """A one-producer devnet node run with ``options`` (flags of ``bor-node run``)."""
    plan = loopback_plan(1)
    prepare(tmp, plan)
    node = plan[0]
    admin = node.admin and node.admin[1]
    return nodes.run(tmp / node.name, *options, rpc_port=node.rpc[1], admin_port=admin).start(
        wait_head=2
    )


def dev_keys(tmp: Path) -> dict[str, PrivateKey]:
    return {
        n: PrivateKey.from_text(k) for n, k in json.loads((tmp / "keys.json").read_text()).items()
    }


class Load:
    """Transfers pushed to ``node`` from a thread until the block ends."""

    def __init__(self, node: NodeProcess, keys: dict[str, PrivateKey], pause: float) -> None:
        self.sent: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=push_transfers, args=(node, keys, self._stop, self.sent, pause), daemon=True
        )

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)
