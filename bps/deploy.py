"""A BPS deployment on one host: its description (``bps.json``: the node, each broker's ports
and key file, the NATS secrets file), putting the contract and the brokers on the chain, and
running a broker as a process (its ``nats-server`` a child that dies with it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from bor_client import Client, Signer
from bps.cluster import Secrets, ServerSpec, specs
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
