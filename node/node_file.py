"""``<data-dir>/node.json``: the addresses a running node actually bound, for the commands
that must find it (``bor-node status``, the "a node is running" hint).

config.ini does not say them when the node was started with flags; the node writes this
file once its listeners are up and removes it at a clean stop. A file whose pid is not alive
is left by a node that crashed: readers ignore it.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

NODE_FILE = "node.json"
# A listener on every address is reached on loopback.
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


@dataclass(frozen=True, slots=True)
class RunningNode:
    """What a running node tells about itself: its pid, chain, and listeners' URLs."""

    pid: int
    chain_id: str
    rpc: str
    admin: str | None
    p2p_port: int | None


def write_node_file(data_dir: Path, node: RunningNode) -> None:
    """Write the file whole (a reader never sees half of it)."""
    path = data_dir / NODE_FILE
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(asdict(node), indent=2) + "\n")
    part.replace(path)


def remove_node_file(data_dir: Path, pid: int) -> None:
    """Remove the file if it is still this process's (a second node refused the data dir
    must not remove the first one's)."""
    found = read_node_file(data_dir)
    if found is not None and found.pid == pid:
        (data_dir / NODE_FILE).unlink(missing_ok=True)


def read_node_file(data_dir: Path) -> RunningNode | None:
    """The running node's file; None when there is none, it cannot be read, or its node is
    gone."""
    try:
        doc = json.loads((data_dir / NODE_FILE).read_text())
        node = RunningNode(
            pid=int(doc["pid"]),
            chain_id=str(doc["chain_id"]),
            rpc=str(doc["rpc"]),
            admin=None if doc.get("admin") is None else str(doc["admin"]),
            p2p_port=None if doc.get("p2p_port") is None else int(doc["p2p_port"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return node if _alive(node.pid) else None


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def http_url(host: str, port: int) -> str:
    """The URL a local client reaches a listener on ``host:port`` at."""
    host = _WILDCARDS.get(host, host)
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass  # a DNS name
    return f"http://{host}:{port}"
