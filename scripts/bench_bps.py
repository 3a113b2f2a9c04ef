"""BPS through its sidecars against the same NATS JetStream cluster used directly, in one run
on this host: produce and consume throughput of 1 KiB messages, produce latency at a paced
rate (p50/p99 of a batch's acknowledgement), the anchor transactions the chain carries for
100 partitions, revocation latency in blocks, and the time a partition's producers wait after
a planned stop (SIGTERM) and after ``kill -9`` of its leading broker. The last line is one
JSON object.

    python scripts/bench_bps.py --messages 20000 --rate 10000 --seconds 5
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
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bor_client import Client, Signer
from bor_client.errors import Busy
from bps.client import BpsClient
from bps.cluster import Secrets, stream_leader
from bps.errors import Refused
from bps.local import Deployment, build_contract, install, start_broker, start_devnet, wait_http
from bps.streams import await_leader
from chain.core.primitives.crypto import PrivateKey

BROKERS = ["brokera", "brokerb", "brokerc"]


def free_ports(count: int) -> int:
    """``count`` consecutive free ports below the kernel's ephemeral range (where an outgoing
    connection could take one between this check and a server's bind)."""
    import random
    import socket

    while True:
        first = random.randrange(20_000, 32_000 - count)
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue


class Setup:
    """A devnet, the contract and three brokers in a scratch directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        rpc = free_ports(3)
        self.brokers: dict[str, subprocess.Popen[bytes]] = {}
        self.devnet = start_devnet(root, rpc)
        try:
            self.deployment = Deployment.new(
                root, f"http://127.0.0.1:{rpc}", BROKERS, free_ports(3 * len(BROKERS) + 3)
            )
            self.keys: dict[str, str] = json.loads((root / "devnet/keys.json").read_text())
            wasm, abi = build_contract(root / "contract")
            install(self.deployment, self.keys["bor.gov"], wasm, abi, PrivateKey.generate())
            for b in BROKERS:
                self.brokers[b] = start_broker(self.deployment, b, root / f"{b}.log")
            for spec in self.deployment.brokers:
                wait_http(f"http://127.0.0.1:{spec.sidecar_port}/health")
            self.push("bor.gov", "addtenant", {"tenant": "acme", "owner": "alice"})
            self.push("alice", "addmember", {"tenant": "acme", "account": "bob", "enckey": ""})
        except BaseException:
            self.stop()
            raise

    def push(self, account: str, action: str, data: dict[str, Any]) -> Any:
        client = Client(self.deployment.node_url, Signer([self.keys[account]]))
        return client.contract("bps").push(action, data, account)

    def topic(self, name: str, partitions: int = 1) -> None:
        self.push("alice", "createtopic", {"tenant": "acme", "topic": name,
                  "partitions": partitions, "replicas": 3, "retention_s": 0})  # fmt: skip

    def client(self, account: str = "alice") -> BpsClient:
        key = PrivateKey.from_text(self.keys[account])
        return BpsClient(self.deployment.node_url, account, key)

    def head(self) -> int:
        client = Client(self.deployment.node_url)
        return client.get_info().head_block_num

    def stop(self) -> None:
        for process in self.brokers.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in [*self.brokers.values(), self.devnet]:
            if process is self.devnet:
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def payloads(n: int, size: int) -> list[bytes]:
    return [(b"%08d" % i).ljust(size, b"x") for i in range(n)]


async def plain_nats(setup: Setup) -> Any:
    keys = Secrets.load(setup.deployment.secrets_file)
    nc = await nats.connect(setup.deployment.brokers[0].server.url, user=keys.user,
                            password=keys.password)  # fmt: skip
    js = nc.jetstream(timeout=10)
    await js.add_stream(StreamConfig(name="PLAIN", subjects=["plain"], num_replicas=3))
    await await_leader(js, "PLAIN")
    return nc, js


async def plain_send(js: Any, batch: list[bytes]) -> None:
    futures = [
        await js.publish_async("plain", p, headers={"Nats-Msg-Id": uuid.uuid4().hex}) for p in batch
    ]
    await asyncio.gather(*futures)


async def throughput(
    send: Callable[[list[bytes]], Awaitable[Any]], messages: list[bytes], batch: int
) -> float:
    started = time.perf_counter()
    for i in range(0, len(messages), batch):
        await send(messages[i : i + batch])
    return len(messages) / (time.perf_counter() - started)


async def paced(
    send: Callable[[list[bytes]], Awaitable[Any]],
    rate: int,
    batch: int,
    seconds: float,
    size: int,
) -> list[float]:
    """Batches sent on a clock (``rate`` messages a second) without waiting for earlier
    ones: each batch's time to its last acknowledgement, in ms."""
    latencies: list[float] = []
    interval = batch / rate
    body = payloads(batch, size)

    async def one() -> None:
        t = time.perf_counter()
        await send(body)
        latencies.append((time.perf_counter() - t) * 1000)

    tasks = []
    start = time.perf_counter()
    for k in range(int(seconds * rate / batch)):
        await asyncio.sleep(max(0.0, start + k * interval - time.perf_counter()))
        tasks.append(asyncio.create_task(one()))
    await asyncio.gather(*tasks)
    return latencies


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def data_plane(setup: Setup, args: argparse.Namespace) -> dict[str, float]:
    messages = payloads(args.messages, args.size)
    nc, js = await plain_nats(setup)
    out: dict[str, float] = {}
    out["plain_produce_msg_per_s"] = await throughput(lambda b: plain_send(js, b), messages,
                                                      args.batch)  # fmt: skip
    sub = await js.pull_subscribe("plain", config=ConsumerConfig(ack_policy=AckPolicy.NONE))
    started, got = time.perf_counter(), 0
    while got < args.messages:
        got += len(await sub.fetch(args.batch, timeout=5))
    out["plain_consume_msg_per_s"] = got / (time.perf_counter() - started)
    setup.topic("bench")
    async with setup.client() as client:
        out["bps_produce_msg_per_s"] = await throughput(
            lambda b: client.produce("acme", "bench", b, 0), messages, args.batch
        )
        started, got = time.perf_counter(), 0
        while got < args.messages:
            got += len(await client.fetch("acme", "bench", 0, got + 1, args.batch, 5000))
        out["bps_consume_msg_per_s"] = got / (time.perf_counter() - started)
        rounds: dict[str, list[list[float]]] = {"plain": [], "bps": []}
        for _ in range(args.rounds):  # alternated: a busy moment of the machine hits both
            rounds["plain"].append(await paced(lambda b: plain_send(js, b), args.rate, 50,
                                               args.seconds, args.size))  # fmt: skip
            rounds["bps"].append(await paced(lambda b: client.produce("acme", "bench", b, 0),
                                             args.rate, 50, args.seconds, args.size))  # fmt: skip
    await nc.close()
    for name, each in rounds.items():
        out[f"{name}_p50_ms"] = statistics.median(pct(lat, 0.5) for lat in each)
        out[f"{name}_p99_ms"] = statistics.median(pct(lat, 0.99) for lat in each)
        print(f"{name} p99 of each round, ms: {[round(pct(lat, 0.99), 1) for lat in each]}")
    return out


async def anchored(client: BpsClient) -> int:
    """The anchors of both wide topics (each topic's chain of anchors audited intact), asked
    again while the node is busy."""
    while True:
        try:
            audits = [await client.audit("acme", t) for t in ("wide1", "wide2")]
        except Busy:
            await asyncio.sleep(0.2)
            continue
        broken = [a for a in audits if not a.ok]
        if broken:
            raise RuntimeError(f"an audit found the anchors broken: {broken}")
        return sum(a.anchors for a in audits)


async def anchors(setup: Setup, seconds: float) -> dict[str, float]:
    """100 partitions (two topics of 50), each sent a message every 0.25 s: anchors a
    second once every partition has been taken by its leader's broker."""
    for t in ("wide1", "wide2"):
        setup.topic(t, 50)
    async with setup.client() as client:

        async def tick() -> None:
            await asyncio.gather(*(client.produce("acme", t, [b"tick"], p)
                                   for t in ("wide1", "wide2") for p in range(50)))  # fmt: skip
            await asyncio.sleep(0.25)

        warm = time.perf_counter()
        while time.perf_counter() - warm < 5:  # the brokers take their partitions over
            await tick()
        before = await anchored(client)
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            await tick()
        elapsed = time.perf_counter() - started
        after = await anchored(client)
    return {"anchor_tx_per_s_100_partitions": (after - before) / elapsed}


async def revocation(setup: Setup) -> dict[str, float]:
    setup.topic("rev")
    setup.push("alice", "grant", {"tenant": "acme", "principal": "bob", "pattern": "rev",
               "rights": 2, "expires": 0})  # fmt: skip
    rows = Client(setup.deployment.node_url).contract("bps").rows("acls", "acme")
    acl = max(int(r["id"]) for r in rows if (r["principal"], r["pattern"]) == ("bob", "rev"))
    async with setup.client("bob") as bob:
        while True:
            try:
                await bob.fetch("acme", "rev", 0, 1, 1, 0)
                break
            except Refused:
                await asyncio.sleep(0.05)
        revoked = await asyncio.to_thread(setup.push, "alice", "revoke",
                                          {"tenant": "acme", "id": acl})  # fmt: skip
        t = time.perf_counter()
        while True:
            try:
                await bob.fetch("acme", "rev", 0, 1, 1, 0)
            except Refused:
                return {
                    "revocation_blocks": setup.head() - int(revoked.block_num),
                    "revocation_ms_after_inclusion": (time.perf_counter() - t) * 1000,
                }
            await asyncio.sleep(0.02)


def leader_of(setup: Setup, stream: str) -> str:
    leader = stream_leader([b.monitor_port for b in setup.deployment.brokers], stream)
    if leader is None:
        raise RuntimeError(f"no leader for {stream}")
    return leader


async def takeover(setup: Setup, topic_name: str, sig: signal.Signals) -> tuple[str, float]:
    """``sig`` to the broker leading the topic's partition 0 while a client produces to it
    through that broker: the seconds from the signal to the next acknowledged produce, and
    the broker signalled."""
    setup.topic(topic_name)
    async with setup.client() as client:
        await client.produce("acme", topic_name, [b"warm"], 0)
        topic = await client.topic("acme", topic_name)
        leader = leader_of(setup, f"BPS_{topic.id}_0")
        client.turn = BROKERS.index(leader)
        signalled = 0.0
        for n in range(100_000):
            await client.produce("acme", topic_name, [b"%d" % n], 0)
            if signalled:
                return leader, time.perf_counter() - signalled
            if n == 200:
                os.killpg(setup.brokers[leader].pid, sig)
                signalled = time.perf_counter()
    raise RuntimeError("no takeover")


async def handover(setup: Setup) -> dict[str, float]:
    """A planned stop (SIGTERM: nats-server hands its leaderships over as it shuts down),
    then the broker started again and its sidecar up, so that the crash stage has three."""
    leader, seconds = await takeover(setup, "stop", signal.SIGTERM)
    setup.brokers[leader].wait(30)
    setup.brokers[leader] = start_broker(setup.deployment, leader, setup.root / f"{leader}.log")
    spec = setup.deployment.broker(leader)
    wait_http(f"http://127.0.0.1:{spec.sidecar_port}/health")
    await asyncio.sleep(5)  # its streams catch up before the next stage kills another
    return {"handover_s": seconds}


async def crash(setup: Setup) -> dict[str, float]:
    return {"takeover_s": (await takeover(setup, "fail", signal.SIGKILL))[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3, help="paced rounds of each (medians)")
    parser.add_argument(
        "--stages",
        default="data,anchors,revocation,handover,takeover",
        help="which measurements to run, comma-separated (all by default)",
    )
    args = parser.parse_args()
    stages = set(args.stages.split(","))
    root = Path(tempfile.mkdtemp(prefix="bench-bps-"))
    setup = Setup(root)
    try:
        result: dict[str, Any] = {"bench": "bps", "size": args.size, "messages": args.messages}
        if "data" in stages:
            result |= asyncio.run(data_plane(setup, args))
        if "anchors" in stages:
            result |= asyncio.run(anchors(setup, args.seconds))
        if "revocation" in stages:
            result |= asyncio.run(revocation(setup))
        if "handover" in stages:
            result |= asyncio.run(handover(setup))
        if "takeover" in stages:
            result |= asyncio.run(crash(setup))
    finally:
        setup.stop()
        shutil.rmtree(root, ignore_errors=True)
    if "data" in stages:
        result["produce_ratio"] = (
            result["bps_produce_msg_per_s"] / result["plain_produce_msg_per_s"]
        )
        result["consume_ratio"] = (
            result["bps_consume_msg_per_s"] / result["plain_consume_msg_per_s"]
        )
        result["p99_added_ms"] = result["bps_p99_ms"] - result["plain_p99_ms"]
    for key, value in result.items():
        if isinstance(value, float):
            print(f"{key:34} {value:12.2f}")
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}))


if __name__ == "__main__":
    main()
