"""Peers that take more than their share of a real ``bor-node``: one that asks for ranges of
blocks and never reads them, and strangers that drip the preamble to hold the slots honest
peers need for their handshakes.

The peers are written with our own p2p classes (``scripts.peers``): a real TCP connection, the
preamble and TLS 1.3 the node's default ``p2p-tls = on`` asks for, and a handshake signed by a
fresh key (``allowed-connection = any`` lets anyone in). The node's memory is its ``VmRSS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from pathlib import Path

from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import MAX_ACTIONS, SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName, BlockId
from node.commands.devnet import plan, prepare
from p2p.errors import ChannelClosed, P2PError
from p2p.transport.tcp import TcpChannel
from p2p.transport.tls import preamble
from p2p.wire.messages import SyncRequest
from scripts.bench_flood import rss_mib
from scripts.peers import dial, negotiated, until_closed
from tests.integration.conftest import NodeProcess, Nodes, free_port, wait_for
from tests.support.peers import authenticate
from tests.support.wait import SLOWDOWN, hold, hold_async, pace, wait_until

RANGE_MIB = 8  # the bytes of blocks the greedy peer asks for, again and again
MEMO_BYTES = 256  # the longest memo: a transaction of 16 such transfers is about 4.6 KiB
# The outbox's 16 MiB, the channel's 4 MiB send buffer and an 8 MiB frame being written, a
# store read of 8 MiB, and what Python's allocator keeps of all that: well under this.
MAX_GROWTH_MIB = 120
MAX_LEFT_MIB = 60  # above the baseline once the greedy peer is gone


def producer(nodes: Nodes, tmp: Path) -> tuple[NodeProcess, int]:
    """A one-producer devnet node, started; and its P2P port."""
    [dev] = plan(1, ("127.0.0.1", free_port()), free_port(), free_port())
    prepare(tmp / "net", [dev])
    node = nodes.run(tmp / "net" / dev.name, rpc_port=dev.rpc[1]).start(wait_head=1)
    wait_for(lambda: node.info()["last_irreversible_block_num"] >= 1, 10, "a final block")
    return node, dev.p2p[1]


def fill_blocks(node: NodeProcess, keys: dict[str, PrivateKey], mib: int) -> int:
    """Push transactions of 16 long-memo transfers until about ``mib`` MiB of them are in
    blocks; returns the head once they are."""
    info = node.info()
    chain_id = bytes.fromhex(info["chain_id"])
    ref = tapos_of(BlockId(bytes.fromhex(info["head_block_id"])))
    users = ["alice", "bob", "carol"]
    count = mib * 1024 * 1024 // 4600
    lock = threading.Lock()
    next_tx = [0]

    def push() -> None:
        while True:
            with lock:
                n = next_tx[0]
                next_tx[0] += 1
            if n >= count:
                return
            sender, recipient = users[n % 3], users[(n + 1) % 3]
            actions = tuple(
                Transfer(
                    AccountName(sender), AccountName(recipient), 1 + i, f"{n}".ljust(MEMO_BYTES)
                )
                for i in range(MAX_ACTIONS)
            )
            tx = Transaction(int(time.time()) + 600, ref[0], ref[1], actions)
            stx = SignedTransaction.sign(tx, chain_id, [keys[sender]])
            body = {"packed_trx": stx.packed.hex(), "signatures": [stx.signatures[0].hex()]}
            node.rpc("/v1/chain/push_transaction", body | {"mode": "async"})

    pushers = [threading.Thread(target=push) for _ in range(4)]
    for pusher in pushers:
        pusher.start()
    for pusher in pushers:
        pusher.join()
    # Counted block by block from the head before the first push, to the last one in.
    counted = {"txs": 0, "block": int(info["head_block_num"])}

    def all_in_blocks() -> bool:
        head = int(node.info()["head_block_num"])
        while counted["block"] < head:
            counted["block"] += 1
            block = node.rpc("/v1/chain/get_block", {"block_num_or_id": counted["block"]})
            counted["txs"] += len(block["transactions"])
        return counted["txs"] >= count

    wait_for(all_in_blocks, 30, f"the {count} transactions in blocks")
    return counted["block"]


def test_a_peer_that_asks_for_ranges_and_never_reads_is_bounded_and_dropped(
    nodes: Nodes, tmp_path: Path
) -> None:
    """A peer with a 4 KiB receive window asks for the same ~8 MiB range of blocks every
    0.25 s and reads nothing: the node's RSS grows by less than MAX_GROWTH_MIB (it grew by
    over 1 GiB in 13 s), the peer is dropped once its socket takes nothing for the write
    limit, and the memory is back within MAX_LEFT_MIB of the baseline after."""
    node, p2p = producer(nodes, tmp_path)
    keys = {
        name: PrivateKey.from_text(text)
        for name, text in json.loads((tmp_path / "net" / "keys.json").read_text()).items()
    }
    head = fill_blocks(node, keys, RANGE_MIB)
    assert node.proc is not None
    pid = node.proc.pid
    hold(1, "allocations settle before the baseline")
    baseline = rss_mib(pid)

    async def greedy() -> tuple[float, float | None, float]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", p2p))
        channel, binding = await negotiated(*await asyncio.open_connection(sock=sock))
        await authenticate(channel, binding, node.info())
        await asyncio.to_thread(
            wait_for, lambda: node.info()["peer_count"] == 1, 5, "the greedy peer to be a peer"
        )
        peak, started = baseline, time.monotonic()
        dropped: float | None = None
        while time.monotonic() - started < 25 * SLOWDOWN:
            if dropped is None:
                await channel.send(SyncRequest(1, head))  # never a read
                if node.info()["peer_count"] == 0:
                    dropped = round(time.monotonic() - started, 1)
            elif time.monotonic() - started > dropped + 3:
                break
            peak = max(peak, rss_mib(pid))
            await pace(0.25)
        await channel.close()
        return peak, dropped, rss_mib(pid)

    peak, dropped, during_after = asyncio.run(greedy())
    print(
        f"blocks 1..{head}; RSS {baseline:.0f} -> peak {peak:.0f} MiB, dropped after"
        f" {dropped} s, {during_after:.0f} MiB when it left"
    )
    assert dropped is not None, "still connected after 25 s"
    assert peak - baseline < MAX_GROWTH_MIB, (baseline, peak)
    wait_until(
        lambda: rss_mib(pid) - baseline < MAX_LEFT_MIB,
        2,
        f"the RSS back within {MAX_LEFT_MIB} MiB of the baseline, {baseline:.0f} MiB",
        interval=0.05,
    )
    wait_for(lambda: '"peer_not_reading"' in node.log.read_text(), 5, "the drop to be logged")
    assert node.running


HONEST_TRIES = 26
DRIPPERS = 40


def test_strangers_that_drip_the_preamble_do_not_lock_honest_peers_out(
    nodes: Nodes, tmp_path: Path
) -> None:
    """40 connections from 127.0.0.1 drip the preamble a byte a second, each cut at 5 s (or
    when the node closes it) and reopened at once; meanwhile 26 honest peers, from the same
    address, dial and handshake one after another: at least 90 % of them get through (1 of
    26 did before)."""
    node, p2p = producer(nodes, tmp_path)
    opening = preamble(True)

    async def main() -> int:
        stop = asyncio.Event()

        async def dripper() -> None:
            while not stop.is_set():
                try:
                    reader, writer = await asyncio.open_connection("127.0.0.1", p2p)
                except OSError:
                    await pace(0.05)
                    continue
                channel = TcpChannel(reader, writer)

                async def drip(channel: TcpChannel = channel) -> None:
                    with contextlib.suppress(ChannelClosed):
                        for byte in opening:
                            await channel.send_raw(bytes([byte]))
                            await pace(1.0)

                dripping = asyncio.ensure_future(drip())
                with contextlib.suppress(TimeoutError, ChannelClosed):
                    async with asyncio.timeout(5):
                        await until_closed(channel)
                dripping.cancel()
                await channel.close()

        async def honest() -> bool:
            try:
                async with asyncio.timeout(5 * SLOWDOWN):
                    channel, binding = await dial("127.0.0.1", p2p)
                    try:
                        await authenticate(channel, binding, await asyncio.to_thread(node.info))
                    finally:
                        await channel.close()
            except (TimeoutError, P2PError):
                return False
            return True

        drippers = [asyncio.ensure_future(dripper()) for _ in range(DRIPPERS)]
        # The preamble timeout (2 s): the first drippers are being cut and redial as the
        # honest peers start.
        await hold_async(2, "the drippers hold what they can")
        passed = 0
        for _ in range(HONEST_TRIES):
            passed += await honest()
            await pace(0.2)
        stop.set()
        for task in drippers:
            task.cancel()
        await asyncio.gather(*drippers, return_exceptions=True)
        return passed

    passed = asyncio.run(main())
    print(f"{passed} of {HONEST_TRIES} honest handshakes through {DRIPPERS} dripping strangers")
    assert passed >= 0.9 * HONEST_TRIES, passed
    assert node.running
