"""``bor-node devnet``: a local network of N producer nodes on loopback, one command.

Layout of the data dir: ``genesis.json`` and ``keys.json`` shared by all, ``devnet.json``
(which node listens where), ``devnet.lock`` (there while a devnet runs there), and one
directory per node (``node1`` …) with its config.ini, its producer's ``signing.key`` (mode
0600, named by ``signature-provider = PUB=KEYFILE:path``: no key in the config), block store
and log. Node i serves the RPC on the base port + i, its admin RPC on the admin
base port + i (by default right after the RPC ports), and accepts peers on the p2p base
port + i; every node dials the ones before it, so the network is fully meshed.
One producer runs in this process; more run as child processes that die with this one.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from genesis.devnet import producer_names, write_dev_genesis, write_private
from node.errors import NodeError

# Dev chains unbond in a minute and re-elect every 10 s so that a person can watch it happen,
# and let an account pay for 64 MiB of contract rows (BPS's anchors, ~500 bytes each, fill the
# default 1 MiB in minutes of anchoring).
DEV_PARAMS: dict[str, int | str] = {
    "unbond_delay_s": 60,
    "election_interval_blocks": 20,
    "max_ram_bytes": 64 << 20,
}


@dataclass(frozen=True, slots=True)
class DevNode:
    name: str
    producer: str
    rpc: tuple[str, int]
    p2p: tuple[str, int]
    admin: tuple[str, int] | None = None  # the admin RPC; None for none

    @property
    def url(self) -> str:
        return f"http://{self.rpc[0]}:{self.rpc[1]}"

    @property
    def admin_url(self) -> str | None:
        return None if self.admin is None else f"http://{self.admin[0]}:{self.admin[1]}"

    def listeners(self) -> list[tuple[str, tuple[str, int]]]:
        """What this node listens on, each with its role's name."""
        roles = [("RPC", self.rpc), ("p2p", self.p2p)]
        return roles + ([] if self.admin is None else [("admin RPC", self.admin)])


def plan(
    producers: int, rpc: tuple[str, int], p2p_port: int, admin_port: int | None = None
) -> list[DevNode]:
    """Where each of ``producers`` nodes listens; refuses a base port whose nodes' ports do
    not all lie in 1..65535, naming the option, before anything is created."""
    names = producer_names(producers)
    admin = rpc[1] + producers if admin_port is None else admin_port
    for option, base in [
        ("--http-server-address", rpc[1]),
        ("--p2p-base-port", p2p_port),
        ("--admin-base-port", admin),
    ]:
        last = base + producers - 1
        if base < 1 or last > 65535:
            ports = f"port {base}" if producers == 1 else f"ports {base} to {last}"
            raise NodeError(
                f"{option}: {producers} node(s) would listen on {ports}; ports are 1 to 65535"
            )
    nodes = [
        DevNode(
            f"node{i + 1}",
            names[i],
            (rpc[0], rpc[1] + i),
            ("127.0.0.1", p2p_port + i),
            ("127.0.0.1", admin + i),
        )
        for i in range(producers)
    ]
    _refuse_shared_ports(nodes)
    return nodes


_BASES = "--http-server-address, --p2p-base-port and --admin-base-port"


def _refuse_shared_ports(nodes: list[DevNode]) -> None:
    """Bases closer together than the nodes are many give two listeners one port: a node
    then cannot start, or its peers dial another node's HTTP listener as its p2p address."""
    taken: dict[int, str] = {}
    for node in nodes:
        for what, (_, port) in node.listeners():
            if port in taken:
                raise NodeError(
                    f"port {port} would be both {taken[port]} and {node.name}'s {what}: set"
                    f" {_BASES} at least {len(nodes)} apart"
                )
            taken[port] = f"{node.name}'s {what}"


LOCK = "devnet.lock"


@contextmanager
def claim(data_dir: Path) -> Iterator[None]:
    """Lock ``data_dir`` for this devnet inside the ``with`` (the process's life): a second
    devnet there is refused before it prints or starts anything. However the block ends, the
    lock file goes, and so does ``data_dir`` if this made it and nothing else was put there."""
    made = not data_dir.exists()
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / LOCK
    lock = _lock(path, data_dir)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # while still held: see _lock
        lock.close()
        if made:
            with suppress(OSError):  # not empty: the devnet was written there, and stays
                data_dir.rmdir()


def _lock(path: Path, data_dir: Path) -> IO[str]:
    """The locked, open lock file at ``path``, holding this process's pid."""
    while True:
        lock = path.open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            lock.seek(0)
            pid = lock.read().strip() or "?"
            lock.close()
            if err.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            raise NodeError(
                f"a devnet already runs in {data_dir} (pid {pid}); stop it first"
            ) from err
        # The holder unlinks the file before it lets go: a lock taken on a file that is no
        # longer at ``path`` guards nothing, and the next try makes a new one.
        try:
            same = os.stat(path).st_ino == os.fstat(lock.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        lock.close()
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def clear(data_dir: Path) -> None:
    """Delete the devnet in ``data_dir`` (``--fresh``), all but the lock this process holds."""
    for entry in data_dir.iterdir():
        if entry.name == LOCK:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def check_ports(nodes: list[DevNode]) -> None:
    """Refuse, before anything starts, ports that something already listens on: else a node
    dies on start and takes the devnet with it, after the banner said all was well."""
    for node in nodes:
        for what, (host, port) in node.listeners():
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                # As the node binds: a port only in TIME_WAIT from a stopped devnet is free.
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind((host, port))
                except OSError as err:
                    if err.errno != errno.EADDRINUSE:
                        raise NodeError(
                            f"{node.name}'s {what} cannot listen on {host}:{port}: {err.strerror}"
                        ) from err
                    raise NodeError(
                        f"port {port} ({node.name}'s {what}) is in use: stop what listens"
                        " there or choose other ports (--http-server-address, --p2p-base-port,"
                        " --admin-base-port)"
                    ) from err


def prepare(
    data_dir: Path, nodes: list[DevNode], params: Mapping[str, int | str] | None = None
) -> None:
    """Write genesis, keys and every node's config.ini, unless the devnet already exists;
    ``params`` override chain parameters of the dev genesis."""
    manifest = data_dir / "devnet.json"
    if manifest.exists():
        existing = json.loads(manifest.read_text())
        if len(existing["nodes"]) != len(nodes):
            raise NodeError(
                f"{data_dir} holds a devnet of {len(existing['nodes'])} producers; "
                "use --fresh to start a new one"
            )
        return
    _, keys_path = write_dev_genesis(data_dir, len(nodes), **{**DEV_PARAMS, **(params or {})})
    keys = json.loads(keys_path.read_text())
    for i, node in enumerate(nodes):
        node_dir = data_dir / node.name
        node_dir.mkdir(parents=True, exist_ok=True)
        key = PrivateKey.from_text(keys[node.producer])
        key_file = (node_dir / "signing.key").resolve()
        write_private(key_file, key.to_text() + "\n")
        lines = [
            "# written by bor-node devnet",
            f"genesis-json = {(data_dir / 'genesis.json').resolve()}",
            f"http-server-address = {node.rpc[0]}:{node.rpc[1]}",
            "admin-http-server-address = "
            + ("" if node.admin is None else f"{node.admin[0]}:{node.admin[1]}"),
            f"p2p-listen-endpoint = {node.p2p[0]}:{node.p2p[1]}",
            f"producer-name = {node.producer}",
            f"signature-provider = {public_key_to_text(key.public_key)}=KEYFILE:{key_file}",
            "# every node dials from 127.0.0.1: node1 alone takes up to 20 of them",
            "p2p-max-per-address = 0",
        ]
        lines += [f"p2p-peer-address = {p.p2p[0]}:{p.p2p[1]}" for p in nodes[:i]]
        (node_dir / "config.ini").write_text("\n".join(lines) + "\n")
    manifest.write_text(
        json.dumps(
            {
                "nodes": [
                    {
                        "name": n.name,
                        "producer": n.producer,
                        "rpc": n.url,
                        "admin_rpc": n.admin_url,
                        "p2p": f"{n.p2p[0]}:{n.p2p[1]}",
                    }
                    for n in nodes
                ]
            },
            indent=2,
        )
        + "\n"
    )


def node_urls(data_dir: Path) -> list[str]:
    manifest = data_dir / "devnet.json"
    if not manifest.exists():
        raise NodeError(f"{data_dir} is not a devnet data dir (no devnet.json)")
    return [n["rpc"] for n in json.loads(manifest.read_text())["nodes"]]


def _die_with_parent() -> None:
    """In the child, before exec: receive SIGTERM when the devnet process dies, however."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass  # not Linux: children are still stopped on a clean exit


def supervise(data_dir: Path, nodes: list[DevNode], log_level: str) -> int:
    """Run every node as a child process until a signal, or until one of them dies."""
    children: list[tuple[DevNode, subprocess.Popen[bytes]]] = []
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    for node in nodes:
        node_dir = data_dir / node.name
        log = (node_dir / "node.log").open("ab")
        cmd = [
            sys.executable,
            "-m",
            "node.cli",
            "run",
            "--data-dir",
            str(node_dir),
            "--log-format",
            "json",
            "--log-level",
            log_level,
        ]
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=log, preexec_fn=_die_with_parent, env=os.environ.copy()
        )
        log.close()
        children.append((node, proc))
    code = 0
    while not stopping:
        for node, proc in children:
            if proc.poll() is not None:
                print(
                    f"bor-node devnet: {node.name} exited with {proc.returncode}; "
                    f"see {data_dir / node.name / 'node.log'}",
                    file=sys.stderr,
                )
                stopping, code = True, 1
                break
        time.sleep(0.3)
    for _, proc in children:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for _, proc in children:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
    return code
