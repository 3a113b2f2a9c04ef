"""A real node's RPC under schemathesis (every check, both listeners), and its listeners and
limits as configured from flags: admin routes apart, slow senders cut off."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
from pathlib import Path

import pytest

from tests.integration.conftest import BIN, NodeProcess, Nodes, rpc
from tests.support.wait import SLOWDOWN

CONFIG = Path(__file__).with_name("schemathesis.toml")
# Examples per operation and phase: the two runs take ~30 s together on a 2-core machine.
MAX_EXAMPLES = {"public": 100, "admin": 40}


def schemathesis(url: str, max_examples: int, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``schemathesis run`` of ``url``/openapi.json with every check, deterministically (in
    ``cwd``: it keeps a cache directory there)."""
    command = [
        str(BIN / "schemathesis"),
        "--config-file",
        str(CONFIG),
        "run",
        f"{url}/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        str(max_examples),
        "--generation-deterministic",  # the same inputs every run, no example database
        "--workers",
        "1",
        "--request-timeout",
        str(10 * SLOWDOWN),
        "--no-color",
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=300 * SLOWDOWN, cwd=cwd)


@pytest.fixture
def node(nodes: Nodes) -> NodeProcess:
    return nodes.devnet().start(wait_head=1)


def test_schemathesis_finds_no_failure_on_either_listener(
    node: NodeProcess, tmp_path: Path
) -> None:
    """schemathesis, with every check, finds nothing wrong on the public RPC and on the
    admin listener of a running node: no 5xx, every status and answer as documented,
    schema-valid requests accepted and schema-violating ones refused, 405s as documented."""
    assert node.admin_url is not None
    for name, url in (("public", node.url), ("admin", node.admin_url)):
        run = schemathesis(url, MAX_EXAMPLES[name], tmp_path)
        assert run.returncode == 0, f"{name} listener:\n{run.stdout[-6000:]}{run.stderr}"
        assert "Tested: " in run.stdout and " passed" in run.stdout


def test_admin_routes_live_only_on_the_admin_listener(node: NodeProcess) -> None:
    """The public RPC answers 404 to /v1/net/connect and /v1/net/disconnect; the admin
    listener dials the address it is given."""
    with pytest.raises(urllib.error.HTTPError) as refused:
        node.rpc("/v1/net/connect", {"address": "127.0.0.1:9"})
    assert refused.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as refused:
        node.rpc("/v1/net/disconnect", {"peer": "x"})
    assert refused.value.code == 404
    assert node.admin("/v1/net/connect", {"address": "127.0.0.1:9"})["status"] == "dialling"
    dialing = [d["address"] for d in node.rpc("/v1/net/peers")["dialing"]]
    assert dialing == ["127.0.0.1:9"]


def test_slow_senders_are_cut_off_by_the_node(nodes: Nodes, tmp_path: Path) -> None:
    """With --http-read-timeout-ms 1000, a header dripped a byte every 0.1 s is cut off
    within about a second, and the node keeps answering others."""
    node = nodes.devnet().start(wait_head=1)
    node.stop()
    data = tmp_path / "devnet" / "node1"
    slow = nodes.run(data, "--http-read-timeout-ms", "1000").start()
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", slow.port)) as sock:
        sock.settimeout(0.1)
        sock.sendall(b"POST /v1/node/health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        closed = b"x"
        while time.monotonic() - started < 10 * SLOWDOWN:
            try:
                sock.sendall(b"a")
                closed = sock.recv(1024)
            except TimeoutError:
                continue
            except ConnectionError:
                closed = b""
            break
    assert closed == b"", "the slow sender was not cut off"
    assert time.monotonic() - started < 3 * SLOWDOWN
    assert rpc(slow.url, "/v1/node/health")["status"] == "ok"
