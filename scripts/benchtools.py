"""What the benchmark scripts share: ports, JSON over HTTP, pushing transactions, CPU time."""

from __future__ import annotations

import json
import os
import socket
import urllib.request
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


async def push(session: aiohttp.ClientSession, url: str, body: bytes) -> bool:
    """One push_transaction; whether the node accepted it."""
    async with session.post(
        url + "/v1/chain/push_transaction",
        data=body,
        headers={"Content-Type": "application/json"},
    ) as response:
        await response.read()
        return response.status == 200


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


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
