"""Block propagation on a devnet under a steady transaction load.

Starts ``bor-node devnet --producers N`` (real node processes on loopback, fully meshed),
pushes signed transfers at a steady rate spread over every node's RPC, and reads each node's
JSON log: a block's production time is its producer's ``block_produced`` line, its arrival
on another node that node's ``block_applied`` line. Prints p50/p99/max of the time from
production to application on each other node, and on every other node (the slowest one per
block), with the transactions per block and the rate the nodes accepted.

    python scripts/bench_propagation.py [--rate 1000] [--seconds 30] [--producers 3]

The last line of output is a JSON object of the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName, BlockId
from genesis.devnet import DEV_USERS
from scripts.benchtools import Cores, cores, cores_used, free_ports, post_json, push, tree_cpu

BIN = Path(sys.executable).parent / "bor-node"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def sign_load(info: dict[str, Any], keys: dict[str, PrivateKey], count: int) -> list[bytes]:
    """``count`` distinct transfers among the dev users, as push_transaction bodies."""
    chain_id = bytes.fromhex(info["chain_id"])
    ref = tapos_of(BlockId(bytes.fromhex(info["last_irreversible_block_id"])))
    expiration = int(time.time()) + 3000
    users = list(DEV_USERS)
    bodies = []
    for i in range(count):
        sender, receiver = users[i % len(users)], users[(i + 1) % len(users)]
        action = Transfer(AccountName(sender), AccountName(receiver), 1, f"load {i}")
        tx = Transaction(expiration, ref[0], ref[1], (action,))
        stx = SignedTransaction.sign(tx, chain_id, [keys[sender]])
        body = {
            "packed_trx": stx.packed.hex(),
            "signatures": [stx.signatures[0].hex()],
            "mode": "async",
        }
        bodies.append(json.dumps(body).encode())
    return bodies


async def push_load(urls: list[str], bodies: list[bytes], rate: float) -> tuple[int, int, float]:
    """Send ``bodies`` at ``rate`` per second, round-robin over ``urls``; (ok, refused, s)."""
    ok = refused = 0
    tick = 0.01
    per_tick = rate * tick
    connector = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(url: str, body: bytes) -> None:
            nonlocal ok, refused
            try:
                if await push(session, url, body):
                    ok += 1
                else:
                    refused += 1
            except aiohttp.ClientError:
                refused += 1

        started = time.perf_counter()
        tasks: set[asyncio.Task[None]] = set()
        sent = 0
        while sent < len(bodies):
            due = min(len(bodies), int((time.perf_counter() - started) / tick * per_tick) + 1)
            while sent < due:
                task = asyncio.create_task(one(urls[sent % len(urls)], bodies[sent]))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                sent += 1
            await asyncio.sleep(tick)
        await asyncio.gather(*tasks)
        return ok, refused, time.perf_counter() - started


def read_events(log: Path) -> list[dict[str, Any]]:
    events = []
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


def stamp(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


class Load(NamedTuple):
    """What pushing the load did: pushes accepted and refused, the seconds pushing took, the
    wall-clock window (``start``, ``end``) and the CPU seconds the nodes used in it."""

    ok: int
    refused: int
    spent: float
    start: float
    end: float
    nodes_cpu: float


class Delays(NamedTuple):
    """Milliseconds from production to application: on each other node (``pairs``) and on
    the slowest one per block (``slowest``); blocks some node did not apply are ``missing``."""

    pairs: list[float]
    slowest: list[float]
    txs_per_block: list[int]
    missing: int


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="transactions per second")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--producers", type=int, default=3)
    return parser.parse_args()


def start_devnet(work: Path, producers: int) -> tuple[subprocess.Popen[bytes], list[str]]:
    """``bor-node devnet`` in ``work`` on free ports, in a session of its own (so that
    ``stop_devnet`` reaches every node); the process and its nodes' RPC URLs."""
    rpc_base, p2p_base = free_ports(producers), free_ports(producers)
    devnet = subprocess.Popen(
        [
            str(BIN),
            "devnet",
            "--producers",
            str(producers),
            "--data-dir",
            str(work / "devnet"),
            "--http-server-address",
            f"127.0.0.1:{rpc_base}",
            "--p2p-base-port",
            str(p2p_base),
            "--admin-base-port",
            str(free_ports(producers)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return devnet, [f"http://127.0.0.1:{rpc_base + i}" for i in range(producers)]


def wait_for_lib(
    devnet: subprocess.Popen[bytes], urls: list[str], *, within_s: float, bench: str
) -> dict[str, Any]:
    """The first node's get_info once every node's LIB is past 3; ``bench`` exits if the
    devnet stops or ``within_s`` pass first."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            infos = [post_json(u + "/v1/chain/get_info") for u in urls]
            if min(i["last_irreversible_block_num"] for i in infos) > 3:
                return dict(infos[0])
        except OSError:
            pass
        if devnet.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{bench}: the devnet did not reach a LIB")
        time.sleep(0.5)


def stop_devnet(devnet: subprocess.Popen[bytes]) -> None:
    os.killpg(devnet.pid, signal.SIGTERM)
    try:
        devnet.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(devnet.pid, signal.SIGKILL)


def dev_keys(work: Path) -> dict[str, PrivateKey]:
    """The dev users' keys, from the keys.json the devnet wrote."""
    keys_doc = json.loads((work / "devnet" / "keys.json").read_text())
    return {name: PrivateKey.from_text(k) for name, k in keys_doc.items()}


def apply_load(
    devnet: subprocess.Popen[bytes],
    work: Path,
    urls: list[str],
    info: dict[str, Any],
    args: argparse.Namespace,
) -> Load:
    keys = dev_keys(work)
    count = int(args.rate * args.seconds)
    print(f"signing {count:,} transfers …", flush=True)
    bodies = sign_load(info, keys, count)
    print(f"pushing {args.rate:,.0f} tx/s for {args.seconds:.0f} s to {len(urls)} nodes …")
    nodes_cpu = tree_cpu(devnet.pid)  # the devnet's node processes and their workers
    load_start = time.time()
    ok, refused, spent = asyncio.run(push_load(urls, bodies, args.rate))
    time.sleep(3)  # the last blocks propagate
    load_end = time.time()
    nodes_cpu = tree_cpu(devnet.pid) - nodes_cpu
    return Load(ok, refused, spent, load_start, load_end, nodes_cpu)


def read_blocks(
    work: Path, producers: int
) -> tuple[dict[str, tuple[float, str, int]], dict[str, dict[str, float]]]:
    """From the nodes' logs: each block's production (time, producer, transactions) and, per
    block, the time each node applied it."""
    produced: dict[str, tuple[float, str, int]] = {}
    applied: dict[str, dict[str, float]] = {}
    for i in range(producers):
        node = f"node{i + 1}"
        for event in read_events(work / "devnet" / node / "node.log"):
            if event.get("event") == "block_produced":
                produced[event["id"]] = (stamp(event), node, event["txs"])
            elif event.get("event") == "block_applied":
                applied.setdefault(event["id"], {})[node] = stamp(event)
    return produced, applied


def measure_delays(
    produced: dict[str, tuple[float, str, int]],
    applied: dict[str, dict[str, float]],
    producers: int,
    load: Load,
) -> Delays:
    """The delays of the blocks produced under load, less the last 3 s (their propagation
    was not waited for)."""
    pairs: list[float] = []
    slowest: list[float] = []
    txs_per_block: list[int] = []
    missing = 0
    for block_id, (t0, origin, txs) in produced.items():
        if not load.start <= t0 <= load.end - 3:
            continue
        arrivals = applied.get(block_id, {})
        others = [n for n in (f"node{i + 1}" for i in range(producers)) if n != origin]
        if any(n not in arrivals for n in others):
            missing += 1
            continue
        delays = [(arrivals[n] - t0) * 1000 for n in others]
        pairs.extend(delays)
        slowest.append(max(delays))
        txs_per_block.append(txs)
    if not slowest:
        raise SystemExit("bench_propagation: no block was seen on every node")
    return Delays(pairs, slowest, txs_per_block, missing)


def report(args: argparse.Namespace, machine: Cores, load: Load, delays: Delays) -> None:
    """Print the figures in sentences, then as the JSON object that is the last line."""
    ok, refused, spent = load.ok, load.refused, load.spent
    pairs, slowest, missing = delays.pairs, delays.slowest, delays.missing
    figures = {
        "rate_target": args.rate,
        "rate_accepted": round(ok / spent),
        "refused": refused,
        "blocks": len(slowest),
        "blocks_missing_somewhere": missing,
        "txs_per_block_mean": round(statistics.mean(delays.txs_per_block)),
        "every_node_p50_ms": round(percentile(slowest, 0.5), 1),
        "every_node_p99_ms": round(percentile(slowest, 0.99), 1),
        "every_node_max_ms": round(max(slowest), 1),
        "each_node_p50_ms": round(percentile(pairs, 0.5), 1),
        "each_node_p99_ms": round(percentile(pairs, 0.99), 1),
        "cores_available": machine.available,
        "cores_used": cores_used(load.nodes_cpu, load.end - load.start),
    }
    print(
        f"load: {ok:,} accepted ({ok / spent:,.0f} tx/s), {refused:,} refused; "
        f"{len(slowest)} blocks, {figures['txs_per_block_mean']} tx per block; "
        f"the nodes used {figures['cores_used']:.2f} cores"
    )
    print(
        f"production → applied on every other node: p50 {figures['every_node_p50_ms']} ms, "
        f"p99 {figures['every_node_p99_ms']} ms, max {figures['every_node_max_ms']} ms"
    )
    print(
        f"production → applied, per node: p50 {figures['each_node_p50_ms']} ms, "
        f"p99 {figures['each_node_p99_ms']} ms"
    )
    if missing:
        print(f"{missing} blocks were not applied on some node (forked out or missed)")
    print(json.dumps(figures))


def main() -> None:
    args = parse_args()
    machine = cores()
    print(machine, flush=True)
    work = Path(tempfile.mkdtemp(prefix="bor-bench-prop-"))
    devnet, urls = start_devnet(work, args.producers)
    try:
        info = wait_for_lib(devnet, urls, within_s=90, bench="bench_propagation")
        load = apply_load(devnet, work, urls, info, args)
    finally:
        stop_devnet(devnet)
    produced, applied = read_blocks(work, args.producers)
    shutil.rmtree(work, ignore_errors=True)
    report(args, machine, load, measure_delays(produced, applied, args.producers, load))


if __name__ == "__main__":
    main()
