"""A flood of unauthenticated P2P connections against one real node, and its memory.

Starts a one-producer devnet node (``bor-node run``), lets it settle, then opens N TCP
connections to its P2P port that each get through the preamble and TLS as any dialler does
(``--p2p-tls off``: plaintext, for both ends), then send a frame header announcing an 8 MiB
frame and ``--body`` bytes of it, never finishing, from ``--sources`` loopback addresses
(127.0.0.2 …).
The node's RSS (``VmRSS`` in ``/proc/<pid>/status``) is sampled throughout: printed are the
baseline, the peak during the flood, the RSS a few seconds after every connection is gone,
and how long the node took to close the connections it accepted.

    python scripts/bench_flood.py [--connections 100 200] [--body 8388000] [--sources 1]
        [--p2p-tls on]

The last line of output is a JSON object of the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from node.commands.devnet import plan, prepare
from p2p.errors import ChannelClosed
from scripts.benchtools import cores, free_port, free_ports, post_json
from scripts.peers import negotiated, until_closed

BIN = Path(sys.executable).parent / "bor-node"
ANNOUNCED = 8 * 1024 * 1024  # the frame length each connection announces (MAX_FRAME_SIZE)
_CHUNK = bytes(1 << 20)


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` in MiB (``VmRSS``)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def source_address(i: int, sources: int) -> str:
    """The loopback address connection ``i`` comes from (Linux answers all of 127/8)."""
    n = 2 + i % sources
    return f"127.0.{n // 256}.{n % 256}"


async def hostile(
    host: str,
    port: int,
    source: str,
    body: int,
    hold: float,
    drip: float = 0.0,
    announce: int = ANNOUNCED,
    tls: bool = True,
) -> float | None:
    """One connection: the preamble and (with ``tls``) TLS, then a header announcing a hello
    of ``announce`` bytes and ``body`` bytes of it (one byte every ``drip`` seconds if
    ``drip``), held for at most ``hold`` seconds. Returns how long the node took to close it
    after our frame header (after connecting, if it closed it before TLS; 0.0 if it could not
    be opened), or None if it was open at the end. Our side of TLS costs us CPU, not the node,
    so it is not counted."""
    try:
        reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0))
    except OSError:
        return 0.0
    start = time.monotonic()
    try:
        async with asyncio.timeout(hold):
            channel, _ = await negotiated(reader, writer, tls=tls)
    except TimeoutError:
        return None
    except ChannelClosed:  # refused by a cap: closed before it answered our preamble
        return time.monotonic() - start
    start = time.monotonic()

    async def send() -> None:
        await channel.send_raw(announce.to_bytes(4, "big") + b"\x00")
        if drip:
            for _ in range(body):
                await asyncio.sleep(drip)
                await channel.send_raw(b"\x00")
            return
        left = body
        while left > 0:
            await channel.send_raw(_CHUNK[: min(left, len(_CHUNK))])
            left -= len(_CHUNK)

    sender = asyncio.ensure_future(send())
    try:
        async with asyncio.timeout(hold - (time.monotonic() - start)):
            await until_closed(channel)
    except TimeoutError:
        return None
    finally:
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, ChannelClosed):
            await sender
        await channel.close()
    return time.monotonic() - start


@dataclass(frozen=True, slots=True)
class FloodResult:
    connections: int
    sources: int
    baseline_mib: float
    peak_mib: float
    after_mib: float
    closed: int  # connections the node closed (or refused) before the hold ended
    slowest_close_s: float  # the longest a connection stayed open before the node closed it


async def flood(
    host: str,
    port: int,
    pid: int,
    connections: int,
    sources: int = 1,
    body: int = ANNOUNCED - 1024,
    hold: float = 8.0,
    settle: float = 3.0,
    drip: float = 0.0,
    announce: int = ANNOUNCED,
    tls: bool = True,
) -> FloodResult:
    """Open ``connections`` hostile connections at once, sample the node's RSS until they are
    all gone, and again ``settle`` seconds later."""
    baseline = rss_mib(pid)
    peak = baseline
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_mib(pid))
            await asyncio.sleep(0.02)

    sampler = asyncio.ensure_future(sample())
    closes = await asyncio.gather(
        *(
            hostile(host, port, source_address(i, sources), body, hold, drip, announce, tls)
            for i in range(connections)
        )
    )
    done.set()
    await sampler
    await asyncio.sleep(settle)
    ended = [c for c in closes if c is not None]
    return FloodResult(
        connections,
        sources,
        round(baseline, 1),
        round(peak, 1),
        round(rss_mib(pid), 1),
        len(ended),
        round(max(ended, default=0.0), 2),
    )


def start_node(tmp: Path, extra: list[str]) -> tuple[subprocess.Popen[bytes], str, int]:
    """A one-producer devnet node under ``tmp``: the process, its RPC URL and P2P port."""
    rpc_port, p2p_port = free_port(), free_ports(1)
    [node] = plan(1, ("127.0.0.1", rpc_port), p2p_port, free_port())
    prepare(tmp, [node])
    cmd = [str(BIN), "run", "--data-dir", str(tmp / node.name), "--log-level", "warning", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            post_json(node.url + "/v1/chain/get_info", timeout=2)
            return proc, node.url, p2p_port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the node did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, nargs="+", default=[100, 200])
    parser.add_argument(
        "--body", type=int, default=ANNOUNCED - 1024, help="bytes sent after the header"
    )
    parser.add_argument("--sources", type=int, default=1, help="loopback source addresses")
    parser.add_argument("--announce", type=int, default=ANNOUNCED, help="frame length announced")
    parser.add_argument("--drip", type=float, default=0.0, help="seconds between body bytes")
    parser.add_argument("--hold", type=float, default=8.0, help="seconds a connection is held")
    parser.add_argument(
        "--p2p-tls", choices=["on", "off"], default="on", help="the node's p2p-tls, and ours"
    )
    parser.add_argument("node_args", nargs="*", help="extra bor-node run flags (after --)")
    args = parser.parse_args()
    # Our strangers run p2p.transport.tls, which logs each session: not what this script reports.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    machine = cores()
    print(machine, flush=True)
    results = []
    for n in args.connections:
        with tempfile.TemporaryDirectory(prefix="bor-flood-") as tmp:
            node_args = ["--p2p-tls", args.p2p_tls, *args.node_args]
            proc, _, port = start_node(Path(tmp), node_args)
            try:
                time.sleep(3)  # let start-up allocations settle before the baseline
                result = asyncio.run(
                    flood(
                        "127.0.0.1",
                        port,
                        proc.pid,
                        n,
                        args.sources,
                        args.body,
                        args.hold,
                        drip=args.drip,
                        announce=args.announce,
                        tls=args.p2p_tls == "on",
                    )
                )
            finally:
                proc.kill()
                proc.wait()
        print(
            f"{n} connections from {args.sources} address(es): RSS {result.baseline_mib} MiB"
            f" -> peak {result.peak_mib} MiB -> {result.after_mib} MiB after;"
            f" {result.closed} closed by the node, the last after {result.slowest_close_s} s"
        )
        results.append(asdict(result))
    print(json.dumps({"cores_available": machine.available, "floods": results}))


if __name__ == "__main__":
    main()
