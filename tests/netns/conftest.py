"""Producer nodes on namespaced hosts (``scripts.netns``): real processes over real links.

Tests here need root (CI runs as root); elsewhere they skip and say why.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName, BlockId
from node.commands.devnet import prepare
from scripts.netns import ADMIN_PORT, RPC_PORT, Host, HostNet, plan_nodes, unavailable
from tests.integration.conftest import NodeProcess, rpc, wait_for

# Short producer turns (2 s instead of 6 s) so that a block is irreversible a few seconds after
# it is made: the fault tests then wait seconds, not minutes, for LIB to move. The consensus
# rules are the same at any turn length.
TURN = 4
# The fault tests pin the dpos rule (both sides of a partition produce on; with finality by
# votes production pauses instead: tests/integration/test_finality.py).
TEST_PARAMS: dict[str, int | str] = {"blocks_per_turn": TURN, "finality": "dpos"}


# Why namespaces cannot be made here (not root, no iproute2), asked once per test run.
UNAVAILABLE = unavailable()
needs_netns = pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")


@pytest.fixture
def hostnet() -> Iterator[HostNet]:
    """Four namespaced hosts, removed afterwards whatever happened."""
    if UNAVAILABLE is not None:
        pytest.skip(UNAVAILABLE)
    with HostNet(4) as net:
        yield net


class Cluster:
    """A producer node per host of ``net``; node i dials nodes 1 … i-1 (a full mesh)."""

    def __init__(self, net: HostNet, tmp: Path, by_name: bool = False) -> None:
        self.net = net
        self.keys = tmp / "keys.json"
        self.plan = plan_nodes(net, by_name)
        prepare(tmp, self.plan, TEST_PARAMS)
        self.nodes = [
            NodeProcess(
                tmp / n.name,
                ["run", "--data-dir", str(tmp / n.name), "--log-format", "json", "--rdma", "off"],
                RPC_PORT,
                tmp / f"{n.name}.log",
                host=h.control,
                prefix=h.exec_prefix,
            )
            for n, h in zip(self.plan, net.hosts, strict=True)
        ]

    def start(self) -> Cluster:
        for node in self.nodes:
            node.start()
        return self

    def stop(self) -> None:
        for node in self.nodes:
            if node.running and node.proc is not None:
                node.proc.kill()
                node.proc.wait()

    def infos(self, nodes: list[NodeProcess] | None = None) -> list[dict[str, Any]]:
        return [quick(n, "/v1/chain/get_info") for n in nodes or self.nodes]

    def block_ids(self, num: int, nodes: list[NodeProcess] | None = None) -> set[str]:
        """The ids the nodes hold at height ``num`` (one id: they agree there)."""
        return {
            quick(n, "/v1/chain/get_block", {"block_num_or_id": num})["id"]
            for n in nodes or self.nodes
        }

    def converged(self, lib_above: int) -> bool:
        """Every node fully meshed, past LIB ``lib_above``, and on one chain up to its LIB."""
        infos = self.infos()
        lib = min(i["last_irreversible_block_num"] for i in infos)
        return (
            all(i["peer_count"] == len(self.nodes) - 1 for i in infos)
            and lib > lib_above
            and len(self.block_ids(lib)) == 1
        )


def admin(host: Host, path: str, body: dict[str, Any]) -> Any:
    """A call to the admin RPC of the node on ``host``, made from inside that host (it
    listens on the host's loopback, as bor-node does by default)."""
    code = (
        "import json, sys, urllib.request as u; "
        f"r = u.Request('http://127.0.0.1:{ADMIN_PORT}{path}', data=sys.stdin.buffer.read(), "
        "headers={'Content-Type': 'application/json'}); "
        "print(u.urlopen(r, timeout=3).read().decode())"
    )
    done = subprocess.run(
        [*host.exec_prefix, sys.executable, "-c", code],
        input=json.dumps(body).encode(),
        capture_output=True,
        timeout=10,
        check=True,
    )
    return json.loads(done.stdout)


def quick(node: NodeProcess, path: str, body: dict[str, Any] | None = None) -> Any:
    """An RPC call that gives up soon (a frozen node must not stall the test)."""
    return rpc(node.url, path, body, timeout=3)


@pytest.fixture
def cluster(hostnet: HostNet, tmp_path: Path) -> Iterator[Cluster]:
    """Four producers, one per host, started; killed afterwards."""
    net = Cluster(hostnet, tmp_path)
    try:
        yield net.start()
    finally:
        net.stop()


@pytest.fixture
def named_cluster(hostnet: HostNet, tmp_path: Path) -> Iterator[Cluster]:
    """The same, but every node listens on and dials host names (``h1`` …), not addresses."""
    net = Cluster(hostnet, tmp_path, by_name=True)
    try:
        yield net.start()
    finally:
        net.stop()


class LibWatch:
    """Samples every node's LIB twice a second while a test disturbs the network. A LIB that
    goes down, or two ids irreversible at one height, is a violation; ``check_final`` then
    asks every node for every irreversible block seen, which must not have been reverted."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.irreversible: dict[int, str] = {}
        self.violations: list[str] = []
        self.samples = 0
        self._last: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LibWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for i, node in enumerate(self.cluster.nodes):
                try:
                    info = quick(node, "/v1/chain/get_info")
                except OSError:
                    continue  # stopped, frozen or restarting
                self._note(i + 1, info["last_irreversible_block_num"], info)

    def _note(self, index: int, lib: int, info: dict[str, Any]) -> None:
        self.samples += 1
        if lib < self._last.get(index, 0):
            self.violations.append(f"node{index}: LIB went from {self._last[index]} to {lib}")
        self._last[index] = lib
        lib_id = info["last_irreversible_block_id"]
        seen = self.irreversible.setdefault(lib, lib_id)
        if lib and seen != lib_id:
            self.violations.append(f"node{index}: LIB {lib} is {lib_id[:16]}, was {seen[:16]}")

    def check_final(self) -> list[str]:
        """Every block seen irreversible is still on every node's chain."""
        reverted = list(self.violations)
        # The last LIB sampled on one node may be above another's head for a moment (the
        # chain converged up to its lowest LIB): each must hold that block before it is asked.
        top = max(self.irreversible, default=0)
        for node in self.cluster.nodes:
            wait_for(
                lambda node=node: quick(node, "/v1/chain/get_info")["head_block_num"] >= top,  # type: ignore[misc]
                10,
                f"{node.data_dir.name} to hold block {top}",
            )
        for num, block_id in sorted(self.irreversible.items()):
            if num == 0:
                continue
            for i, node in enumerate(self.cluster.nodes):
                held = quick(node, "/v1/chain/get_block", {"block_num_or_id": num})["id"]
                if held != block_id:
                    reverted.append(f"node{i + 1}: block {num} is {held[:16]}, was {block_id[:16]}")
        return reverted


class TxLoad:
    """Transfers pushed (async mode) into some nodes, a thread each, as fast as they take
    them: under load the sockets to a cut peer hold unsent bytes, which idle ones do not."""

    def __init__(self, cluster: Cluster, *indexes: int) -> None:
        keys = json.loads(cluster.keys.read_text())
        self.keys = {name: PrivateKey.from_text(keys[name]) for name in ("alice", "bob", "carol")}
        self.nodes = [cluster.nodes[i - 1] for i in indexes]
        self.sent = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(n,)) for n in self.nodes]

    def __enter__(self) -> TxLoad:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _run(self, node: NodeProcess) -> None:
        users = list(self.keys)
        n = 0
        while not self._stop.is_set():
            try:
                info = quick(node, "/v1/chain/get_info")
                chain_id = bytes.fromhex(info["chain_id"])
                ref = tapos_of(BlockId(bytes.fromhex(info["head_block_id"])))
                for _ in range(50):
                    n += 1
                    sender, recipient = users[n % 3], users[(n + 1) % 3]
                    action = Transfer(AccountName(sender), AccountName(recipient), 1, f"{n:0>90}")
                    tx = Transaction(int(time.time()) + 120, ref[0], ref[1], (action,))
                    stx = SignedTransaction.sign(tx, chain_id, [self.keys[sender]])
                    body = {"packed_trx": stx.packed.hex(), "signatures": [stx.signatures[0].hex()]}
                    quick(node, "/v1/chain/push_transaction", body | {"mode": "async"})
                    self.sent += 1
            except OSError:
                time.sleep(0.2)  # the node is frozen or restarting
