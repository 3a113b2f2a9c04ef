"""Running BPS on one host: a broker process (``bor-bps broker``), and ``bor-bps up``, which
starts a devnet, puts the contract and three brokers on it and runs them until interrupted.
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
from pathlib import Path

from bps.broker import BrokerConfig, run
from bps.cluster import Secrets, Server
from bps.deploy import Deployment, install, start_broker
from bps.errors import BpsError
from chain.core.primitives.crypto import PrivateKey

CONTRACT_SOURCE = Path(__file__).parent / "contract"
READY_TIMEOUT_S = 60.0


def run_broker(root: Path, name: str) -> None:
    """One broker in this process: its nats-server as a child, then the sidecar and anchorer
    until a signal."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    deployment = Deployment.load(root)
    spec = deployment.broker(name)
    keys = Secrets.load(deployment.secrets_file)
    server = Server(spec.server, [b.server for b in deployment.brokers], root / name, keys)
    server.start(own_session=False)
    wait_port(spec.client_port)
    config = BrokerConfig(
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
    try:
        asyncio.run(_until_signal(config))
    finally:
        server.stop()


async def _until_signal(config: BrokerConfig) -> None:
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await run(config)


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
