"""Real ``bor-node`` processes on loopback for integration tests."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName, BlockId
from node.commands.devnet import DevNode
from tests.support.wait import SLOWDOWN, wait_until

BIN = Path(sys.executable).parent
# Below the kernel's ephemeral ports (32768 on by default), where a connection of any process
# could take a port between its check here and a node's bind.
_LOW_PORT, _HIGH_PORT = 10000, 32700
_next_port = [_LOW_PORT + (os.getpid() % 100) * 200]


def free_port() -> int:
    """A port nobody listens on, from a range private to this test process."""
    import socket

    while True:
        _next_port[0] += 1
        if _next_port[0] >= _HIGH_PORT:
            _next_port[0] = _LOW_PORT
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", _next_port[0]))
            except OSError:
                continue
            return _next_port[0]


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports."""
    while True:
        first = free_port()
        rest = [free_port() for _ in range(count - 1)]
        if rest == list(range(first + 1, first + count)):
            return first


def rpc(url: str, path: str, body: dict[str, Any] | None = None, timeout: float = 10) -> Any:
    request = urllib.request.Request(
        url + path,
        data=json.dumps(body or {}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout * SLOWDOWN) as response:
        return json.loads(response.read())


def serve_snapshots(devnet: NodeProcess, chunk_bytes: int) -> None:
    """Restart a one-producer ``Nodes.devnet`` writing a snapshot every 4 blocks, in chunks
    of ``chunk_bytes`` and kept 50 deep (so that the one a state sync chooses is still there
    when asked for); return once one is served."""
    assert devnet.stop() == 0
    with (devnet.data_dir / "node1" / "config.ini").open("a") as ini:
        ini.write("snapshot-interval-blocks = 4\nsnapshot-keep = 50\n")
        ini.write(f"snapshot-chunk-bytes = {chunk_bytes}\n")
    devnet.start()
    wait_for(lambda: devnet.rpc("/v1/node/snapshots")["snapshots"], 60, "a snapshot served")


def devnet_p2p_address(devnet: NodeProcess) -> str:
    """Where a one-producer ``Nodes.devnet`` listens for peers."""
    return next(
        line.split("=", 1)[1].strip()
        for line in (devnet.data_dir / "node1" / "config.ini").read_text().splitlines()
        if line.startswith("p2p-listen-endpoint")
    )


def fresh_data_dir(path: Path, genesis: Path) -> Path:
    """An empty data dir at ``path`` holding only a copy of ``genesis``."""
    path.mkdir()
    shutil.copy(genesis, path / "genesis.json")
    return path


def loopback_plan(count: int) -> list[DevNode]:
    """``count`` producer nodes (node1/producera, ...) on loopback, each with fresh RPC, P2P
    and admin ports, for ``node.commands.devnet.prepare``."""
    return [
        DevNode(
            f"node{i + 1}",
            f"producer{chr(ord('a') + i)}",
            ("127.0.0.1", free_port()),
            ("127.0.0.1", free_port()),
            ("127.0.0.1", free_port()),
        )
        for i in range(count)
    ]


def push_transfers(
    node: Any,
    keys: dict[str, PrivateKey],
    stop: threading.Event,
    sent: list[int],
    pause: float = 0.0,
) -> None:
    """Push transfers among the dev users in async mode, 50 per head read and ``pause``
    seconds between such rounds, until ``stop`` is set or the node goes away."""
    info = node.rpc("/v1/chain/get_info")
    chain_id = bytes.fromhex(info["chain_id"])
    users = ["alice", "bob", "carol"]
    n = 0
    while not stop.is_set():
        try:
            head = node.rpc("/v1/chain/get_info")
        except (urllib.error.URLError, OSError):
            return  # the node was killed
        ref = tapos_of(BlockId(bytes.fromhex(head["head_block_id"])))
        for _ in range(50):
            n += 1
            sender, recipient = users[n % 3], users[(n + 1) % 3]
            action = Transfer(AccountName(sender), AccountName(recipient), 1 + n % 97, str(n))
            tx = Transaction(int(time.time()) + 120, ref[0], ref[1], (action,))
            stx = SignedTransaction.sign(tx, chain_id, [keys[sender]])
            body = {"packed_trx": stx.packed.hex(), "signatures": [stx.signatures[0].hex()]}
            try:
                node.rpc("/v1/chain/push_transaction", body | {"mode": "async"})
            except (urllib.error.URLError, OSError):
                return  # the node was killed
            sent.append(n)
        stop.wait(pause)


def wait_for(check: Callable[[], object], timeout: float, what: str) -> None:
    """``wait_until`` for a node's state: a node going down or coming up (refused, reset or
    cut off mid-answer) counts as not yet, and each look costs an RPC, so every 0.2 s."""
    errors = (OSError, http.client.HTTPException, json.JSONDecodeError)
    wait_until(check, timeout, what, ignoring=errors, interval=0.2)


class NodeProcess:
    """A ``bor-node`` process in its own process group, logging to a file; ``prefix`` runs it
    through another command that execs it (``ip netns exec NS``: the pid stays the node's)."""

    def __init__(
        self,
        data_dir: Path,
        args: list[str],
        port: int,
        log: Path,
        admin_port: int | None = None,
        host: str = "127.0.0.1",
        prefix: Sequence[str] = (),
    ) -> None:
        self.data_dir = data_dir
        self.args = args
        self.port = port
        self.url = f"http://{host}:{port}"
        self.admin_url = None if admin_port is None else f"http://{host}:{admin_port}"
        self.prefix = list(prefix)
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait_head: int = 0) -> NodeProcess:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [*self.prefix, str(BIN / "bor-node"), *self.args],
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self.wait_for_head(wait_head, 40)
        return self

    def tail(self) -> str:
        return self.log.read_text()[-3000:] if self.log.exists() else ""

    def rpc(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return rpc(self.url, path, body)

    def admin(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """A call to the node's admin listener."""
        assert self.admin_url is not None, "this node has no admin listener"
        return rpc(self.admin_url, path, body)

    def rpc_text(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=10 * SLOWDOWN) as response:
            return str(response.read().decode())

    def info(self) -> dict[str, Any]:
        return dict(self.rpc("/v1/chain/get_info"))

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)
        return self.proc.wait(timeout=20 * SLOWDOWN)

    def wait_for_head(self, num: int, timeout: float = 30) -> dict[str, Any]:
        """The node's info once its head is at ``num`` or beyond; fails at once, with its
        log's tail, if the process it started has exited."""

        def reached() -> bool:
            assert self.proc is None or self.proc.poll() is None, self.tail()
            return bool(self.info()["head_block_num"] >= num)

        wait_for(reached, timeout, f"head {num} on {self.url}")
        return self.info()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Nodes:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[NodeProcess] = []
        self.p2p_ports: dict[Path, int] = {}

    def devnet(self, name: str = "devnet", producers: int = 1) -> NodeProcess:
        """``bor-node devnet``: one producer in this process, or several as children (the
        returned process's RPC is the first node's; the others follow on the next ports)."""
        data_dir = self.tmp / name
        port = free_ports(producers)
        admin_port = free_ports(producers)
        args = [
            "devnet",
            "--producers",
            str(producers),
            "--data-dir",
            str(data_dir),
            "--http-server-address",
            f"127.0.0.1:{port}",
            "--p2p-base-port",
            str(free_ports(producers)),
            "--admin-base-port",
            str(admin_port),
            "--log-format",
            "json",
        ]
        node = NodeProcess(data_dir, args, port, self.tmp / f"{name}.log", admin_port)
        self.started.append(node)
        return node

    def run(
        self,
        data_dir: Path,
        *extra: str,
        rpc_port: int | None = None,
        admin_port: int | None = None,
    ) -> NodeProcess:
        """``bor-node run`` on ``data_dir``; with ``rpc_port`` (and ``admin_port``) the ports
        come from its config.ini, otherwise fresh RPC, admin and p2p ports are passed as
        flags."""
        args = ["run", "--data-dir", str(data_dir), "--log-format", "json", *extra]
        if rpc_port is None:
            rpc_port, admin_port = free_port(), free_port()
            self.p2p_ports[data_dir] = free_port()
            args += [
                "--http-server-address",
                f"127.0.0.1:{rpc_port}",
                "--admin-http-server-address",
                f"127.0.0.1:{admin_port}",
                "--p2p-listen-endpoint",
                f"127.0.0.1:{self.p2p_ports[data_dir]}",
            ]
        log = data_dir.parent / f"{data_dir.name}.log"
        node = NodeProcess(data_dir, args, rpc_port, log, admin_port)
        self.started.append(node)
        return node

    def stop_all(self) -> None:
        for node in self.started:
            if node.running and node.proc is not None:
                node.proc.kill()
                node.proc.wait()


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[Nodes]:
    pool = Nodes(tmp_path)
    yield pool
    pool.stop_all()
    for node in pool.started:  # shown by pytest only when the test failed
        print(f"----- {node.log.name} (last lines)\n" + "\n".join(_last_lines(node.log, 40)))


def _last_lines(log: Path, count: int) -> list[str]:
    if not log.exists():
        return []
    return [line[:400] for line in log.read_text(errors="replace").splitlines()[-count:]]
