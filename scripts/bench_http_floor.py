"""What HTTP alone costs on this machine, below any node: the floor under a single push.

Two servers answer ``POST /v1/chain/push_transaction`` with a fixed JSON answer, on uvloop
and aiohttp as the node is: ``plain`` reads the body and answers in one process; ``hop``
hands each body to a second process over a Unix socket (frames batched per loop turn both
ways, as a push handed from HTTP workers to the chain's process would go) and answers with
what comes back. bench_apply's own single-push client drives both (``--clients`` at once,
each body a signed transfer's push), so the clients' CPU a request is the same as there.

    python scripts/bench_http_floor.py [--seconds 6] [--clients 50] [--rounds 2]

Figures are medians over the rounds; the last line is a JSON object with, for each server,
its requests a second and its CPU a request (``plain_server_cpu_us``, ``hop_server_cpu_us``
with both of its processes), ``hop_added_cpu_us`` and the clients' ``client_cpu_us``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName
from node.process.eventloop import run as run_loop
from scripts.bench_apply import _push_all, _push_body
from scripts.benchtools import free_port, process_cpu, stop_node

ANSWER = b'{"transaction_id":"00","status":"accepted"}'
FRAME = struct.Struct("<I")  # a batch's length
ITEM = struct.Struct("<II")  # a request's id and its body's length


def _items(batch: bytes) -> list[tuple[int, bytes]]:
    items, offset = [], 0
    while offset < len(batch):
        rid, size = ITEM.unpack_from(batch, offset)
        offset += ITEM.size
        items.append((rid, batch[offset : offset + size]))
        offset += size
    return items


def _frame(items: list[bytes]) -> bytes:
    batch = b"".join(items)
    return FRAME.pack(len(batch)) + batch


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = FRAME.unpack(await reader.readexactly(FRAME.size))
    return await reader.readexactly(size)


async def _serve(app: web.Application, port: int) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


async def plain(port: int) -> None:
    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=ANSWER, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chain/push_transaction", handle)
    await _serve(app, port)


async def far_side(path: str) -> None:
    """The second process of ``hop``: answers each batch of bodies with a batch of answers."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                batch = await _read_frame(reader)
            except asyncio.IncompleteReadError:
                return
            answers = [ITEM.pack(rid, len(ANSWER)) + ANSWER for rid, _ in _items(batch)]
            writer.write(_frame(answers))

    await asyncio.start_unix_server(connection, path)
    await asyncio.Event().wait()


async def hop(port: int, path: str) -> None:
    reader, writer = await asyncio.open_unix_connection(path)
    loop = asyncio.get_running_loop()
    waiting: dict[int, asyncio.Future[bytes]] = {}
    outgoing: list[bytes] = []
    next_id = 0

    def flush() -> None:
        writer.write(_frame(outgoing))
        outgoing.clear()

    async def answers() -> None:
        while True:
            for rid, answer in _items(await _read_frame(reader)):
                asked = waiting.pop(rid)
                if not asked.done():  # its request was cancelled: the client left
                    asked.set_result(answer)

    async def handle(request: web.Request) -> web.Response:
        nonlocal next_id
        body = await request.read()
        rid, next_id = next_id, next_id + 1
        waiting[rid] = answer = loop.create_future()
        if not outgoing:
            loop.call_soon(flush)
        outgoing.append(ITEM.pack(rid, len(body)) + body)
        return web.Response(body=await answer, content_type="application/json")

    reading = asyncio.ensure_future(answers())
    app = web.Application()
    app.router.add_post("/v1/chain/push_transaction", handle)
    try:
        await _serve(app, port)
    finally:
        reading.cancel()


def _start(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, *args])


def _wait_ready(ready: Callable[[], bool], procs: list[subprocess.Popen[bytes]], what: str) -> None:
    """Until ``ready()``, for at most 20 s; raises at once if a server process has exited."""
    deadline = time.monotonic() + 20
    while not ready():
        if any(p.poll() is not None for p in procs):
            raise RuntimeError(f"a server exited before {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"not within 20 s: {what}")
        time.sleep(0.05)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def measure(mode: str, bodies: list[bytes], clients: int, seconds: float) -> dict[str, float]:
    """One round against a fresh ``mode`` server: requests a second, CPU a request."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        socket_path = os.path.join(tmp, "hop.sock")
        procs: list[subprocess.Popen[bytes]] = []
        try:
            if mode == "hop":
                procs.append(_start("far", socket_path))
                _wait_ready(lambda: os.path.exists(socket_path), procs, "the far side's socket")
                procs.append(_start("hop", str(port), socket_path))
            else:
                procs.append(_start("plain", str(port)))
            _wait_ready(lambda: _listening(port), procs, f"a server on port {port}")
            before = [process_cpu(p.pid) for p in procs]
            clients_before = time.process_time()
            started = time.perf_counter()
            ok, refused = asyncio.run(
                _push_all(f"http://127.0.0.1:{port}", bodies, clients, seconds)
            )
            wall = time.perf_counter() - started
            client_cpu = time.process_time() - clients_before
            server_cpu = sum(process_cpu(p.pid) - b for p, b in zip(procs, before, strict=True))
        finally:
            for p in procs:
                stop_node(p)
    assert ok > 0 and refused == 0, (ok, refused)
    return {
        "per_s": ok / wall,
        "server_cpu_us": 1e6 * server_cpu / ok,
        "client_cpu_us": 1e6 * client_cpu / ok,
    }


def push_bodies(count: int) -> list[bytes]:
    """``count`` copies of a signed transfer's push body (the servers do not decode it)."""
    key = PrivateKey.generate()
    transfer = Transfer(AccountName("alice"), AccountName("bob"), 1, "")
    tx = Transaction(int(time.time()) + 600, 1, 2, (transfer,))
    body = json.dumps(_push_body(SignedTransaction.sign(tx, bytes(32), [key])) | {"mode": "sync"})
    return [body.encode()] * count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    bodies = push_bodies(int(args.seconds * 40_000))
    runs: dict[str, list[dict[str, float]]] = {"plain": [], "hop": []}
    for _ in range(args.rounds):
        for mode, rounds in runs.items():  # alternated: the machine's noise hits both
            rounds.append(measure(mode, bodies, args.clients, args.seconds))
            figures = rounds[-1]
            print(
                f"{mode:5}: {figures['per_s']:8,.0f} requests/s, server cpu "
                f"{figures['server_cpu_us']:.1f} us a request, clients' cpu "
                f"{figures['client_cpu_us']:.1f} us"
            )
    median = {
        f"{mode}_{key}": round(statistics.median(r[key] for r in rounds), 1)
        for mode, rounds in runs.items()
        for key in ("per_s", "server_cpu_us")
    }
    median["hop_added_cpu_us"] = round(
        median["hop_server_cpu_us"] - median["plain_server_cpu_us"], 1
    )
    median["client_cpu_us"] = round(
        statistics.median(r["client_cpu_us"] for rounds in runs.values() for r in rounds), 1
    )
    print(json.dumps(median))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("plain", "hop", "far"):
        role, *rest = sys.argv[1:]
        if role == "plain":
            run_loop(plain(int(rest[0])))
        elif role == "hop":
            run_loop(hop(int(rest[0]), rest[1]))
        else:
            run_loop(far_side(rest[0]))
    else:
        main()
