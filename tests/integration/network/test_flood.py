"""Hostile connections against a real node process in its default configuration (p2p-tls =
on): a flood of strangers announcing 8 MiB frames, peers that drip a frame slowly
(slowloris) before and after the handshake, and strangers that drip the preamble.

The strangers speak the protocol as far as anyone can (the preamble, then TLS, through
``scripts.peers.dial``), so their frames reach the node's frame limits and deadline inside
TLS; the caps on inbound connections are checked before the node reads a byte. The node's
memory is its ``VmRSS``; the strangers come from loopback addresses of their own
(127.0.x.y), a legitimate node from 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from pathlib import Path

from node.commands.devnet import plan, prepare
from p2p.errors import ChannelClosed
from p2p.transport.tcp import FRAME_SECONDS, TcpChannel
from p2p.transport.tls import preamble
from p2p.wire.codec import encode_frame
from p2p.wire.messages import PROTOCOL_VERSION, Hello
from scripts.bench_flood import ANNOUNCED, hostile, rss_mib, source_address
from scripts.peers import dial, until_closed
from tests.integration.conftest import NodeProcess, Nodes, free_port, wait_for
from tests.p2p.configs import transport_config
from tests.support.peers import authenticated
from tests.support.wait import SLOWDOWN, hold, hold_async, pace, until, wait_until

# The issue measured 92 MiB -> 1.1 GiB for 100 such connections; with the handshake's frame
# limit a stranger's frame costs nothing, and the growth measured is about 1 MiB.
MAX_GROWTH_MIB = 100
MAX_LEFT_MIB = 30  # RSS above the baseline once the flood is over
HANDSHAKE_SECONDS = 5.0  # p2p-handshake-timeout-ms's default, which these nodes keep


def producer(nodes: Nodes, tmp: Path) -> tuple[NodeProcess, int]:
    """A one-producer devnet node, started; and its P2P port."""
    [dev] = plan(1, ("127.0.0.1", free_port()), free_port(), free_port())
    prepare(tmp / "net", [dev])
    node = nodes.run(tmp / "net" / dev.name, rpc_port=dev.rpc[1]).start(wait_head=1)
    # Peers played by hand claim our LIB as their head: wait for a real one (block 1 is
    # final once a block after it has votes; before that get_info names the head instead).
    wait_for(lambda: node.info()["last_irreversible_block_num"] >= 1, 10, "a final block")
    return node, dev.p2p[1]


def test_a_flood_of_strangers_neither_swells_the_node_nor_keeps_a_peer_out(
    nodes: Nodes, tmp_path: Path
) -> None:
    """200 strangers (from 50 addresses) each get through the preamble and TLS, announce an
    8 MiB hello and send all of it but 1 KiB, reconnecting as soon as they are dropped;
    meanwhile a real node dials in and gets connected. The target's RSS stays within
    MAX_GROWTH_MIB of where it started, every stranger is dropped within a second of its
    frame header (or refused at once), and the memory is back near the baseline after."""
    target, p2p = producer(nodes, tmp_path)
    assert target.proc is not None
    pid = target.proc.pid
    joiner_dir = tmp_path / "joiner"
    joiner_dir.mkdir()
    shutil.copy(tmp_path / "net" / "genesis.json", joiner_dir / "genesis.json")
    joiner = nodes.run(joiner_dir, "--p2p-peer-address", f"127.0.0.1:{p2p}")
    hold(1, "start-up allocations settle before the baseline")
    baseline = rss_mib(pid)

    async def flood() -> tuple[float, list[float | None]]:
        stop = asyncio.Event()
        peak = baseline
        closes: list[float | None] = []

        async def stranger(i: int) -> None:
            while not stop.is_set():
                source = source_address(i, 50)
                closes.append(await hostile("127.0.0.1", p2p, source, ANNOUNCED - 1024, 2.0))
                await pace(0.5)

        def sampled_until_stopped() -> bool:
            nonlocal peak
            peak = max(peak, rss_mib(pid))
            return stop.is_set()

        async def sample() -> None:
            await until(sampled_until_stopped, "the flood to end", 60, interval=0.02)

        tasks = [asyncio.ensure_future(stranger(i)) for i in range(200)]
        tasks.append(asyncio.ensure_future(sample()))
        await hold_async(1.0, "the flood under way before the joiner starts")
        await asyncio.to_thread(joiner.start)
        await asyncio.to_thread(
            wait_for, lambda: target.info()["peer_count"] >= 1, 20, "the joiner to connect"
        )
        await hold_async(1.0, "the flood goes on with the joiner connected")
        stop.set()
        await asyncio.gather(*tasks)
        return peak, closes

    peak, closes = asyncio.run(flood())
    slowest = max((c for c in closes if c is not None), default=0.0)
    print(f"RSS {baseline:.0f} -> peak {peak:.0f} MiB; {len(closes)} strangers, {slowest:.2f} s")
    assert peak - baseline < MAX_GROWTH_MIB, (baseline, peak)
    assert len(closes) >= 200
    # Refused from its header, a stranger goes in milliseconds (median ~20 ms here); the tail
    # is CPU shared with ~1,000 attackers' TLS handshakes. Buffering the frame instead would
    # hold it until the 3 s + 8 s frame deadline.
    assert all(c is not None and c < 2.0 * SLOWDOWN for c in closes), max(closes, key=str)
    assert target.info()["peer_count"] == 1
    wait_until(
        lambda: rss_mib(pid) - baseline < MAX_LEFT_MIB,
        1,
        f"the RSS back within {MAX_LEFT_MIB} MiB of the baseline, {baseline:.0f} MiB",
        interval=0.05,
    )


async def dripped_until_closed(channel: TcpChannel, data: bytes, interval: float) -> float:
    """Send ``data`` a byte every ``interval`` seconds (inside TLS if the channel runs it),
    reading (and dropping) whatever the node sends, until the node closes the connection; how
    long that took from the first byte (at most 10 s)."""

    async def drip() -> None:
        with contextlib.suppress(ChannelClosed):
            for i in range(len(data)):
                await channel.send_raw(data[i : i + 1])
                await pace(interval)

    start = time.monotonic()
    dripping = asyncio.ensure_future(drip())
    try:
        async with asyncio.timeout(10):
            await until_closed(channel)
    finally:
        dripping.cancel()
        await channel.close()
    return time.monotonic() - start


def test_peers_that_drip_a_frame_are_cut_off_at_the_frame_deadline(
    nodes: Nodes, tmp_path: Path
) -> None:
    """Twenty strangers get through the preamble and TLS, as anyone can, then drip a hello
    inside TLS, and a peer that has authenticated drips a frame (so the handshake timeout does
    not save the node): each connection is closed at the frame deadline, FRAME_SECONDS after
    the frame's first byte, where before only the handshake timeout (5 s) or the keepalive
    (three 2 s intervals) would have ended it."""
    target, p2p = producer(nodes, tmp_path)
    hello = encode_frame(Hello(PROTOCOL_VERSION, b"c" * 32, os.urandom(32), os.urandom(32)))
    assert len(hello) * 0.2 > 2 * FRAME_SECONDS  # dripped, it would take longer

    async def main() -> list[float]:
        peer = await authenticated(p2p, target.info(), source="127.0.9.1")
        assert peer.tls is not None, "the node runs TLS by default"
        strangers = [
            (await dial("127.0.0.1", p2p, source=source_address(i, 20)))[0] for i in range(20)
        ]
        assert all(s.tls is not None for s in strangers)
        return list(
            await asyncio.gather(*(dripped_until_closed(c, hello, 0.2) for c in [peer, *strangers]))
        )

    times = asyncio.run(main())
    print("closed after", sorted(round(t, 2) for t in times))
    assert all(FRAME_SECONDS - 0.5 < t < (FRAME_SECONDS + 1.0) * SLOWDOWN for t in times), times


def test_strangers_that_drip_the_preamble_are_cut_off_at_the_preamble_timeout(
    nodes: Nodes, tmp_path: Path
) -> None:
    """The frame deadline covers frames only: the 8-byte preamble before the first frame must
    come within the preamble timeout (2 s, ``TransportConfig.preamble_timeout``), shorter than
    the handshake timeout that bounds TLS and the rest. Five strangers that drip the preamble a
    byte a second (it would take 8 s) are closed at that timeout."""
    target, p2p = producer(nodes, tmp_path)
    opening = preamble(True)
    assert len(opening) * 1.0 > HANDSHAKE_SECONDS + 2  # dripped, it would take longer
    preamble_seconds = transport_config().preamble_timeout

    async def main() -> list[float]:
        strangers = [
            TcpChannel(
                *await asyncio.open_connection(
                    "127.0.0.1", p2p, local_addr=(source_address(i, 5), 0)
                )
            )
            for i in range(5)
        ]
        return list(
            await asyncio.gather(*(dripped_until_closed(c, opening, 1.0) for c in strangers))
        )

    times = asyncio.run(main())
    print("closed after", sorted(round(t, 2) for t in times))
    assert all(preamble_seconds - 0.5 < t < (preamble_seconds + 1.0) * SLOWDOWN for t in times), (
        times
    )
    assert target.running
