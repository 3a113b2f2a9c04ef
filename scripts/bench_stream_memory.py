"""Does stream replay give its memory back? 64 subscribers replay a history of large blocks
from its start at once, twice, and the node's resident memory is sampled throughout.

Makes a history with scripts/make_history.py (--blocks blocks of --per-block transfers, each
memo padded to 256 characters: about 180 KB a block), serves it from ``bor-node run`` (not
producing, so the chain stands still), then in each round opens --subscribers websockets
from several loopback addresses, each resuming from block 1 (a third each of the blocks,
transactions and actions streams) and reading to the head. After each round it waits
--settle seconds and reads RSS again.

    python scripts/bench_stream_memory.py [--blocks 120] [--per-block 500] [--quick]

The node runs whatever code ``bor-node`` imports: set PYTHONPATH to a worktree to measure
another revision. The last line of output is a JSON object with ``rss_before_mib``,
``rss_peak_mib``, ``rss_after_mib`` (the last round's, --settle s after it) and
``held_mib`` (after minus before; target: 300 or less).
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
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.benchtools import free_port, post_json, start_node, stop_node
from scripts.make_history import make_history

STREAM = "/v1/chain/stream"
SOURCES = ("127.0.1.1", "127.0.1.2", "127.0.1.3", "127.0.1.4")
STREAMS = ("blocks", "transactions", "actions")
MIB = 1 << 20


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` in MiB (``VmRSS``)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


class PeakSampler:
    """The highest RSS of a process, sampled every 50 ms on a thread of its own."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, rss_mib(self.pid))

    def __enter__(self) -> PeakSampler:
        self.peak = rss_mib(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def replay_all(
    url: str, cursor: dict[str, Any], head: int, last: int, count: int
) -> dict[str, Any]:
    """``count`` subscribers resume from ``cursor`` at once and read to block ``head`` (the
    transactions and actions streams to ``last``, the last block with transactions: the
    empty blocks after it have no frame on those streams)."""
    sessions = [
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, local_addr=(a, 0)))
        for a in SOURCES
    ]
    received = [0]
    failures: list[str] = []

    async def one(n: int) -> None:
        session = sessions[n % len(sessions)]
        stream = STREAMS[n % 3]
        subscribe = {"type": "subscribe", "stream": stream, "cursor": cursor}
        tail = f'"cursor":{{"num":{head if stream == "blocks" else last},'.encode()
        async with session.ws_connect(url + STREAM, max_msg_size=0) as ws:
            await ws.send_json(subscribe)
            while True:
                message = await ws.receive(timeout=120)
                if message.type is not aiohttp.WSMsgType.TEXT:
                    failures.append(f"closed {ws.close_code} before the head")
                    return
                data = message.data.encode()
                received[0] += len(data)
                # Frames are not parsed: 64 clients decoding gigabytes of JSON would measure
                # the client. Each stream's frame for a block names it by its cursor.
                if data.startswith((b'{"type":"error"', b'{"type":"lagged"')):
                    failures.append(message.data[:200])
                    return
                if tail in data[:120]:
                    return

    try:
        await asyncio.gather(*(one(n) for n in range(count)))
    finally:
        for session in sessions:
            await session.close()
    return {"bytes": received[0], "failures": failures}


def start_history_node(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``bor-node run`` serving the history in ``data`` (not producing); waits for get_info."""
    args = ["--p2p-listen-endpoint", f"127.0.0.1:{free_port()}"]
    return start_node(data, args, "the history node")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=120, help="blocks of large transfers")
    parser.add_argument("--per-block", type=int, default=500, help="transfers a block")
    parser.add_argument("--subscribers", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settle", type=float, default=30.0, help="seconds after each round")
    parser.add_argument("--quick", action="store_true", help="40 blocks, 5 s settle")
    args = parser.parse_args()
    if args.quick:
        args.blocks, args.settle = 40, 5.0

    work = Path(tempfile.mkdtemp(prefix="bor-bench-stream-memory-"))
    try:
        t0 = time.perf_counter()
        made = make_history(
            work / "history", txs=args.blocks * args.per_block, per_block=args.per_block, memo=256
        )
        print(f"history made in {time.perf_counter() - t0:.0f} s: {made}", flush=True)
        proc, url = start_history_node(work / "history")
        try:
            head = int(post_json(url + "/v1/chain/get_info")["head_block_num"])
            first = post_json(url + "/v1/chain/get_block", {"block_num_or_id": 1})
            cursor = {"num": 1, "id": first["id"]}
            last = head
            while not post_json(url + "/v1/chain/get_block", {"block_num_or_id": last})[
                "transactions"
            ]:
                last -= 1
            time.sleep(2.0)  # let start-up's allocations settle
            before = rss_mib(proc.pid)
            print(f"head {head}; RSS before {before:.0f} MiB", flush=True)
            peaks, afters, failures = [], [], 0
            for r in range(args.rounds):
                with PeakSampler(proc.pid) as sampler:
                    started = time.perf_counter()
                    got = asyncio.run(replay_all(url, cursor, head, last, args.subscribers))
                    seconds = time.perf_counter() - started
                    time.sleep(args.settle)
                after = rss_mib(proc.pid)
                peaks.append(sampler.peak)
                afters.append(after)
                failures += len(got["failures"])
                print(
                    f"round {r + 1}: {args.subscribers} replays of {head - 1} blocks in "
                    f"{seconds:.1f} s ({got['bytes'] / MIB:,.0f} MiB sent); RSS peak "
                    f"{sampler.peak:.0f} MiB, {args.settle:g} s after {after:.0f} MiB; "
                    f"{len(got['failures'])} failures",
                    flush=True,
                )
                for failure in got["failures"][:3]:
                    print(f"    {failure}")
        finally:
            stop_node(proc)
        figures = {
            "rss_before_mib": round(before),
            "rss_peak_mib": round(max(peaks)),
            "rss_after_mib": round(afters[-1]),
            "rss_after_each_round_mib": [round(a) for a in afters],
            "held_mib": round(afters[-1] - before),
            "failures": failures,
            "blocks": head,
            "per_block": args.per_block,
            "subscribers": args.subscribers,
            "rounds": args.rounds,
            "settle_s": args.settle,
        }
        print(json.dumps(figures))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
