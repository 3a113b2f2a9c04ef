"""A real BPS deployment for the tests: a devnet node process, the contract built by
``bor-contract`` and installed, and three broker processes (each a ``nats-server`` of one
JetStream cluster and its sidecar); tenants ``acme`` (owner alice, member bob) and ``globex``
(owner carol), each with a topic."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bor_client import Client, Signer
from bps.client import BpsClient
from bps.cluster import stream_leader
from bps.local import Deployment, build_contract, install, start_broker, wait_http
from bps.streams import stream_name
from chain.core.primitives.crypto import PrivateKey
from tests.integration.conftest import NodeProcess, Nodes, free_ports
from tests.support.wait import SLOWDOWN

T = TypeVar("T")
BROKERS = ["brokera", "brokerb", "brokerc"]


class World:
    """The deployment and what the tests do to it."""

    def __init__(self, node: NodeProcess, deployment: Deployment, root: Path) -> None:
        self.node = node
        self.deployment = deployment
        self.root = root
        self.keys: dict[str, str] = json.loads((node.data_dir / "keys.json").read_text())
        self.brokers: dict[str, subprocess.Popen[bytes]] = {}

    def start_brokers(self) -> None:
        for name in BROKERS:
            self.brokers[name] = start_broker(self.deployment, name, self.root / f"{name}.log")
        for b in self.deployment.brokers:
            wait_http(f"http://127.0.0.1:{b.sidecar_port}/health", 60 * SLOWDOWN)

    def kill(self, name: str) -> None:
        """``kill -9`` of a broker: its sidecar and its nats-server at once."""
        process = self.brokers[name]
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)

    def stop(self) -> None:
        for process in self.brokers.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.brokers.values():
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)

    def chain(self, account: str) -> Client:
        return Client(self.node.url, Signer([self.keys[account]]))

    def push(self, account: str, action: str, data: dict[str, Any]) -> Any:
        return self.chain(account).contract("bps").push(action, data, account)

    def client(self, account: str, key: str | None = None) -> BpsClient:
        return BpsClient(self.node.url, account, PrivateKey.from_text(key or self.keys[account]))

    def run(self, account: str, work: Callable[[BpsClient], Awaitable[T]]) -> T:
        """``work`` with a connected client of ``account``."""

        async def go() -> T:
            async with self.client(account) as client:
                return await work(client)

        return asyncio.run(go())

    def head(self) -> int:
        return int(self.node.rpc("/v1/chain/get_info")["head_block_num"])

    def leader(self, topic_id: int, partition: int) -> str:
        """The broker whose server leads the partition's stream, from NATS's monitoring."""
        ports = [b.monitor_port for b in self.deployment.brokers]
        leader = stream_leader(ports, stream_name(topic_id, partition))
        assert leader is not None, f"no leader for {stream_name(topic_id, partition)}"
        return leader


def make_world(nodes: Nodes, root: Path) -> World:
    node = nodes.devnet().start(wait_head=1)
    deployment = Deployment.new(root, node.url, BROKERS, free_ports(3 * len(BROKERS) + 3))
    wasm, abi = build_contract(root / "contract")
    keys = json.loads((node.data_dir / "keys.json").read_text())
    install(deployment, keys["bor.gov"], wasm, abi, PrivateKey.generate())
    world = World(node, deployment, root)
    world.push("bor.gov", "addtenant", {"tenant": "acme", "owner": "alice"})
    world.push("bor.gov", "addtenant", {"tenant": "globex", "owner": "carol"})
    world.push("alice", "addmember", {"tenant": "acme", "account": "bob", "enckey": ""})
    for tenant, owner, topic, partitions in [
        ("acme", "alice", "orders", 2),
        ("globex", "carol", "secrets", 1),
    ]:
        world.push(owner, "createtopic", {
            "tenant": tenant, "topic": topic, "partitions": partitions, "replicas": 3,
            "retention_s": 0,
        })  # fmt: skip
    try:
        world.start_brokers()
    except BaseException:
        world.stop()  # what did start: no broker outlives the test
        raise
    return world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("bps")
    nodes = Nodes(root / "nodes")
    (root / "nodes").mkdir()
    try:
        world = make_world(nodes, root / "deployment")
        yield world
        world.stop()
    finally:
        nodes.stop_all()


def eventually(check: Callable[[], T], timeout: float, what: str) -> T:
    """``check()``'s first answer that is not an AssertionError, within ``timeout`` s."""
    deadline = time.monotonic() + timeout * SLOWDOWN
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout} s") from None
            time.sleep(0.1)
