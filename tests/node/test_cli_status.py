"""``bor-node status`` run as a command, against a stand-in RPC: which address it asks, what it
prints for a person and for a script, and what it says when nothing answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from genesis.devnet import write_dev_genesis
from genesis.model import load_genesis

BOR_NODE = Path(sys.executable).parent / "bor-node"

INFO: dict[str, Any] = {
    "chain_id": "ab" * 32,
    "head_block_num": 1234,
    "head_block_id": "cd" * 32,
    "head_block_time": "2025-01-01T00:00:00.000",
    "head_block_producer": "producera",
    "last_irreversible_block_num": 1200,
    "mempool_size": 0,
    "peer_count": 2,
    "sync_stage": "lib_catchup",
    "sync_target": 5000,
    "sync_blocks_per_s": 850.5,
    "sync_txs_per_s": 4252.5,
    "sync_eta_s": 4.4,
}


class _StandIn(ThreadingHTTPServer):
    asked: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: _StandIn

    def do_GET(self) -> None:
        self.server.asked.append(self.path)
        body = json.dumps(INFO).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def stand_in() -> Iterator[_StandIn]:
    server = _StandIn(("127.0.0.1", 0), _Handler)
    server.asked = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _status(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BOR_NODE), "status", *args], capture_output=True, text=True, timeout=30
    )


def _unused_port() -> int:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port = server.server_address[1]
    server.server_close()
    return port


def _data_dir(tmp_path: Path, port: int) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.ini").write_text(f"http-server-address = 127.0.0.1:{port}\n")
    return data


def test_status_asks_the_address_its_data_dirs_config_names(
    stand_in: _StandIn, tmp_path: Path
) -> None:
    """With --data-dir, status asks the port that dir's config.ini names (not 8888), says so,
    and shows head, LIB, the catch-up's target, rate and ETA, and the peers."""
    port = stand_in.server_address[1]
    data = _data_dir(tmp_path, port)
    done = _status("--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert stand_in.asked == ["/v1/chain/get_info"]
    out = done.stdout
    assert out.startswith(f"http://127.0.0.1:{port} ({data / 'config.ini'}): head 1,234 "), out
    assert "LIB 1,200" in out and "peers 2" in out
    assert "sync lib_catchup to 5,000 at 850.5 blocks/s (4,252.5 tx/s), ETA 4 s" in out


def test_status_json_is_one_object_for_scripts(stand_in: _StandIn, tmp_path: Path) -> None:
    """--json prints one JSON object with the address asked, head, LIB, peers and the sync
    section's figures."""
    port = stand_in.server_address[1]
    done = _status("--data-dir", str(_data_dir(tmp_path, port)), "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["url"] == f"http://127.0.0.1:{port}"
    assert (status["head_block_num"], status["last_irreversible_block_num"]) == (1234, 1200)
    assert status["peers"] == 2
    assert status["sync"] == {
        "stage": "lib_catchup",
        "target": 5000,
        "blocks_per_s": 850.5,
        "txs_per_s": 4252.5,
        "eta_s": 4.4,
    }


def test_status_says_plainly_when_nothing_answers(tmp_path: Path) -> None:
    """Nothing listening on the configured address: one line on stderr naming the URL and
    where the address came from, exit 1, no traceback; --json still prints one object."""
    port = _unused_port()
    data = _data_dir(tmp_path, port)
    done = _status("--data-dir", str(data))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == (
        f"bor-node: no node answers at http://127.0.0.1:{port}: is it running?"
        f" (address from {data / 'config.ini'})"
    )
    scripted = _status("--data-dir", str(data), "--json")
    assert scripted.returncode == 1
    assert json.loads(scripted.stdout)["error"].startswith("no node answers at")


def test_a_flag_overrides_the_config_and_a_wildcard_listener_is_asked_on_loopback(
    stand_in: _StandIn, tmp_path: Path
) -> None:
    """--http-server-address wins over config.ini; a node listening on 0.0.0.0 is asked on
    127.0.0.1."""
    port = stand_in.server_address[1]
    data = _data_dir(tmp_path, _unused_port())
    done = _status("--data-dir", str(data), "--http-server-address", f"0.0.0.0:{port}", "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert (status["url"], status["address_from"]) == (
        f"http://127.0.0.1:{port}",
        "--http-server-address",
    )


def test_a_bad_address_in_the_config_is_one_line_naming_the_option(tmp_path: Path) -> None:
    """A malformed http-server-address in config.ini is a one-line error naming the option."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.ini").write_text("http-server-address = nowhere\n")
    done = _status("--data-dir", str(data))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "'http-server-address'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_data_dir_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    """A --data-dir that does not exist is refused in one line, exit 1, instead of a status
    of whatever node answers on the default address."""
    done = _status("--data-dir", str(tmp_path / "nowhere"))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == (
        f"bor-node: {tmp_path / 'nowhere'} does not exist: pass the node's --data-dir"
    )


def test_a_node_of_another_chain_than_the_data_dirs_genesis_is_refused(
    stand_in: _StandIn, tmp_path: Path
) -> None:
    """The node at the address config.ini names serves another chain than the data dir's
    genesis.json: status refuses it, naming both chains and the flag to pass, exit 1."""
    data = _data_dir(tmp_path, stand_in.server_address[1])
    genesis, _ = write_dev_genesis(data, 1)
    held = load_genesis(genesis).chain_id.hex()
    done = _status("--data-dir", str(data))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == (
        f"bor-node: http://127.0.0.1:{stand_in.server_address[1]} serves chain"
        f" {'ab' * 8}…, {data} holds chain {held[:16]}…: pass the node's"
        f" --http-server-address (address from {data / 'config.ini'})"
    )


def test_the_running_nodes_node_json_wins_over_config_ini(
    stand_in: _StandIn, tmp_path: Path
) -> None:
    """A node.json whose pid is alive names the RPC to ask, ahead of config.ini; one whose
    pid is gone (a crashed node's) is ignored."""
    port = stand_in.server_address[1]
    data = _data_dir(tmp_path, _unused_port())
    node_json = {"pid": os.getpid(), "chain_id": "ab" * 32, "admin": None, "p2p_port": None}
    (data / "node.json").write_text(json.dumps({**node_json, "rpc": f"http://127.0.0.1:{port}"}))
    done = _status("--data-dir", str(data), "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert (status["url"], status["address_from"]) == (
        f"http://127.0.0.1:{port}",
        str(data / "node.json"),
    )
    exited = subprocess.Popen(["true"])  # a pid whose process has exited
    exited.wait()
    (data / "node.json").write_text(json.dumps({**node_json, "pid": exited.pid, "rpc": "x"}))
    stale = _status("--data-dir", str(data), "--json")
    assert json.loads(stale.stdout)["address_from"] == str(data / "config.ini")
