"""Time to finality on a devnet under a steady transaction load (finality by votes).

Starts ``bor-node devnet --producers N`` (real node processes on loopback, fully meshed, a
finality = votes chain), pushes signed transfers at a steady rate spread over every node's
RPC, and reads each node's JSON log: a block's production time is its producer's
``block_produced`` line; a node considers it final at its first ``lib_advanced`` line with
a LIB at or above it. For every block produced under load and every other node, the time
from production to finality there; and the largest gap between head and LIB any node
reported, sampled over the RPC every 200 ms. Blocks that did not end on the final chain
(forked out) are counted apart.

    python scripts/bench_finality.py [--rate 1000] [--seconds 60] [--producers 4]

The last line of output is a JSON object with producers, finality_p50_ms, finality_p99_ms
and lib_lag_blocks_max (and the rest of the figures). Run it alone on the machine
(``flock /tmp/bor-heavy.lock``): it uses every core.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench_propagation import (
    Load,
    dev_keys,
    percentile,
    push_load,
    read_events,
    sign_load,
    stamp,
    start_devnet,
    stop_devnet,
    wait_for_lib,
)
from scripts.benchtools import Cores, cores, cores_used, post_json, tree_cpu

BIN = Path(sys.executable).parent / "bor-node"
SAMPLE_S = 0.2  # head/LIB sampling period over the RPC


def sample_lags(urls: list[str], stop: threading.Event, out: list[int]) -> None:
    """Append head - LIB of every node every SAMPLE_S until ``stop``."""
    while not stop.is_set():
        for url in urls:
            try:
                info = post_json(url + "/v1/chain/get_info", timeout=2)
            except OSError:
                continue
            out.append(int(info["head_block_num"]) - int(info["last_irreversible_block_num"]))
        stop.wait(SAMPLE_S)


def final_ids(url: str, first: int, last: int) -> dict[int, str]:
    """Ids of the final chain's blocks ``first``..``last`` as one node has them."""
    out = {}
    for num in range(first, last + 1):
        try:
            out[num] = post_json(url + "/v1/chain/get_block", {"block_num_or_id": num})["id"]
        except OSError:
            break
    return out


class Finality(NamedTuple):
    """Milliseconds from production to finality: on each other node (``latencies``) and on
    the slowest one per block (``slowest``); blocks ``forked`` out, and blocks some node did
    not see final (``unfinalized``)."""

    latencies: list[float]
    slowest: list[float]
    forked: int
    unfinalized: int


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="transactions per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--producers", type=int, default=4)
    return parser.parse_args()


def apply_load(
    devnet: subprocess.Popen[bytes],
    work: Path,
    urls: list[str],
    info: dict[str, Any],
    args: argparse.Namespace,
) -> tuple[Load, list[int]]:
    """Push the load, then wait for its last blocks to become final; what the load did, and
    head - LIB of every node sampled all along."""
    lags: list[int] = []
    stop = threading.Event()
    try:
        keys = dev_keys(work)
        count = int(args.rate * args.seconds)
        print(f"signing {count:,} transfers …", flush=True)
        bodies = sign_load(info, keys, count)
        print(f"pushing {args.rate:,.0f} tx/s for {args.seconds:.0f} s to {len(urls)} nodes …")
        sampler = threading.Thread(target=sample_lags, args=(urls, stop, lags), daemon=True)
        sampler.start()
        nodes_cpu = tree_cpu(devnet.pid)  # the devnet's node processes and their workers
        load_start = time.time()
        ok, refused, spent = asyncio.run(push_load(urls, bodies, args.rate))
        load_end = time.time()
        nodes_cpu = tree_cpu(devnet.pid) - nodes_cpu
        time.sleep(5)  # the last blocks of the load become final
        stop.set()
        sampler.join()
    finally:
        stop.set()
    return Load(ok, refused, spent, load_start, load_end, nodes_cpu), lags


def read_finality(
    work: Path, nodes: list[str]
) -> tuple[dict[str, tuple[float, str, int]], dict[str, list[tuple[int, float]]], int]:
    """From the nodes' logs: each block's production (time, producer, number), each node's
    LIB advances (LIB, time), and how many times production paused for want of votes."""
    produced: dict[str, tuple[float, str, int]] = {}  # id -> (time, node, num)
    final_at: dict[str, list[tuple[int, float]]] = {n: [] for n in nodes}  # (lib, time)
    paused = 0
    for node in nodes:
        for event in read_events(work / "devnet" / node / "node.log"):
            kind = event.get("event")
            if kind == "block_produced":
                produced[event["id"]] = (stamp(event), node, int(event["num"]))
            elif kind == "lib_advanced":
                final_at[node].append((int(event["lib"]), stamp(event)))
            elif kind == "production_paused_no_votes":
                paused += 1
    return produced, final_at, paused


def measure_finality(
    produced: dict[str, tuple[float, str, int]],
    final_at: dict[str, list[tuple[int, float]]],
    chain: dict[int, str],
    nodes: list[str],
    load: Load,
) -> Finality:
    """The finality of the blocks produced under load; a block not on ``chain`` (the final
    chain's ids by number) was forked out."""
    latencies: list[float] = []
    slowest: list[float] = []
    forked = unfinalized = 0
    for short_id, (t0, origin, num) in produced.items():
        if not load.start <= t0 <= load.end:
            continue
        if not chain.get(num, "").startswith(short_id):
            forked += 1
            continue
        per_node = []
        for node in nodes:
            if node == origin:
                continue
            when = next((t for lib, t in final_at[node] if lib >= num), None)
            if when is None:
                break
            per_node.append((when - t0) * 1000)
        if len(per_node) != len(nodes) - 1:
            unfinalized += 1
            continue
        latencies.extend(per_node)
        slowest.append(max(per_node))
    if not latencies:
        raise SystemExit("bench_finality: no block under load became final on every node")
    return Finality(latencies, slowest, forked, unfinalized)


def report(
    args: argparse.Namespace,
    machine: Cores,
    load: Load,
    lags: list[int],
    paused: int,
    finality: Finality,
) -> None:
    """Print the figures in sentences, then as the JSON object that is the last line."""
    ok, refused, spent = load.ok, load.refused, load.spent
    latencies, slowest, forked = finality.latencies, finality.slowest, finality.forked
    figures = {
        "producers": args.producers,
        "finality_p50_ms": round(percentile(latencies, 0.5), 1),
        "finality_p99_ms": round(percentile(latencies, 0.99), 1),
        "finality_max_ms": round(max(latencies), 1),
        "every_node_p99_ms": round(percentile(slowest, 0.99), 1),
        "lib_lag_blocks_max": max(lags) if lags else None,
        "blocks": len(slowest),
        "blocks_forked_out": forked,
        "blocks_not_final_everywhere": finality.unfinalized,
        "production_pauses": paused,
        "rate_target": args.rate,
        "rate_accepted": round(ok / spent),
        "refused": refused,
        "cores_available": machine.available,
        "cores_used": cores_used(load.nodes_cpu, load.end - load.start),
    }
    print(
        f"load: {ok:,} accepted ({ok / spent:,.0f} tx/s), {refused:,} refused; "
        f"{len(slowest)} blocks final on every node, {forked} forked out; "
        f"the nodes used {figures['cores_used']:.2f} cores"
    )
    print(
        f"production → final on each other node: p50 {figures['finality_p50_ms']} ms, "
        f"p99 {figures['finality_p99_ms']} ms, max {figures['finality_max_ms']} ms; "
        f"head - LIB at most {figures['lib_lag_blocks_max']} blocks"
    )
    print(json.dumps(figures))


def main() -> None:
    args = parse_args()
    machine = cores()
    print(machine, flush=True)
    work = Path(tempfile.mkdtemp(prefix="bor-bench-finality-"))
    devnet, urls = start_devnet(work, args.producers)
    try:
        info = wait_for_lib(devnet, urls, within_s=120, bench="bench_finality")
        load, lags = apply_load(devnet, work, urls, info, args)
        final_info = post_json(urls[0] + "/v1/chain/get_info")
        chain = final_ids(urls[0], 1, int(final_info["last_irreversible_block_num"]))
    finally:
        stop_devnet(devnet)
    nodes = [f"node{i + 1}" for i in range(args.producers)]
    produced, final_at, paused = read_finality(work, nodes)
    shutil.rmtree(work, ignore_errors=True)
    finality = measure_finality(produced, final_at, chain, nodes, load)
    report(args, machine, load, lags, paused, finality)


if __name__ == "__main__":
    main()
