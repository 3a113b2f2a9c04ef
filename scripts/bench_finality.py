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
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.core.crypto import PrivateKey
from scripts.bench_propagation import percentile, push_load, read_events, sign_load, stamp
from scripts.benchtools import cores, cores_used, free_ports, post_json, tree_cpu

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


def start_devnet(work: Path, producers: int) -> tuple[subprocess.Popen[bytes], list[str]]:
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


def wait_for_lib(devnet: subprocess.Popen[bytes], urls: list[str]) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        try:
            infos = [post_json(u + "/v1/chain/get_info") for u in urls]
            if min(i["last_irreversible_block_num"] for i in infos) > 3:
                return dict(infos[0])
        except OSError:
            pass
        if devnet.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("bench_finality: the devnet did not reach a LIB")
        time.sleep(0.5)


def final_ids(url: str, first: int, last: int) -> dict[int, str]:
    """Ids of the final chain's blocks ``first``..``last`` as one node has them."""
    out = {}
    for num in range(first, last + 1):
        try:
            out[num] = post_json(url + "/v1/chain/get_block", {"block_num_or_id": num})["id"]
        except OSError:
            break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="transactions per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--producers", type=int, default=4)
    args = parser.parse_args()

    machine = cores()
    print(machine, flush=True)
    work = Path(tempfile.mkdtemp(prefix="bor-bench-finality-"))
    devnet, urls = start_devnet(work, args.producers)
    lags: list[int] = []
    stop = threading.Event()
    try:
        info = wait_for_lib(devnet, urls)
        keys_doc = json.loads((work / "devnet" / "keys.json").read_text())
        keys = {name: PrivateKey.from_text(k) for name, k in keys_doc.items()}
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
        final_info = post_json(urls[0] + "/v1/chain/get_info")
        chain = final_ids(urls[0], 1, int(final_info["last_irreversible_block_num"]))
    finally:
        stop.set()
        os.killpg(devnet.pid, signal.SIGTERM)
        try:
            devnet.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(devnet.pid, signal.SIGKILL)

    nodes = [f"node{i + 1}" for i in range(args.producers)]
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
    shutil.rmtree(work, ignore_errors=True)

    latencies: list[float] = []
    slowest: list[float] = []
    forked = unfinalized = 0
    for short_id, (t0, origin, num) in produced.items():
        if not load_start <= t0 <= load_end:
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
    figures = {
        "producers": args.producers,
        "finality_p50_ms": round(percentile(latencies, 0.5), 1),
        "finality_p99_ms": round(percentile(latencies, 0.99), 1),
        "finality_max_ms": round(max(latencies), 1),
        "every_node_p99_ms": round(percentile(slowest, 0.99), 1),
        "lib_lag_blocks_max": max(lags) if lags else None,
        "blocks": len(slowest),
        "blocks_forked_out": forked,
        "blocks_not_final_everywhere": unfinalized,
        "production_pauses": paused,
        "rate_target": args.rate,
        "rate_accepted": round(ok / spent),
        "refused": refused,
        "cores_available": machine.available,
        "cores_used": cores_used(nodes_cpu, load_end - load_start),
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


if __name__ == "__main__":
    main()
