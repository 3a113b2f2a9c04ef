"""What TLS costs a TCP channel: block-sized frames over loopback, with and without TLS.

Both ends run in this process (one core), so the CPU figure is encryption plus decryption.
The receiver reads whole frames without decoding the block, so the figures are the
channel's own; ``bench_sync.py --p2p-tls on|off`` shows the same cost inside a real sync,
where block validation dwarfs it.

    python scripts/bench_tls.py [--mb 300] [--rounds 3] [--frame 90000]

Each round moves the bytes over plain TCP and then over TLS; the medians over the rounds, and
what TLS costs in CPU per MB against plain TCP, end the output as one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from p2p.transport.tcp import TcpChannel
from p2p.transport.tls import TlsIdentity, negotiate
from p2p.wire.codec import HEADER_SIZE
from p2p.wire.messages import RawBlock
from scripts.benchtools import cores, cores_used


async def measure(tls: bool, total: int, frame: int) -> tuple[float, float]:
    """(seconds, CPU seconds) to move ``total`` bytes in frames of ``frame`` bytes."""
    accepted: asyncio.Queue[TcpChannel] = asyncio.Queue()

    async def on_connect(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        channel = TcpChannel(r, w)
        await negotiate(channel, TlsIdentity.generate() if tls else None, False, 5)
        await accepted.put(channel)

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    sender = await TcpChannel.connect("127.0.0.1", server.sockets[0].getsockname()[1])
    await negotiate(sender, TlsIdentity.generate() if tls else None, True, 5)
    receiver = await accepted.get()
    block = RawBlock(os.urandom(frame))
    count = total // frame

    async def receive() -> None:
        for _ in range(count):  # whole frames, not decoded: the channel's cost only
            await receiver._reader.readexactly(HEADER_SIZE + frame)

    started, cpu = time.perf_counter(), time.process_time()
    reading = asyncio.create_task(receive())
    for _ in range(count):
        await sender.send(block)
    await reading
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    await sender.close()
    await receiver.close()
    server.close()
    return seconds, cpu


def summarise(mb: int, runs: list[tuple[float, float]]) -> dict[str, Any]:
    """The medians of one transport's rounds, each ``(seconds, CPU seconds)`` to move ``mb``
    MB: MB/s, ms of CPU per MB (both ends), and cores used."""
    med = statistics.median
    return {
        "mb_per_s": round(med(mb / seconds for seconds, _ in runs), 1),
        "cpu_ms_per_mb": round(med(cpu * 1000 / mb for _, cpu in runs), 3),
        "cores_used": med(cores_used(cpu, seconds) for seconds, cpu in runs),
        "rounds": len(runs),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--frame", type=int, default=90_000, help="a 1,000-transfer block")
    args = parser.parse_args()
    if args.rounds < 1 or args.mb < 1:
        parser.error("--rounds and --mb must be at least 1")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    machine = cores()
    print(machine)
    runs: dict[str, list[tuple[float, float]]] = {"tcp": [], "tls": []}
    for _ in range(args.rounds):
        for transport in runs:
            seconds, cpu = await measure(transport == "tls", args.mb * 1_000_000, args.frame)
            runs[transport].append((seconds, cpu))
            print(
                f"{transport}: {args.mb / seconds:6,.0f} MB/s, "
                f"{cpu * 1000 / args.mb:.2f} ms CPU per MB (both ends), "
                f"{cores_used(cpu, seconds):.2f} cores used"
            )
    figures: dict[str, Any] = {
        "mb": args.mb,
        "frame": args.frame,
        "cores_available": machine.available,
        **{transport: summarise(args.mb, done) for transport, done in runs.items()},
    }
    figures["tls_cpu_over_tcp"] = round(
        figures["tls"]["cpu_ms_per_mb"] / figures["tcp"]["cpu_ms_per_mb"], 2
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main())
