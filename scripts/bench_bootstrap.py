"""Joining a chain: full block sync against state sync, on a short and a long history.

Generates two histories (``make_history``) with the same accounts and the same transaction
lifetime, one of ``--short`` and one of ``--long`` transactions, so that their final states
are of one size (the accounts, and the de-duplication set of the last 10 minutes of chain
time) while their lengths differ. For each, a node serves the history with a snapshot of
its LIB (made beforehand, as a node's ``snapshot-interval-blocks`` would); a fresh node then
joins it once by full block sync and once by state sync (``--state-sync`` with the
snapshot's block as the trusted one), each timed from its process start until it is in sync
at the history's head.

    python scripts/bench_bootstrap.py [--accounts 100000] [--short 200000] [--long 1000000]
                                      [--txs-per-block 200] [--work DIR]

``--work`` keeps the generated histories for the next run (they take minutes to make).
The last line of output is a JSON object: join_full_s_short, join_full_s_long,
join_state_sync_s_short, join_state_sync_s_long, speedup_state_sync_vs_full (long history)
and state_sync_long_over_short.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from node.snapshots.service import read_snapshot_head
from scripts.bench_sync import BIN, fresh_dir, rpc, start_node, stop
from scripts.benchtools import cores
from scripts.make_history import make_history


def history(work: Path, name: str, txs: int, per_block: int, accounts: int) -> dict[str, Any]:
    """The history in ``work/name`` (made unless it is there), with a snapshot of its LIB."""
    path = work / name
    summary_file = work / f"{name}.json"
    if not summary_file.exists():
        shutil.rmtree(path, ignore_errors=True)
        started = time.perf_counter()
        summary = make_history(path, txs=txs, per_block=per_block, accounts=accounts)
        print(f"made {name}: {txs:,} transactions in {time.perf_counter() - started:.0f} s")
        made = subprocess.run(
            [str(BIN), "snapshot", "create", "--data-dir", str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        print(made.stdout.strip())
        summary_file.write_text(json.dumps(summary))
    summary = json.loads(summary_file.read_text())
    (snapshot,) = sorted((path / "snapshots").glob("snapshot-*.bin"))
    head = read_snapshot_head(snapshot)
    summary["trusted"] = head.block.id.hex()
    summary["snapshot_bytes"] = snapshot.stat().st_size
    return dict(summary)


def join(work: Path, source: Path, p2p: int, head: int, name: str, *extra: str) -> float:
    """Seconds from a fresh node's start until it is in sync at ``head``."""
    target = fresh_dir(work, name, source / "genesis.json")
    started = time.perf_counter()
    proc, http, _ = start_node(target, "--p2p-peer-address", f"127.0.0.1:{p2p}", *extra)
    try:
        while True:
            try:
                info = rpc(http, "/v1/chain/get_info")
            except OSError:  # between the state-sync phase and the node it restarts as
                info = {"head_block_num": 0, "sync_stage": ""}
            if info["head_block_num"] >= head and info["sync_stage"] == "in_sync":
                return time.perf_counter() - started
            if proc.poll() is not None:
                raise SystemExit(f"bench_bootstrap: the {name} node exited ({proc.returncode})")
            time.sleep(0.1)
    finally:
        stop(proc)
        shutil.rmtree(target, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--accounts", type=int, default=100_000)
    parser.add_argument("--short", type=int, default=200_000)
    parser.add_argument("--long", type=int, default=1_000_000)
    parser.add_argument("--txs-per-block", type=int, default=200)
    parser.add_argument("--work", type=Path)
    args = parser.parse_args()
    machine = cores()
    print(machine, flush=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="bor-bootstrap-"))
    work.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {"accounts": args.accounts, "cores_available": machine.available}
    for label, txs in (("short", args.short), ("long", args.long)):
        h = history(work, f"history-{txs}", txs, args.txs_per_block, args.accounts)
        server, _, p2p = start_node(work / f"history-{txs}")
        try:
            head = int(h["head"])
            full = join(work, work / f"history-{txs}", p2p, head, f"full-{label}")
            print(f"{label} ({txs:,} txs, head {head}): full block sync {full:.1f} s")
            state = join(
                work,
                work / f"history-{txs}",
                p2p,
                head,
                f"state-{label}",
                "--state-sync",
                "on",
                "--state-sync-trusted-block",
                h["trusted"],
            )
            print(
                f"{label}: state sync {state:.1f} s (snapshot {h['snapshot_bytes'] / 1e6:.1f} MB)"
            )
        finally:
            stop(server)
        figures |= {
            f"join_full_s_{label}": round(full, 2),
            f"join_state_sync_s_{label}": round(state, 2),
            f"snapshot_bytes_{label}": h["snapshot_bytes"],
            f"txs_{label}": txs,
        }
    figures["speedup_state_sync_vs_full"] = round(
        figures["join_full_s_long"] / figures["join_state_sync_s_long"], 2
    )
    figures["state_sync_long_over_short"] = round(
        figures["join_state_sync_s_long"] / figures["join_state_sync_s_short"], 3
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
