"""What the benchmark scripts share: ports, JSON over HTTP, pushing transactions, CPU time and
the cores it was spread over."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports that are free now."""
    while True:
        first = free_port()
        if first + count > 65000:
            continue
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first


def post_json(url: str, body: dict[str, Any] | None = None, timeout: float = 10) -> Any:
    """POST ``body`` as JSON to ``url`` (the whole address, path included); the JSON answer."""
    request = urllib.request.Request(url, data=json.dumps(body or {}).encode())
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


class KeptConnection:
    """JSON POSTs over one kept-alive HTTP connection to a node on loopback: a benchmark that
    polls a node every 50 ms then costs it one request each, not also a TCP accept and a new
    connection's set-up on its event loop."""

    def __init__(self, port: int, timeout: float = 10) -> None:
        self._conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        self._conn.request(
            "POST",
            path,
            body=json.dumps(body or {}).encode(),
            headers={"Content-Type": "application/json"},
        )
        response = self._conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise OSError(f"{path}: HTTP {response.status} {data[:200]!r}")
        return json.loads(data)

    def close(self) -> None:
        self._conn.close()


async def push(session: aiohttp.ClientSession, url: str, body: bytes) -> bool:
    """One push_transaction; whether the node accepted it."""
    async with session.post(
        url + "/v1/chain/push_transaction",
        data=body,
        headers={"Content-Type": "application/json"},
    ) as response:
        await response.read()
        return response.status == 200


def _stat_cpu(path: str) -> float:
    """CPU seconds (user + system) in a ``/proc`` stat file (a process's or a thread's)."""
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far."""
    return _stat_cpu(f"/proc/{pid}/stat")


def busiest_thread_cpu(pid: int) -> float:
    """CPU seconds so far of the busiest thread of process ``pid`` (0.0 once it is gone).
    Over the wall time, it says how near one thread (a node's chain thread) is to being the
    bound, whatever the cores: at 1.0, more cores cannot help."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    busiest = 0.0
    for tid in tids:
        try:
            busiest = max(busiest, _stat_cpu(f"/proc/{pid}/task/{tid}/stat"))
        except OSError:
            continue
    return busiest


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants (a node and its signature workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        children.setdefault(parent, []).append(int(entry))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += process_cpu(p)
        except OSError:
            continue
        todo.extend(children.get(p, []))
    return total


@dataclass(frozen=True, slots=True)
class Cores:
    """The cores this process may run on (its CPU affinity, which a container or ``taskset``
    narrows) and the machine's: a figure from a large machine compares only with both."""

    available: int
    machine: int

    def __str__(self) -> str:
        return f"cores: {self.available} available ({self.machine} on the machine)"


def cores() -> Cores:
    """The cores available to this process and on the machine."""
    machine = os.cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        return Cores(len(os.sched_getaffinity(0)), machine)
    return Cores(machine, machine)


def cores_used(cpu_s: float, wall_s: float) -> float:
    """How many cores ``cpu_s`` CPU seconds (of the measured processes: ``tree_cpu`` of a node,
    or of this process with its workers) kept busy over ``wall_s`` seconds, to 2 decimals."""
    assert wall_s > 0, wall_s
    return round(cpu_s / wall_s, 2)


def stop_node(proc: subprocess.Popen[bytes]) -> None:
    """Stop a node as an operator would (SIGTERM), killing it if it has not gone in 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def start_node(
    data: Path, args: list[str], what: str = "the node"
) -> tuple[subprocess.Popen[bytes], str]:
    """``bor-node run`` on ``data`` with ``args`` (its RPC on a free loopback port, no admin
    listener, warnings only); returns the process and its RPC URL once get_info answers
    (the process is killed if it does not within 30 s)."""
    port = free_port()
    cmd = [
        str(Path(sys.executable).parent / "bor-node"),
        "run",
        "--data-dir", str(data),
        "--http-server-address", f"127.0.0.1:{port}",
        "--admin-http-server-address", "",
        "--log-level", "warning",
        *args,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            post_json(url + "/v1/chain/get_info", timeout=2)
            return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{what} did not start")


def start_producer(data: Path, name: str, key_text: str) -> tuple[subprocess.Popen[bytes], str]:
    """``start_node`` producing as ``name`` (signing key ``key_text``, as in
    ``PUB=KEY:PVT``) with the mempool limits lifted."""
    return start_node(
        data,
        ["--producer-name", name, "--signature-provider", key_text,
         "--max-mempool-txs", "200000", "--max-mempool-per-account", "200000"],
    )  # fmt: skip
