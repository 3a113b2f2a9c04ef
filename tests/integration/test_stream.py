"""``/v1/chain/stream`` on real node processes and real websockets: every block in order, undo
on a fork switch, resume from a cursor, ``lagged`` for a client that never reads, the limits."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from chain.core.crypto import PrivateKey
from node.devnet import prepare
from tests.integration.conftest import (
    NodeProcess,
    Nodes,
    loopback_plan,
    push_transfers,
    wait_for,
)
from tests.integration.test_finality import four_producers
from tests.support.wait import SLOWDOWN

STREAM = "/v1/chain/stream"


def readme_consumer() -> Callable[[str, Path], Coroutine[Any, Any, None]]:
    """The README's resuming consumer, taken from the README itself (all but its last line,
    which runs it against a fixed address), so the two cannot drift apart."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
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


def _reached(follower: Follower, num: int) -> bool:
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


def test_a_subscriber_sees_every_block_of_three_producers_in_order(
    nodes: Nodes, tmp_path: Path
) -> None:
    """On a 3-producer devnet under a push load, a reversible subscriber sees a chain with no
    gap that is the node's chain up to the LIB, and an irreversible_only one sees every block
    up to the LIB once, in order, ids as get_block gives them, never an undo."""
    devnet = nodes.devnet("net", producers=3).start(wait_head=1)
    wait_for(lambda: devnet.info()["peer_count"] == 2, 30, "full mesh")
    live = Follower(devnet.url, {"stream": "blocks"})
    final = Follower(devnet.url, {"stream": "blocks", "irreversible_only": True})
    assert live.subscribed and final.subscribed, (live.frames, final.frames)
    with Load(devnet, dev_keys(devnet.data_dir), 0.2) as load:
        wait_for(lambda: len(load.sent) >= 300, 60, "the network under load (300 transfers)")
    lib = int(devnet.info()["last_irreversible_block_num"])
    wait_for(lambda: final.of_type("block")[-1]["block"]["num"] >= lib, 30, "the LIB streamed")
    wait_for(lambda: SeenChain(live.frames).top is not None, 5, "a live block")
    live.stop()
    final.stop()

    seen = SeenChain(live.frames)
    assert seen.blocks[0][0] <= live.frames[0]["head"]["num"] + 1, "live from the head"
    for num, bid in seen.blocks:
        if num <= lib:
            assert bid == block_id(devnet, num), num
    assert seen.top is not None and seen.top[0] > lib

    assert not final.of_type("undo")
    blocks = [f["block"] for f in final.of_type("block")]
    assert all(f["irreversible"] for f in final.of_type("block"))
    nums = [b["num"] for b in blocks]
    assert nums == list(range(nums[0], nums[0] + len(nums))), "each block once, in order"
    assert nums[0] <= final.frames[0]["lib"]["num"] + 1 and nums[-1] >= lib
    for b in blocks:
        assert b["id"] == block_id(devnet, b["num"]), b
    assert sum(b["transaction_count"] for b in blocks) >= 100, "the blocks carried the load"


def test_a_healed_two_two_partition_undoes_exactly_the_popped_blocks(
    nodes: Nodes, tmp_path: Path
) -> None:
    """Split 2/2, both sides produce, healed: a reversible subscriber on each side gets an
    undo for each block that left its node's chain (highest first, each one it had seen, the
    cursor on its parent) and every block it saw and was not told to undo is on the final
    chain."""
    # node2 -> node1 and node4 -> node3 inside the sides; node3 -> node1, node4 -> node2 across.
    plan, procs = four_producers(nodes, tmp_path, [(1, 0), (3, 2), (2, 0), (3, 1)])
    wait_for(lambda: min(p.info()["last_irreversible_block_num"] for p in procs) > 4, 40, "LIB")
    followers = [Follower(procs[i].url, {"stream": "blocks"}) for i in (0, 2)]
    assert all(f.subscribed for f in followers), [f.frames[:1] for f in followers]
    for side, other in ((2, 0), (3, 1)):
        address = f"127.0.0.1:{plan[other].p2p[1]}"
        for peer in procs[side].rpc("/v1/net/peers")["peers"]:
            if peer["address"] == address:
                procs[side].admin("/v1/net/disconnect", {"peer": peer["peer"]})
    wait_for(lambda: all(p.info()["peer_count"] == 1 for p in procs), 10, "two sides")
    split = max(p.info()["head_block_num"] for p in procs)
    wait_for(
        lambda: all(p.info()["head_block_num"] >= split + 2 for p in (procs[0], procs[2])),
        30,
        "both sides to produce",
    )
    assert procs[0].info()["head_block_id"] != procs[2].info()["head_block_id"], "diverged"
    for side, other in ((2, 0), (3, 1)):
        procs[side].admin("/v1/net/connect", {"address": f"127.0.0.1:{plan[other].p2p[1]}"})
    heal_head = max(p.info()["head_block_num"] for p in procs)
    wait_for(
        lambda: min(p.info()["last_irreversible_block_num"] for p in procs) > heal_head + 2,
        60,
        "finality past the heal on every node",
    )
    lib = min(int(p.info()["last_irreversible_block_num"]) for p in procs)
    for f in followers:
        wait_for(partial(_reached, f, lib), 10, "each subscriber at the LIB")
    for f in followers:
        f.stop()

    undone = 0
    for f in followers:
        seen = SeenChain(f.frames)
        undone += len(seen.undone)
        for num, bid in seen.blocks:
            if num <= lib:
                assert bid == block_id(procs[1], num), f"seen, not undone, yet not final: {num}"
        for num, bid in seen.undone:
            assert bid != block_id(procs[1], num), f"undone yet final: {num}"
    assert undone >= 1, "the losing side's subscriber was told of its popped blocks"


def test_a_killed_client_resumes_from_its_cursor_a_hundred_blocks_later(
    nodes: Nodes, tmp_path: Path
) -> None:
    """A client killed mid-stream and back 100 blocks (about a minute) later with its cursor
    gets every block it missed exactly once: numbers contiguous from cursor + 1, ids as
    get_block gives them."""
    node = one_producer(nodes, tmp_path)
    first = Follower(node.url, {"stream": "blocks"})
    assert first.subscribed, first.frames
    wait_for(lambda: len(first.of_type("block")) >= 4, 10, "a few blocks")
    first.kill()
    cursor = first.of_type("block")[-1]["cursor"]
    missed = cursor["num"] + 100
    wait_for(lambda: int(node.info()["head_block_num"]) >= missed, 120, "100 blocks missed")
    head = int(node.info()["head_block_num"])
    back = Follower(node.url, {"stream": "blocks", "cursor": cursor})
    assert back.subscribed, back.frames
    assert back.frames[0]["resume_from"] == cursor["num"] + 1
    wait_for(lambda: back.of_type("block")[-1]["block"]["num"] >= head + 2, 30, "caught up")
    back.stop()
    nums = [f["block"]["num"] for f in back.of_type("block")]
    assert nums == list(range(cursor["num"] + 1, nums[-1] + 1)), "contiguous, each once"
    SeenChain([first.of_type("block")[-1], *back.frames])  # the first one extends the cursor
    for f in back.of_type("block"):
        assert f["block"]["id"] == block_id(node, f["block"]["num"])


def _upgrade(port: int, source: str = "127.0.0.1") -> socket.socket:
    """A websocket opened by hand from ``source`` on a socket with a tiny receive buffer,
    nothing sent after the upgrade."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10 * SLOWDOWN)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET {STREAM} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while not head.endswith(b"\r\n\r\n"):  # a byte at a time: nothing of the stream is read
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def _handshake(port: int, subscribe: dict[str, Any]) -> socket.socket:
    """A websocket opened by hand on a socket with a tiny receive buffer, its subscription
    sent; the caller then reads nothing, so the node's writes soon block."""
    sock = _upgrade(port)
    payload, mask = json.dumps(subscribe).encode(), os.urandom(4)
    size = (
        bytes([0x80 | len(payload)])
        if len(payload) < 126
        else b"\xfe" + struct.pack("!H", len(payload))
    )
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    sock.sendall(b"\x81" + size + mask + masked)
    return sock


def _read_frames(sock: socket.socket, timeout: float) -> tuple[list[dict[str, Any]], int | None]:
    """Every text frame the node sent (as JSON) up to its close frame, and the close code."""
    data, frames = b"", list[dict[str, Any]]()
    deadline = time.time() + timeout * SLOWDOWN
    while time.time() < deadline:
        while len(data) >= 2:
            opcode, size, at = data[0] & 0x0F, data[1] & 0x7F, 2
            if size == 126:
                size, at = struct.unpack("!H", data[2:4])[0], 4
            elif size == 127:
                size, at = struct.unpack("!Q", data[2:10])[0], 10
            if len(data) < at + size:
                break
            payload, data = data[at : at + size], data[at + size :]
            if opcode == 0x8:
                return frames, struct.unpack("!H", payload[:2])[0] if payload else None
            if opcode == 0x1:
                frames.append(json.loads(payload))
        try:
            chunk = sock.recv(1 << 16)
        except TimeoutError:
            continue
        if not chunk:
            break
        data += chunk
    return frames, None


def _metric(node: NodeProcess, name: str) -> float:
    for line in node.rpc_text("/metrics").splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.split()[-1])
    return 0.0


def test_a_client_that_never_reads_is_cut_with_lagged_and_slows_nobody(
    nodes: Nodes, tmp_path: Path
) -> None:
    """A transactions subscriber that reads nothing is cut with ``lagged`` (its cursor the
    last frame it was sent) and close 1013 once its small buffer fills, while a subscriber
    beside it keeps receiving every block and the head keeps rising."""
    node = one_producer(nodes, tmp_path, "--http-stream-buffer", "4")
    steady = Follower(node.url, {"stream": "blocks"})
    assert steady.subscribed, steady.frames
    victim = _handshake(node.port, {"type": "subscribe", "stream": "transactions"})
    start = int(node.info()["head_block_num"])
    try:
        with Load(node, dev_keys(tmp_path), 0.0):
            wait_for(lambda: _metric(node, "bor_stream_lagged_total") >= 1, 45, "lagged")
            lagged_at = int(node.info()["head_block_num"])
            # Production and the other subscriber carry on.
            wait_for(lambda: int(node.info()["head_block_num"]) >= lagged_at + 3, 20, "3 blocks")
        head = int(node.info()["head_block_num"])
        frames, code = _read_frames(victim, 20)
    finally:
        victim.close()
    assert head >= start + 6, "the head kept rising"
    wait_for(partial(_reached, steady, head), 10, "the steady subscriber at the head")
    steady.stop()
    seen = SeenChain(steady.frames)
    assert not seen.undone and seen.blocks[0][0] <= start + 1
    assert frames[0]["type"] == "subscribed" and frames[-1]["type"] == "lagged", frames[-1:]
    assert code == 1013
    sent = [f for f in frames[1:-1] if f["type"] == "transactions"]
    assert sent, "it was sent something before it fell behind"
    assert frames[-1]["cursor"] == sent[-1]["cursor"], "resume from the last frame delivered"
    assert frames[-1]["reason"]


SUBSCRIBE = json.dumps({"type": "subscribe", "stream": "blocks"})


def _refused(follower: Follower) -> str:
    """The reason of the error a refused stream got before its close."""
    wait_for(lambda: follower.done, 15, "the node to close the stream")
    assert [f["type"] for f in follower.frames] == ["error"], follower.frames
    return str(follower.frames[0]["reason"])


def test_the_stream_limits_refuse_one_over_the_cap_with_a_clear_message(
    nodes: Nodes, tmp_path: Path
) -> None:
    """With 2 streams per address and 3 in all, a third from one address and a fourth from
    another are refused with an error naming the option and close 1013; a stream that ends
    frees its place."""
    node = one_producer(
        nodes, tmp_path, "--http-max-streams", "3", "--http-max-streams-per-address", "2"
    )
    held = [Follower(node.url, {"stream": "blocks"}) for _ in range(2)]
    assert all(f.subscribed for f in held), [f.frames[:1] for f in held]
    over = Follower(node.url, {"stream": "blocks"})
    assert "http-max-streams-per-address = 2" in _refused(over) and over.close_code == 1013
    held.append(Follower(node.url, {"stream": "transactions"}, source="127.0.0.2"))
    assert held[-1].subscribed, held[-1].frames
    over = Follower(node.url, {"stream": "blocks"}, source="127.0.0.3")
    assert "http-max-streams = 3" in _refused(over) and over.close_code == 1013
    held.pop(0).stop()

    def admitted() -> bool:
        again = Follower(node.url, {"stream": "blocks"}, source="127.0.0.3")
        held.append(again)
        return again.subscribed

    wait_for(admitted, 10, "a place freed by a stream that ended")
    for f in held:
        f.stop()
    assert held[0].of_type("block"), "the streams held meanwhile kept flowing"


async def _exchange(url: str, texts: list[str]) -> tuple[list[dict[str, Any]], int | None]:
    """Send ``texts`` on a fresh stream; every frame until the node closes it, and the code."""
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(url + STREAM, heartbeat=None) as ws,
    ):
        for text in texts:
            await ws.send_str(text)
        frames = []
        async with asyncio.timeout(15 * SLOWDOWN):
            async for message in ws:
                frames.append(json.loads(message.data))
        return frames, ws.close_code


@pytest.mark.parametrize(
    "texts",
    [
        ["{not json"],
        [json.dumps({"type": "hello"})],
        [json.dumps({"type": "subscribe", "stream": "everything"})],
        [json.dumps({"type": "subscribe", "stream": "transactions", "accounts": ["Not A Name"]})],
        [json.dumps({"type": "subscribe", "stream": "actions", "actions": ["transfer"] * 65})],
        [json.dumps({"type": "subscribe", "stream": "blocks", "irreversible_only": "yes"})],
        [json.dumps({"type": "subscribe", "stream": "blocks", "cursor": {"num": "x"}})],
        [
            json.dumps(
                {
                    "type": "subscribe",
                    "stream": "blocks",
                    "cursor": {"num": 10**6, "id": f"{10**6:08x}" + "00" * 28},
                }
            )
        ],
        [SUBSCRIBE, SUBSCRIBE],
    ],
    ids=[
        "bad-json",
        "not-subscribe",
        "unknown-stream",
        "bad-account",
        "too-many-actions",
        "bad-flag",
        "bad-cursor",
        "cursor-above-head",
        "second-subscribe",
    ],
)
def test_a_bad_subscription_gets_an_error_not_a_traceback(
    nodes: Nodes, tmp_path: Path, texts: list[str]
) -> None:
    """A malformed or impossible subscription is answered with an error frame giving a
    reason and closed with 1008; the node logs no traceback and serves on."""
    node = one_producer(nodes, tmp_path)
    frames, code = asyncio.run(_exchange(node.url, texts))
    assert frames and frames[-1]["type"] == "error" and frames[-1]["reason"], frames
    assert code == 1008
    assert all(f["type"] in ("subscribed", "block", "lib") for f in frames[:-1]), frames
    assert node.info()["head_block_num"] >= 2
    assert "Traceback" not in node.log.read_text()


def test_the_readme_consumer_resumes_where_it_stopped(
    nodes: Nodes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's consumer, stopped and started again, goes on from the cursor it stored:
    the blocks it printed over both runs are contiguous, each once, as get_block gives them."""
    node = one_producer(nodes, tmp_path)
    cursor_file = tmp_path / "cursor.json"
    follow = readme_consumer()

    async def run_for(seconds: float) -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(follow(node.url, cursor_file), seconds)

    asyncio.run(run_for(3))
    away = int(node.info()["head_block_num"])
    # Blocks go by while it is away.
    wait_for(lambda: int(node.info()["head_block_num"]) >= away + 3, 20, "3 blocks gone by")
    asyncio.run(run_for(3))
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["type"] for e in events].count("subscribed") == 2
    blocks = [e["block"] for e in events if e["type"] == "block"]
    nums = [b["num"] for b in blocks]
    assert len(nums) >= 8 and nums == list(range(nums[0], nums[0] + len(nums))), nums
    assert json.loads(cursor_file.read_text()) == {"num": nums[-1], "id": blocks[-1]["id"]}
    for b in blocks:
        assert b["id"] == block_id(node, b["num"])


def _rss_mib(node: NodeProcess) -> float:
    """The node process's resident memory, in MiB."""
    assert node.proc is not None
    with open(f"/proc/{node.proc.pid}/status") as f:
        line = next(line for line in f if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def test_silent_sockets_are_closed_at_the_deadline_and_leave_room_for_subscribers(
    nodes: Nodes, tmp_path: Path
) -> None:
    """Twelve upgraded sockets that never subscribe, from four addresses, do not take the
    four places of http-max-streams: four subscribers from a fifth address are all served,
    a fourth silent socket from one address is refused with 1013, and each silent one is
    closed with 1008 at the subscribe deadline."""
    node = one_producer(
        nodes,
        tmp_path,
        "--http-max-streams", "4",
        "--http-stream-subscribe-timeout-ms", "2000",
        "--http-max-unsubscribed-streams-per-address", "3",
    )  # fmt: skip
    silent = [_upgrade(node.port, f"127.0.3.{a}") for a in range(1, 5) for _ in range(3)]
    try:
        over, code = _read_frames(_upgrade(node.port, "127.0.3.1"), 10)
        assert code == 1013 and "http-max-unsubscribed-streams-per-address" in str(over)
        honest = [Follower(node.url, {"stream": "blocks"}, source="127.0.4.1") for _ in range(4)]
        assert all(f.subscribed for f in honest), [f.frames[:1] for f in honest]
        for sock in silent:
            frames, code = _read_frames(sock, 15)
            assert code == 1008, frames
            assert "no subscribe message within 2 s" in frames[-1]["reason"]
        for f in honest:
            f.stop()
    finally:
        for sock in silent:
            sock.close()


def test_subscribers_that_never_read_are_cut_and_their_memory_returned(
    nodes: Nodes, tmp_path: Path
) -> None:
    """Twenty transactions subscribers that read nothing while blocks of transfers are made
    are each cut with lagged naming http-stream-buffer-bytes, and once they are gone the
    node holds under 64 MiB more than before them."""
    node = one_producer(nodes, tmp_path, "--http-stream-buffer-bytes", str(256 << 10))
    before = _rss_mib(node)
    victims = [
        _handshake(node.port, {"type": "subscribe", "stream": "transactions"}) for _ in range(20)
    ]
    try:
        with Load(node, dev_keys(tmp_path), 0.0):
            wait_for(lambda: _metric(node, "bor_stream_lagged_total") >= 20, 60, "all cut")
        endings = [_read_frames(sock, 20) for sock in victims]
    finally:
        for sock in victims:
            sock.close()
    for frames, code in endings:
        assert code == 1013 and frames[-1]["type"] == "lagged", frames[-1:]
        assert "http-stream-buffer-bytes" in frames[-1]["reason"]
    wait_for(lambda: _metric(node, "bor_stream_subscribers") == 0, 20, "the sessions gone")
    wait_for(lambda: _rss_mib(node) - before < 64, 20, "the memory given back")
