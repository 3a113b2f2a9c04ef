"""Do websocket subscribers slow the node? Push rate alone and beside 100 subscribers of
/v1/chain/stream, how soon they get each block, and how fast one catches up from far behind.

Starts one producing node (``bor-node run``, a genesis with many funded accounts). In each
round, pushers send signed transfers (mode sync) paced at --rate per second for --seconds,
alone; then again while --subscribers websockets are open in a process of their own, half
following blocks, half the transactions of one account each. The rounds alternate the two
phases and the figures are medians over the rounds.

Delivery latency is a frame's arrival minus the start of its block's slot (for a
transactions frame, the slot its block had on the blocks streams). The producer makes its
block at the slot's start, so this is commit-to-subscriber plus the time the block took to
make and commit: an upper bound on the delay the stream adds. Client and node share the
machine's clock.

Catch-up: a second node serves a history made by scripts/make_history.py (--history blocks,
one transfer each); a subscriber resumes from a cursor that many blocks below its head and
the blocks per second until it has the head are counted (target: 20x the production rate of
2 blocks/s).

    python scripts/bench_stream.py [--seconds 6] [--rounds 3] [--rate 1000] [--quick]

The last line of output is a JSON object with ``push_ratio_with_subscribers``,
``delivery_p50_ms``, ``delivery_p99_ms`` and ``resume_catchup_blocks_per_s``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.core.primitives.params import slot_start_ms
from scripts.bench_rpc import percentile, push_bodies, start_node
from scripts.benchtools import cores, free_port, post_json, push, stop_node
from scripts.make_history import make_history

STREAM = "/v1/chain/stream"
# Concurrent pushers: enough to hold the paced rate while each waits for its answer.
PUSHERS = 20
SOURCES = ("127.0.1.1", "127.0.1.2", "127.0.1.3", "127.0.1.4")


async def paced_push(url: str, bodies: list[bytes], rate: float, seconds: float) -> float:
    """Accepted pushes per second, the i-th push sent no earlier than i / ``rate`` s in."""
    ok = 0
    queue = iter(enumerate(bodies))
    connector = aiohttp.TCPConnector(limit=PUSHERS)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        deadline = started + seconds

        async def client() -> None:
            nonlocal ok
            for i, body in queue:
                due = started + i / rate
                if due > deadline:
                    return
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                accepted = await push(session, url, body)
                ok += accepted

        await asyncio.gather(*(client() for _ in range(PUSHERS)))
        return ok / (time.perf_counter() - started)


async def _subscribe(
    url: str, accounts: list[str], blocks: int, seconds: float, ready: Event
) -> dict[str, Any]:
    slots: dict[str, int] = {}  # block id -> slot, from the blocks streams
    arrivals: list[tuple[str, float]] = []  # (block id, unix ms) of every frame
    failures: list[str] = []
    answered = 0
    # Streams come from several loopback addresses, as from several clients: one address
    # may hold http-max-streams-per-address (64) of them.
    sessions = [
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, local_addr=(a, 0)))
        for a in SOURCES
    ]
    try:
        opened = asyncio.Event()
        deadline = [0.0]

        async def one(n: int) -> None:
            nonlocal answered
            if n < blocks:
                subscription: dict[str, Any] = {"stream": "blocks"}
            else:
                subscription = {"stream": "transactions", "accounts": [accounts[n]]}
            session = sessions[n % len(sessions)]
            async with session.ws_connect(url + STREAM) as ws:
                await ws.send_json({"type": "subscribe", **subscription})
                first = await ws.receive_json(timeout=10)
                answered += 1
                if answered == len(accounts):
                    opened.set()
                if first["type"] != "subscribed":
                    failures.append(str(first))
                    return
                await opened.wait()
                while (left := deadline[0] - time.time()) > 0:
                    try:
                        message = await ws.receive(timeout=left)
                    except TimeoutError:
                        return
                    if message.type != aiohttp.WSMsgType.TEXT:
                        failures.append(f"closed: {ws.close_code}")
                        return
                    now = time.time() * 1000
                    frame = json.loads(message.data)
                    if frame["type"] == "block":
                        slots[frame["block"]["id"]] = frame["block"]["slot"]
                    if frame["type"] in ("block", "transactions"):
                        arrivals.append((frame["block"]["id"], now))
                    elif frame["type"] in ("lagged", "error"):
                        failures.append(str(frame))

        async def start() -> None:
            await opened.wait()
            deadline[0] = time.time() + seconds
            ready.set()

        await asyncio.gather(start(), *(one(n) for n in range(len(accounts))))
    finally:
        for session in sessions:
            await session.close()
    delays = [now - slot_start_ms(slots[b]) for b, now in arrivals if b in slots]
    return {"delays_ms": delays, "frames": len(arrivals), "failures": failures}


def subscribe_phase(
    url: str, accounts: list[str], blocks: int, seconds: float, ready: Event, out: Any
) -> None:
    """Run in a process of its own: ``len(accounts)`` streams, the first ``blocks`` of them
    following blocks, the others the transactions of their account, for ``seconds`` from
    when all are subscribed (``ready`` is set then)."""
    out.put(asyncio.run(_subscribe(url, accounts, blocks, seconds, ready)))


async def _catch_up(url: str, cursor: dict[str, Any], head: int) -> float:
    """Seconds from subscribing at ``cursor`` to holding block ``head``."""
    async with aiohttp.ClientSession() as session, session.ws_connect(url + STREAM) as ws:
        started = time.perf_counter()
        await ws.send_json({"type": "subscribe", "stream": "blocks", "cursor": cursor})
        expected = cursor["num"] + 1
        while expected <= head:
            frame = await ws.receive_json(timeout=60)
            if frame["type"] == "block":
                assert frame["block"]["num"] == expected, (frame, expected)
                expected += 1
            elif frame["type"] != "subscribed":
                raise RuntimeError(f"catch-up: {frame}")
        return time.perf_counter() - started


def catch_up(work: Path, blocks: int) -> float:
    """Blocks per second of a subscriber resuming ``blocks`` below the head of a history."""
    t0 = time.perf_counter()
    make_history(work / "history", txs=blocks, per_block=1, accounts=50)
    print(f"history of {blocks:,} blocks made in {time.perf_counter() - t0:.0f} s")
    port = free_port()
    cmd = [
        str(Path(sys.executable).parent / "bor-node"),
        "run",
        "--data-dir", str(work / "history"),
        "--http-server-address", f"127.0.0.1:{port}",
        "--admin-http-server-address", "",
        "--p2p-listen-endpoint", f"127.0.0.1:{free_port()}",
        "--log-level", "warning",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                head = int(post_json(url + "/v1/chain/get_info", timeout=2)["head_block_num"])
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("the history node did not start")
        num = max(1, head - blocks)
        block = post_json(url + "/v1/chain/get_block", {"block_num_or_id": num})
        seconds = asyncio.run(_catch_up(url, {"num": num, "id": block["id"]}, head))
        rate = (head - num) / seconds
        print(f"catch-up: {head - num:,} blocks in {seconds:.2f} s, {rate:,.0f} blocks/s")
        return rate
    finally:
        stop_node(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="length of each phase")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=1000.0, help="pushes per second")
    parser.add_argument("--subscribers", type=int, default=100)
    parser.add_argument("--history", type=int, default=10_000, help="blocks to catch up")
    parser.add_argument("--accounts", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="1 round of 3 s, 2,000 blocks")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.rounds, args.history = 3.0, 1, 2000

    machine = cores()
    print(machine, flush=True)
    work = Path(tempfile.mkdtemp(prefix="bor-bench-stream-"))
    proc, url, users, keys = start_node(work, args.accounts)
    ctx = multiprocessing.get_context("spawn")
    try:
        per_phase = int(args.seconds * args.rate) + 1
        alone, mixed, ratios, p50s, p99s = [], [], [], [], []
        offset = 0
        for r in range(args.rounds):
            bodies = push_bodies(url, keys, 2 * per_phase, offset)
            offset += 2 * per_phase
            a = asyncio.run(paced_push(url, bodies[:per_phase], args.rate, args.seconds))
            time.sleep(1.0)  # let the mempool drain into blocks
            ready, out = ctx.Event(), ctx.Queue()
            half = args.subscribers // 2
            watcher = ctx.Process(
                target=subscribe_phase,
                args=(url, users[: args.subscribers], half, args.seconds, ready, out),
            )
            watcher.start()
            if not ready.wait(timeout=60):
                raise RuntimeError("the subscribers did not all subscribe")
            m = asyncio.run(paced_push(url, bodies[per_phase:], args.rate, args.seconds))
            got = out.get(timeout=60)
            watcher.join(timeout=30)
            delays = got["delays_ms"]
            p50, p99 = percentile(delays, 0.5), percentile(delays, 0.99)
            print(
                f"round {r + 1}: push alone {a:6,.0f}/s, with {args.subscribers} subscribers "
                f"{m:6,.0f}/s ({m / a:.2f}); {got['frames']:,} frames, delivery p50 "
                f"{p50:.1f} ms, p99 {p99:.1f} ms; {len(got['failures'])} failures"
            )
            for failure in got["failures"][:5]:
                print(f"    {failure[:200]}")
            alone.append(a)
            mixed.append(m)
            ratios.append(m / a)
            p50s.append(p50)
            p99s.append(p99)
            time.sleep(1.0)
        resume = catch_up(work, args.history)
        figures = {
            "push_alone_per_s": round(statistics.median(alone)),
            "push_with_subscribers_per_s": round(statistics.median(mixed)),
            "push_ratio_with_subscribers": round(statistics.median(ratios), 3),
            "delivery_p50_ms": round(statistics.median(p50s), 1),
            "delivery_p99_ms": round(statistics.median(p99s), 1),
            "resume_catchup_blocks_per_s": round(resume),
            "rounds": args.rounds,
            "seconds": args.seconds,
            "rate": args.rate,
            "subscribers": args.subscribers,
            "cores_available": machine.available,
        }
        print(json.dumps(figures))
    finally:
        stop_node(proc)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
