"""Real ``bor-node`` processes on loopback for integration tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NodeProcess:
    """``bor-node devnet`` in its own process group, logging to a file."""

    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir = data_dir
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data_dir.parent / f"{data_dir.name}.log"

    def start(self) -> NodeProcess:
        cmd = [
            str(BIN / "bor-node"),
            "devnet",
            "--data-dir",
            str(self.data_dir),
            "--http-server-address",
            f"127.0.0.1:{self.port}",
            "--log-format",
            "json",
        ]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
        deadline = time.time() + 30
        while time.time() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-2000:]
            try:
                if self.rpc("/v1/chain/get_info")["head_block_num"] >= 1:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError("node did not start producing:\n" + self.log.read_text()[-2000:])

    def rpc(self, path: str, body: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body or {}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)
        return self.proc.wait(timeout=20)

    def wait_for_head(self, num: int, timeout: float = 20) -> dict[str, Any]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            info: dict[str, Any] = self.rpc("/v1/chain/get_info")
            if info["head_block_num"] >= num:
                return info
            time.sleep(0.1)
        raise AssertionError(f"head did not reach {num}")


@pytest.fixture
def node_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[NodeProcess] = []

    def make(name: str = "node") -> NodeProcess:
        node = NodeProcess(tmp_path / name, free_port())
        started.append(node)
        return node

    yield make
    for node in started:
        if node.proc is not None and node.proc.poll() is None:
            node.proc.kill()
            node.proc.wait()
