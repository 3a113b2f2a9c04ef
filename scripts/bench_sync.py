"""Bootstrap throughput: a fresh node syncing over TCP from a peer, against a local import.

Generates a history (``make_history``: transfers, stakes, votes, new accounts, schedule
changes), starts a node serving it, and for each validation mode (full, light) bootstraps
one fresh node over TCP on loopback and, in the same run, imports the history's export file
into another fresh data dir with ``bor-node import``. Both are timed from process start to
the export's last block (the LIB of the history), so start-up costs both the same.

An import and the sync beside it form a pair; each mode runs ``--repeat`` pairs (5 by
default), every other pair syncing first, and reports medians: the ratio sync rate / import
rate is the median of the pairs' ratios, since on a shared machine an import and a sync run
minutes apart can see different loads (one ratio moved from 0.84 to 1.17 between runs of the
same code when each mode ran one pair).

Prints blocks/s, tx/s and MB/s of each, the CPU seconds of every process (with its signature
workers), CPU seconds per 1,000 transactions on the sending and the receiving node, the cores
used by the importing or receiving node's own process (its threads, which share one GIL,
without its signature workers) and by its busiest thread (near 1.0, one thread or the GIL is
the bound: more cores cannot help), the ratio network-sync rate / local-import
rate, and sync tx/s in units of R (single-core Ed25519 verifications per second through
``cryptography``, measured in the same run).

    python scripts/bench_sync.py [--txs 200000] [--txs-per-block 1000] [--history DIR]
                                 [--transport tcp|rdma|tcp,rdma] [--modes full,light]
                                 [--p2p-tls on|off] [--repeat 5]

``--transport rdma`` needs pyverbs and an RDMA device (run it with the RDMA venv's python,
``.venv-rdma/bin/python``; on Soft-RoCE see ``scripts/rdma-vm-test``): both nodes then run
with ``rdma = required`` and the script checks the sync really went over RDMA.

``--p2p-tls`` sets both nodes' ``p2p-tls`` (default on, as a node's): run it both ways on one
``--history`` to see what TLS costs.

The last line of output is a JSON object of the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench_apply import measure_r
from scripts.benchtools import (
    KeptConnection,
    busiest_thread_cpu,
    cores,
    cores_used,
    free_port,
    post_json,
    process_cpu,
    tree_cpu,
)
from scripts.make_history import make_history

BIN = Path(sys.executable).parent / "bor-node"


def rpc(port: int, path: str, body: dict[str, Any] | None = None) -> Any:
    return post_json(f"http://127.0.0.1:{port}{path}", body)


def start_node(data_dir: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int, int]:
    http, p2p = free_port(), free_port()
    log = (data_dir.parent / f"{data_dir.name}.log").open("ab")
    proc = subprocess.Popen(
        [
            str(BIN),
            "run",
            "--data-dir",
            str(data_dir),
            "--http-server-address",
            f"127.0.0.1:{http}",
            "--admin-http-server-address",
            "",
            "--p2p-listen-endpoint",
            f"127.0.0.1:{p2p}",
            "--log-level",
            "warning",
            "--log-format",
            "json",
            *extra,
        ],
        stdout=log,
        stderr=log,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            rpc(http, "/v1/chain/get_info")
            return proc, http, p2p
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"bench_sync: node on {data_dir} did not start") from None
            time.sleep(0.1)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def fresh_dir(work: Path, name: str, genesis: Path) -> Path:
    path = work / name
    path.mkdir()
    shutil.copy(genesis, path / "genesis.json")
    return path


IMPORT_POLL_S = 0.1  # how often an import's threads are read while it runs


def run_import(work: Path, history: Path, mode: str) -> dict[str, float]:
    target = fresh_dir(work, f"import-{mode}", history / "genesis.json")
    started = time.perf_counter()
    proc = subprocess.Popen(
        [
            str(BIN),
            "import",
            str(history / "history.log"),
            "--data-dir",
            str(target),
            "--validation-mode",
            mode,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    # Polled rather than waited for, to follow its own process (without its signature workers)
    # and its busiest thread until it exits (the last IMPORT_POLL_S of it unseen).
    busiest = own = 0.0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        busiest = max(busiest, busiest_thread_cpu(proc.pid))
        with contextlib.suppress(OSError):
            own = process_cpu(proc.pid)
        time.sleep(IMPORT_POLL_S)
    seconds = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"bench_sync: import ({mode}) failed with status {status}")
    shutil.rmtree(target, ignore_errors=True)
    return {
        "seconds": seconds,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "own_s": own,
        "busiest_s": busiest,
    }


# Bounds of ``poll_delay``. Polled every 50 ms throughout, a syncing node answered ~360
# get_info calls over an 18 s light sync, each taking the GIL from its chain thread, while the
# import beside it is not polled (its progress goes to a pipe); polled by ``poll_delay``,
# about 80, and the end is still seen within POLL_MIN_S.
POLL_MIN_S = 0.02
POLL_MAX_S = 0.25
POLL_START_S = 0.1


def poll_delay(head: int, lib: int, elapsed: float) -> float:
    """Seconds to wait before asking a node ``elapsed`` seconds into its sync, at block
    ``head`` of ``lib``, for its head again: a quarter of the time left at its mean rate so
    far, between ``POLL_MIN_S`` and ``POLL_MAX_S``; ``POLL_START_S`` before its first
    block."""
    if head <= 0:
        return POLL_START_S
    left = (lib - head) * elapsed / head
    return min(POLL_MAX_S, max(POLL_MIN_S, left / 4))


def run_sync(
    work: Path,
    history: Path,
    source: tuple[int, int],
    mode: str,
    lib: int,
    transport: str,
    tls: str,
) -> Any:
    source_pid, source_p2p = source
    target = fresh_dir(work, f"sync-{mode}-{transport}", history / "genesis.json")
    source_cpu = tree_cpu(source_pid)
    started = time.perf_counter()
    proc, http, _ = start_node(
        target,
        "--p2p-peer-address",
        f"127.0.0.1:{source_p2p}",
        "--validation-mode",
        mode,
        "--rdma",
        "required" if transport == "rdma" else "off",
        "--p2p-tls",
        tls,
    )
    poll = KeptConnection(http)
    try:
        while (head := poll.post("/v1/chain/get_info")["head_block_num"]) < lib:
            time.sleep(poll_delay(head, lib, time.perf_counter() - started))
        seconds = time.perf_counter() - started
        cpu = tree_cpu(proc.pid)
        own = process_cpu(proc.pid)
        busiest = busiest_thread_cpu(proc.pid)
        sent = tree_cpu(source_pid) - source_cpu
        peers = rpc(http, "/v1/net/peers")["peers"]
        received = sum(p["bytes_received"] for p in peers)
        used = {p["transport"] for p in peers}
    finally:
        poll.close()
        stop(proc)
    if used != {transport}:
        raise SystemExit(f"bench_sync: asked for {transport}, the sync used {used}")
    shutil.rmtree(target, ignore_errors=True)
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        "own_s": own,
        "busiest_s": busiest,
        "source_cpu_s": sent,
        "bytes": received,
    }


def run_pair(
    work: Path,
    history: Path,
    source: tuple[int, int],
    mode: str,
    lib: int,
    transports: list[str],
    tls: str,
    pair: int,
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """One import and, beside it, one sync over each transport. Every other pair runs the
    syncs first, so that a trend in the machine's load favours neither side."""

    def syncs() -> dict[str, dict[str, float]]:
        return {t: run_sync(work, history, source, mode, lib, t, tls) for t in transports}

    if pair % 2:
        done = syncs()
        return run_import(work, history, mode), done
    imp = run_import(work, history, mode)
    return imp, syncs()


def report_import(mode: str, imp: dict[str, float], lib: int, txs: int, size: int) -> None:
    m = imp["seconds"]
    print(
        f"{mode:5} import      : {m:6.1f} s  {lib / m:7,.0f} blocks/s  "
        f"{txs / m:7,.0f} tx/s  {size / 1e6 / m:5.2f} MB/s  "
        f"cpu {imp['cpu_s']:.1f} s ({imp['cpu_s'] / txs * 1000:.3f} s per 1k tx), "
        f"cores used {cores_used(imp['cpu_s'], m):.2f} (its own process "
        f"{cores_used(imp['own_s'], m):.2f}, busiest thread {cores_used(imp['busiest_s'], m):.2f})",
        flush=True,
    )


def report_sync(
    mode: str, transport: str, syn: dict[str, float], ratio: float, lib: int, txs: int, size: int
) -> None:
    s_ = syn["seconds"]
    print(
        f"{mode:5} sync {transport:4}   : {s_:6.1f} s  {lib / s_:7,.0f} blocks/s  "
        f"{txs / s_:7,.0f} tx/s  {size / 1e6 / s_:5.2f} MB/s  "
        f"cpu {syn['cpu_s']:.1f} s ({syn['cpu_s'] / lib * 1000:.1f} s per 1k "
        f"blocks); sender cpu {syn['source_cpu_s']:.1f} s "
        f"({syn['source_cpu_s'] / lib * 1000:.2f} s per 1k blocks); "
        f"cores used {cores_used(syn['cpu_s'], s_):.2f} "
        f"({cores_used(syn['cpu_s'] + syn['source_cpu_s'], s_):.2f} with the sender; its own "
        f"process {cores_used(syn['own_s'], s_):.2f}, busiest thread "
        f"{cores_used(syn['busiest_s'], s_):.2f}); sync/import {ratio:.3f}",
        flush=True,
    )


def summarise(
    imports: list[dict[str, float]], syncs: list[dict[str, float]], lib: int, txs: int, size: int
) -> dict[str, Any]:
    """The figures of one mode and transport over its import/sync pairs: medians, with the
    ratio the median of the pairs' ratios (an import and the sync beside it share the
    machine's load of the moment), and cores used the median of the runs' own."""
    med = statistics.median
    ratios = [i["seconds"] / s["seconds"] for i, s in zip(imports, syncs, strict=True)]
    m = med(i["seconds"] for i in imports)
    s_ = med(s["seconds"] for s in syncs)
    cpu = med(s["cpu_s"] for s in syncs)
    sent = med(s["source_cpu_s"] for s in syncs)
    return {
        "import_s": round(m, 2),
        "sync_s": round(s_, 2),
        "sync_blocks_per_s": round(lib / s_, 1),
        "sync_tx_per_s": round(txs / s_),
        "import_tx_per_s": round(txs / m),
        "sync_mb_per_s": round(size / 1e6 / s_, 2),
        "ratio_sync_import": round(med(ratios), 3),
        "sync_tx_per_s_exact": txs / s_,
        "import_cpu_s": round(med(i["cpu_s"] for i in imports), 1),
        "receiver_cpu_s": round(cpu, 1),
        "sender_cpu_s": round(sent, 1),
        "receiver_cpu_s_per_1k_tx": round(cpu / txs * 1000, 4),
        "sender_cpu_s_per_1k_tx": round(sent / txs * 1000, 4),
        "receiver_cpu_s_per_1k_blocks": round(cpu / lib * 1000, 2),
        "sender_cpu_s_per_1k_blocks": round(sent / lib * 1000, 2),
        "mb_received": round(med(s["bytes"] for s in syncs) / 1e6, 2),
        "import_cores_used": round(med(i["cpu_s"] / i["seconds"] for i in imports), 2),
        "receiver_cores_used": round(med(s["cpu_s"] / s["seconds"] for s in syncs), 2),
        "import_process_cores_used": round(med(i["own_s"] / i["seconds"] for i in imports), 2),
        "receiver_process_cores_used": round(med(s["own_s"] / s["seconds"] for s in syncs), 2),
        "import_busiest_thread": round(med(i["busiest_s"] / i["seconds"] for i in imports), 2),
        "receiver_busiest_thread": round(med(s["busiest_s"] / s["seconds"] for s in syncs), 2),
        "cores_used": round(med((s["cpu_s"] + s["source_cpu_s"]) / s["seconds"] for s in syncs), 2),
        "pairs": len(ratios),
        "ratio_samples": [round(r, 3) for r in ratios],
        "import_s_samples": [round(i["seconds"], 2) for i in imports],
        "sync_s_samples": [round(s["seconds"], 2) for s in syncs],
    }


class History(NamedTuple):
    """The history the source node serves: its dir, its LIB, its transactions and the
    bytes of its export file."""

    path: Path
    lib: int
    txs: int
    size: int


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--txs", type=int, default=200_000)
    parser.add_argument("--txs-per-block", type=int, default=1000)
    parser.add_argument("--accounts", type=int, default=5000)
    parser.add_argument("--history", type=Path, help="reuse (or keep) a history in this dir")
    parser.add_argument("--modes", default="full,light")
    parser.add_argument("--transport", default="tcp", help="tcp, rdma, or tcp,rdma")
    parser.add_argument("--p2p-tls", default="on", choices=("on", "off"))
    parser.add_argument(
        "--repeat", type=int, default=5, help="import/sync pairs per mode (the medians are used)"
    )
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def ensure_history(history: Path, args: argparse.Namespace) -> None:
    """Generate the history in ``history`` unless it holds one already (``--history``)."""
    if not (history / "history.log").exists():
        print(f"generating a history of {args.txs:,} transfers …", flush=True)
        t0 = time.perf_counter()
        make_history(history, args.txs, args.txs_per_block, accounts=args.accounts)
        print(f"  done in {time.perf_counter() - t0:.0f} s")


def read_history(path: Path, http: int) -> History:
    """The history as the node on ``http`` serves it."""
    info = rpc(http, "/v1/chain/get_info")
    lib = info["last_irreversible_block_num"]
    size = (path / "history.log").stat().st_size
    txs = sum(
        len(rpc(http, "/v1/chain/get_block", {"block_num_or_id": n})["transactions"])
        for n in range(1, lib + 1)
    )  # counted on the node, not taken from the generator
    print(f"history: {lib:,} irreversible blocks, {txs:,} transactions, {size / 1e6:.1f} MB")
    return History(path, lib, txs, size)


def measure_mode(
    work: Path,
    history: History,
    source: tuple[int, int],
    mode: str,
    transports: list[str],
    args: argparse.Namespace,
    r_samples: list[float],
) -> dict[str, Any]:
    """Run ``--repeat`` pairs of ``mode``, each reported as it ends and followed by a sample
    of R; the figures of each transport over the pairs, by their key in the JSON object."""
    lib, txs, size = history.lib, history.txs, history.size
    imports: list[dict[str, float]] = []
    syncs: dict[str, list[dict[str, float]]] = {t: [] for t in transports}
    for pair in range(args.repeat):
        imp, syns = run_pair(work, history.path, source, mode, lib, transports, args.p2p_tls, pair)
        imports.append(imp)
        report_import(mode, imp, lib, txs, size)
        for transport, syn in syns.items():
            syncs[transport].append(syn)
            ratio = imp["seconds"] / syn["seconds"]
            report_sync(mode, transport, syn, ratio, lib, txs, size)
        r_samples.append(measure_r())
    figures: dict[str, Any] = {}
    for transport in transports:
        key = mode if transport == "tcp" else f"{mode}_{transport}"
        figures[key] = summarise(imports, syncs[transport], lib, txs, size)
    return figures


def settle_r(figures: dict[str, Any], r_samples: list[float]) -> None:
    """Take the last sample of R, make R the median of the samples, and give each mode's
    sync rate in units of it (``sync_R``)."""
    r_samples.append(measure_r())
    figures["R_after"] = round(r_samples[-1])
    r = statistics.median(r_samples)
    figures["R"] = round(r)
    figures["R_samples"] = [round(x) for x in r_samples]
    print(f"R samples {figures['R_samples']}: median {r:,.0f} (sync_R uses it)")
    for key, value in figures.items():
        if isinstance(value, dict) and "sync_tx_per_s_exact" in value:
            value["sync_R"] = round(value.pop("sync_tx_per_s_exact") / r, 3)
            print(
                f"{key:10} median of {value['pairs']} pairs: sync/import "
                f"{value['ratio_sync_import']:.3f} (pairs {value['ratio_samples']}), "
                f"sync_R {value['sync_R']:.3f}"
            )


def main() -> None:
    args = parse_args()
    machine = cores()
    print(machine, flush=True)
    work = Path(tempfile.mkdtemp(prefix="bor-bench-sync-"))
    history_dir = args.history or work / "history"
    try:
        ensure_history(history_dir, args)
        transports = args.transport.split(",")
        source, http, p2p = start_node(
            history_dir,
            "--rdma",
            "auto" if "rdma" in transports else "off",
            "--p2p-tls",
            args.p2p_tls,
        )
        history = read_history(history_dir, http)
        # R moves with the load of this shared machine (8.1k to 5.4k inside one run was
        # seen): it is sampled before, between and after the runs, and the median is used.
        r_samples = [measure_r()]
        print(f"R (Ed25519 verify/s, one core): {r_samples[0]:,.0f}")
        figures: dict[str, Any] = {
            "R": round(r_samples[0]),
            "blocks": history.lib,
            "txs": history.txs,
            "mb": history.size / 1e6,
            "p2p_tls": args.p2p_tls,
            "repeat": args.repeat,
            "cores_available": machine.available,
        }
        try:
            for mode in args.modes.split(","):
                source_at = (source.pid, p2p)
                figures.update(
                    measure_mode(work, history, source_at, mode, transports, args, r_samples)
                )
        finally:
            stop(source)
        settle_r(figures, r_samples)
        print(json.dumps(figures))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
