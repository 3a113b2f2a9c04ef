"""BPS on one host: a deployment's description (``bps.json``: the node, each broker's ports
and key file, the NATS secrets file), putting the contract and the brokers on the chain, a
broker as a process (``bor-bps broker``: its ``nats-server`` a child that dies with it), and
``bor-bps up``, which starts a devnet, puts the contract and three brokers on it and runs them
until interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable
from dataclasses import asdict, dataclass
from pathlib import Path

from bor_client import Client, Signer
from bps.broker import BrokerConfig, anchor, run
from bps.cluster import Secrets, Server, ServerSpec, die_with_parent, specs
from bps.errors import BpsError
from chain.core.execution.actions import NewAccount, SetCode
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import account_name

DESCRIPTION = "bps.json"
GOVERNOR = "bor.gov"


@dataclass(frozen=True, slots=True)
class BrokerSpec:
    name: str
    client_port: int
    route_port: int
    monitor_port: int
    sidecar_port: int

    @property
    def server(self) -> ServerSpec:
        return ServerSpec(self.name, self.client_port, self.route_port, self.monitor_port)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.sidecar_port}/bps"


@dataclass(frozen=True, slots=True)
class Deployment:
    root: Path
    node_url: str
    brokers: tuple[BrokerSpec, ...]

    @classmethod
    def new(cls, root: Path, node_url: str, names: list[str], first_port: int) -> Deployment:
        servers = specs(names, first_port)
        side = first_port + 3 * len(names)
        brokers = tuple(
            BrokerSpec(s.name, s.client_port, s.route_port, s.monitor_port, side + i)
            for i, s in enumerate(servers)
        )
        deployment = cls(root, node_url, brokers)
        root.mkdir(parents=True, exist_ok=True)
        Secrets.new().save(deployment.secrets_file)
        for b in brokers:
            write_private(deployment.key_file(b.name), PrivateKey.generate().to_text())
        (root / DESCRIPTION).write_text(
            json.dumps({"node": node_url, "brokers": [asdict(b) for b in brokers]}, indent=2)
        )
        return deployment

    @classmethod
    def load(cls, root: Path) -> Deployment:
        data = json.loads((root / DESCRIPTION).read_text())
        return cls(root, data["node"], tuple(BrokerSpec(**b) for b in data["brokers"]))

    @property
    def secrets_file(self) -> Path:
        return self.root / "nats-secrets.json"

    def key_file(self, broker: str) -> Path:
        return self.root / f"{broker}.key"

    def key(self, broker: str) -> PrivateKey:
        return PrivateKey.from_text(self.key_file(broker).read_text().strip())

    def broker(self, name: str) -> BrokerSpec:
        for b in self.brokers:
            if b.name == name:
                return b
        raise KeyError(name)


def write_private(path: Path, text: str) -> None:
    path.touch(mode=0o600, exist_ok=True)
    path.write_text(text + "\n")


def install(
    deployment: Deployment, governor_key: str, wasm: bytes, abi: str, contract_key: PrivateKey
) -> None:
    """The ``bps`` account with the contract, initialised with governance as its admin, and
    every broker's account, registered with its sidecar's address and its key."""
    signer = Signer(
        [governor_key, contract_key, *(deployment.key(b.name) for b in deployment.brokers)]
    )
    client = Client(deployment.node_url, signer)
    gov = account_name(GOVERNOR)
    client.push([NewAccount(gov, account_name("bps"), contract_key.public_key)])
    client.push([SetCode(account_name("bps"), wasm, abi)])
    bps = client.contract("bps")
    bps.push("init", {"admin": GOVERNOR}, "bps")
    for b in deployment.brokers:
        key = deployment.key(b.name)
        client.push([NewAccount(gov, account_name(b.name), key.public_key)])
        bps.push(
            "regbroker",
            {"broker": b.name, "url": b.url, "key": (b"\x00" + key.public_key).hex()},
            GOVERNOR,
        )


def start_broker(deployment: Deployment, name: str, log: Path) -> subprocess.Popen[bytes]:
    """``bor-bps broker`` for ``name`` as a process of its own session (so that a test can
    kill it, its NATS server with it, as a crash would)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bps.cli",
                "--dir",
                str(deployment.root),
                "broker",
                "--name",
                name,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


CONTRACT_SOURCE = Path(__file__).parent / "contract"
READY_TIMEOUT_S = 60.0


def broker_config(root: Path, name: str) -> BrokerConfig:
    deployment = Deployment.load(root)
    spec = deployment.broker(name)
    keys = Secrets.load(deployment.secrets_file)
    return BrokerConfig(
        name,
        deployment.key(name),
        deployment.node_url,
        spec.server.url,
        keys.user,
        keys.password,
        "127.0.0.1",
        spec.sidecar_port,
        len(deployment.brokers),
    )


def run_broker(root: Path, name: str) -> None:
    """One broker in this process: its nats-server and its anchorer as children that die
    with it, then the sidecar until a signal."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    deployment = Deployment.load(root)
    spec = deployment.broker(name)
    keys = Secrets.load(deployment.secrets_file)
    server = Server(spec.server, [b.server for b in deployment.brokers], root / name, keys)
    server.start(own_session=False)
    wait_port(spec.client_port)
    command = [sys.executable, "-m", "bps.cli", "--dir", str(root), "anchor", "--name", name]
    try:
        asyncio.run(_until_signal(run(broker_config(root, name)), command))
    finally:
        server.stop()


def run_anchorer(root: Path, name: str) -> None:
    """A broker's anchorer, until a signal (its broker starts it)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(_until_signal(anchor(broker_config(root, name))))


async def _until_signal(work: Awaitable[None], child: list[str] | None = None) -> None:
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        if child is None:
            await work
        else:
            await asyncio.gather(work, _keep_running(child))


async def _keep_running(command: list[str]) -> None:
    """``command`` as a child that dies with this process, started again when it ends."""
    while True:
        process = await asyncio.create_subprocess_exec(*command, preexec_fn=die_with_parent)
        try:
            code = await process.wait()
        finally:
            if process.returncode is None:
                process.terminate()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), 10)
        logging.getLogger("bps.broker").warning("%s ended (%s); starting it again", command, code)
        await asyncio.sleep(1)


def wait_port(port: int, timeout: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise BpsError(f"nothing listens on port {port} after {timeout:.0f} s")


def wait_http(url: str, timeout: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise BpsError(f"{url} did not answer in {timeout:.0f} s")


def build_contract(work: Path) -> tuple[bytes, str]:
    """The contract built by ``bor-contract`` from the copy shipped with this package."""
    out = work / "bps"  # bor-contract builds DIR/<name of DIR>.ts
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(CONTRACT_SOURCE, out, ignore=shutil.ignore_patterns("build"))
    tool = Path(sys.executable).parent / "bor-contract"
    done = subprocess.run(
        [str(tool), "build", str(out)], capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise BpsError(f"bor-contract build failed: {done.stderr.strip()[-500:]}")
    return (out / "build/bps.wasm").read_bytes(), (out / "build/bps.abi.json").read_text()


def start_devnet(root: Path, rpc_port: int) -> subprocess.Popen[bytes]:
    """One producer: its RPC on ``rpc_port``, its admin RPC and peer port the next two."""
    node = Path(sys.executable).parent / "bor-node"
    with (root / "devnet.log").open("ab") as log:
        process = subprocess.Popen(
            [
                str(node),
                "devnet",
                "--data-dir",
                str(root / "devnet"),
                "--fresh",
                "--producers",
                "1",
                "--http-server-address",
                f"127.0.0.1:{rpc_port}",
                "--p2p-base-port",
                str(rpc_port + 100),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    wait_http(f"http://127.0.0.1:{rpc_port}/v1/chain/get_info")
    return process


def up(root: Path, brokers: int, first_port: int, rpc_port: int = 8888) -> None:
    """A devnet, the contract and ``brokers`` brokers, until interrupted (Ctrl-C)."""
    root.mkdir(parents=True, exist_ok=True)
    processes: list[subprocess.Popen[bytes]] = [start_devnet(root, rpc_port)]
    try:
        names = [f"broker{chr(ord('a') + i)}" for i in range(brokers)]
        deployment = Deployment.new(root, f"http://127.0.0.1:{rpc_port}", names, first_port)
        keys = json.loads((root / "devnet/keys.json").read_text())
        wasm, abi = build_contract(root / "contract")
        install(deployment, keys["bor.gov"], wasm, abi, PrivateKey.generate())
        for name in names:
            processes.append(start_broker(deployment, name, root / f"{name}.log"))
        for b in deployment.brokers:
            wait_http(f"http://127.0.0.1:{b.sidecar_port}/health")
        print(
            f"BPS is up: node {deployment.node_url}, brokers "
            + ", ".join(b.url for b in deployment.brokers)
        )
        print(f"keys of the devnet's accounts: {root / 'devnet/keys.json'}; Ctrl-C stops it all")
        sys.stdout.flush()
        while all(p.poll() is None for p in processes):
            time.sleep(0.5)
        raise BpsError("a process of the deployment ended; see the logs in " + str(root))
    finally:
        for p in reversed(processes):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in processes:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
