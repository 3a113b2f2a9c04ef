"""Do RPC reads starve writes? Push throughput alone and beside a read-heavy load.

Starts one producing node (``bor-node run``, a genesis with many funded accounts), then, in
each round: 30 clients push signed transfers (mode sync) for a fixed time alone; then the
same 30 clients push again while 20 more clients read — get_info, get_block of one of the
last few (full) blocks, get_account, get_producers and /metrics in turn. The readers run in
their own process and do not parse what they read (except get_info, for the head), so the
client side costs the node's CPU as little as it can on a small machine.

    python scripts/bench_rpc.py [--seconds 6] [--rounds 3] [--pushers 30] [--readers 20]

Figures are the medians over the rounds. The last line of output is a JSON object with
``push_alone_per_s``, ``push_with_readers_per_s``, ``ratio_with_readers``, ``read_p50_ms`` and
``read_p99_ms``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from scripts.bench_apply import bench_genesis, signed_transfers
from scripts.benchtools import (
    cores,
    cores_used,
    post_json,
    process_cpu,
    push,
    start_producer,
    stop_node,
    tree_cpu,
)

# Budget of signed transfers per push phase and second: above any rate a 2-core machine
# reaches (~3,000 tx/s), so the pushers never run out before the clock does.
SIGNED_PER_S = 5_000
# Recent blocks the readers ask for: the ones a block explorer or an exchange would poll.
RECENT_BLOCKS = 8


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start_node(work: Path, accounts: int) -> tuple[subprocess.Popen[bytes], str, list[str], Any]:
    genesis, keys = bench_genesis(accounts)
    data = work / "node"
    data.mkdir()
    (data / "genesis.json").write_text(json.dumps(genesis.to_json()))
    producer = keys["producera"]
    key_text = f"{public_key_to_text(producer.public_key)}=KEY:{producer.to_text()}"
    proc, url = start_producer(data, "producera", key_text)
    users = [n for n in keys if n.startswith("user")]
    return proc, url, users, keys


def push_bodies(url: str, keys: dict[str, PrivateKey], count: int, offset: int) -> list[bytes]:
    info = post_json(url + "/v1/chain/get_info")
    chain_id = bytes.fromhex(info["chain_id"])
    ref = bytes.fromhex(info["head_block_id"])
    return [
        json.dumps(
            {"packed_trx": t.packed.hex(), "signatures": [t.signatures[0].hex()], "mode": "sync"}
        ).encode()
        for t in signed_transfers(chain_id, ref, keys, count, offset)
    ]


async def push_phase(url: str, bodies: list[bytes], clients: int, seconds: float) -> float:
    """Accepted pushes per second of ``clients`` concurrent pushers for ``seconds``."""
    ok = 0
    queue = iter(bodies)
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        deadline = started + seconds

        async def client() -> None:
            nonlocal ok
            for body in queue:
                if time.perf_counter() > deadline:
                    return
                accepted = await push(session, url, body)  # not `ok += await`: a lost update
                ok += accepted

        await asyncio.gather(*(client() for _ in range(clients)))
        return ok / (time.perf_counter() - started)


async def _read(url: str, clients: int, seconds: float, users: list[str]) -> dict[str, Any]:
    latencies: list[float] = []
    by_path: dict[str, list[float]] = {}
    failed = 0
    head = 1
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.perf_counter() + seconds

        async def one(method: str, path: str, body: dict[str, Any] | None) -> bytes:
            nonlocal failed
            t0 = time.perf_counter()
            async with session.request(method, url + path, json=body) as response:
                raw = await response.read()
                if response.status != 200:
                    failed += 1
            latencies.append(time.perf_counter() - t0)
            by_path.setdefault(path, []).append(latencies[-1])
            return raw

        async def client(n: int) -> None:
            nonlocal head
            rng = random.Random(n)
            step = n  # readers start at different requests of the cycle
            while time.perf_counter() < deadline:
                kind = step % 5
                step += 1
                if kind == 0:
                    raw = await one("POST", "/v1/chain/get_info", {})
                    head = max(head, json.loads(raw).get("head_block_num", head))
                elif kind == 1:
                    num = max(1, head - rng.randrange(RECENT_BLOCKS))
                    await one("POST", "/v1/chain/get_block", {"block_num_or_id": num})
                elif kind == 2:
                    await one("POST", "/v1/chain/get_account", {"account_name": rng.choice(users)})
                elif kind == 3:
                    await one("POST", "/v1/chain/get_producers", {})
                else:
                    await one("GET", "/metrics", None)

        await asyncio.gather(*(client(n) for n in range(clients)))
    return {"latencies": latencies, "by_path": by_path, "failed": failed}


def read_phase(url: str, clients: int, seconds: float, users: list[str]) -> dict[str, Any]:
    """Run in a process of its own: ``clients`` readers for ``seconds``."""
    return asyncio.run(_read(url, clients, seconds, users))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="length of each phase")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pushers", type=int, default=30)
    parser.add_argument("--readers", type=int, default=20)
    parser.add_argument("--accounts", type=int, default=2000)
    args = parser.parse_args()

    machine = cores()
    print(machine, flush=True)
    work = Path(tempfile.mkdtemp(prefix="bor-bench-rpc-"))
    proc, url, users, keys = start_node(work, args.accounts)
    pool = multiprocessing.get_context("spawn").Pool(1)
    try:
        per_phase = int(args.seconds * SIGNED_PER_S)
        alone, mixed, ratios, p50s, p99s = [], [], [], [], []
        offset = 0
        cpu0, tree0, t0 = process_cpu(proc.pid), tree_cpu(proc.pid), time.perf_counter()
        for r in range(args.rounds):
            bodies = push_bodies(url, keys, 2 * per_phase, offset)
            offset += 2 * per_phase
            a = asyncio.run(push_phase(url, bodies[:per_phase], args.pushers, args.seconds))
            time.sleep(1.0)  # let the mempool drain into blocks
            reads = pool.apply_async(read_phase, (url, args.readers, args.seconds, users))
            m = asyncio.run(push_phase(url, bodies[per_phase:], args.pushers, args.seconds))
            got = reads.get()
            lat = [x * 1000 for x in got["latencies"]]
            p50, p99 = percentile(lat, 0.5), percentile(lat, 0.99)
            print(
                f"round {r + 1}: push alone {a:7,.0f}/s, with readers {m:7,.0f}/s "
                f"({m / a:.2f}); {len(lat) / args.seconds:,.0f} reads/s, "
                f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, {got['failed']} failed"
            )
            for path, values in sorted(got["by_path"].items()):
                ms = [x * 1000 for x in values]
                print(
                    f"    {path:26s} {len(ms):6d} reads, p50 {percentile(ms, 0.5):6.1f} ms, "
                    f"p99 {percentile(ms, 0.99):6.1f} ms"
                )
            alone.append(a)
            mixed.append(m)
            ratios.append(m / a)
            p50s.append(p50)
            p99s.append(p99)
            time.sleep(1.0)
        # With its signature workers: the cores the node kept busy over the whole run.
        used = cores_used(tree_cpu(proc.pid) - tree0, time.perf_counter() - t0)
        print(f"node cpu over the run: {process_cpu(proc.pid) - cpu0:.1f} s, {used:.2f} cores used")
        figures = {
            "push_alone_per_s": round(statistics.median(alone)),
            "push_with_readers_per_s": round(statistics.median(mixed)),
            "ratio_with_readers": round(statistics.median(ratios), 3),
            "read_p50_ms": round(statistics.median(p50s), 1),
            "read_p99_ms": round(statistics.median(p99s), 1),
            "rounds": args.rounds,
            "seconds": args.seconds,
            "cores_available": machine.available,
            "node_cores_used": used,
        }
        print(json.dumps(figures))
    finally:
        pool.terminate()
        stop_node(proc)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
