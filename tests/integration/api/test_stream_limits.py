"""``/v1/chain/stream`` against hostile and careless clients on a real node: ``lagged`` for a
client that never reads, one over each cap refused with a clear message, a bad subscription
answered with an error, silent sockets closed at the deadline, and the memory of clients cut
returned."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct
import time
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.integration.api.stream_clients import (
    STREAM,
    Follower,
    Load,
    SeenChain,
    dev_keys,
    one_producer,
    reached,
)
from tests.integration.conftest import (
    NodeProcess,
    Nodes,
    wait_for,
)
from tests.support.wait import SLOWDOWN


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
    wait_for(partial(reached, steady, head), 10, "the steady subscriber at the head")
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
