"""Damage to a stopped node's files never goes unnoticed: a block store that lost its last
writes stops the node with one line, a store that lost CURRENT comes back whole, and a history
file cut short is refused by ``bor-node import``."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

from chain.core.primitives.crypto import PrivateKey
from tests.integration.conftest import BIN, NodeProcess, Nodes, push_transfers
from tests.support.wait import SLOWDOWN


def _loaded_devnet(nodes: Nodes, blocks: int) -> tuple[NodeProcess, list[str]]:
    """A one-producer devnet that took transfers for ``blocks`` blocks, then stopped cleanly;
    with the ids of the first ``blocks`` blocks."""
    node = nodes.devnet().start(wait_head=1)
    keys = {
        name: PrivateKey.from_text(text)
        for name, text in json.loads((node.data_dir / "keys.json").read_text()).items()
    }
    stop, sent = threading.Event(), []  # type: ignore[var-annotated]
    loader = threading.Thread(target=push_transfers, args=(node, keys, stop, sent, 0.2))
    loader.start()
    node.wait_for_head(blocks)
    stop.set()
    loader.join(timeout=10)
    ids = [
        node.rpc("/v1/chain/get_block", {"block_num_or_id": n})["id"] for n in range(1, blocks + 1)
    ]
    assert node.stop() == 0
    assert sent, "the blocks carried transactions"
    return node, ids


def _refusal(node: NodeProcess) -> str:
    """Start ``node`` again, expecting it to exit at once without a traceback; the line it
    ends with (a devnet prints its banner first)."""
    done = subprocess.run(
        [str(BIN / "bor-node"), *node.args],
        capture_output=True,
        timeout=40 * SLOWDOWN,
        check=False,
    )
    stderr = done.stderr.decode()
    assert done.returncode != 0 and "Traceback" not in stderr, stderr[-2000:]
    return stderr.strip().splitlines()[-1]


def test_store_that_lost_its_last_writes_stops_the_node(nodes: Nodes) -> None:
    """The block store's write-ahead log cut to half (the writes a power cut can take) stops
    the node with one line naming the block it had committed, instead of a rewound chain."""
    node, ids = _loaded_devnet(nodes, 12)
    blocks = node.data_dir / "node1" / "blocks"
    log = max(blocks.glob("*.log"), key=lambda p: p.stat().st_size)
    with log.open("r+b") as f:
        f.truncate(log.stat().st_size // 2)
    line = _refusal(node)
    assert line.startswith("bor-node: the block store at "), line
    committed = int(line.split("had committed block ")[1].split()[0])
    assert committed >= len(ids), line


def test_store_without_current_resumes_at_its_head(nodes: Nodes) -> None:
    """A block store whose CURRENT file was deleted is rebuilt on start: the node resumes on
    the same blocks, not on a new chain from block 0."""
    node, ids = _loaded_devnet(nodes, 8)
    node.start(wait_head=len(ids))  # reopening moves the logged writes into a table
    assert node.stop() == 0
    blocks = node.data_dir / "node1" / "blocks"
    assert list(blocks.glob("*.ldb")), "the blocks are in a table, not only in the log"
    (blocks / "CURRENT").unlink()
    node.start(wait_head=len(ids) + 1)
    kept = [
        node.rpc("/v1/chain/get_block", {"block_num_or_id": n})["id"]
        for n in range(1, len(ids) + 1)
    ]
    assert kept == ids


def test_import_of_a_truncated_history_file_is_refused(nodes: Nodes, tmp_path: Path) -> None:
    """``bor-node import`` of a history file cut mid-entry, its index whole, exits non-zero
    with one line naming the last whole block, and imports nothing."""
    node, _ = _loaded_devnet(nodes, 8)
    history = tmp_path / "history.log"
    data = node.data_dir / "node1"
    exported = subprocess.run(
        [
            str(BIN / "bor-node"),
            "export",
            "--data-dir",
            str(data),
            "--genesis-json",
            str(node.data_dir / "genesis.json"),
            "--to",
            str(history),
        ],
        capture_output=True,
        timeout=40 * SLOWDOWN,
        check=True,
    )
    count = int(exported.stdout.decode().split("..")[1].split()[0])
    assert count >= 4, exported.stdout
    index = history.with_name(history.name + ".index").read_bytes()
    third_last = int.from_bytes(index[-3 * 8 : -2 * 8], "big")
    with history.open("r+b") as f:
        f.truncate(third_last + 10)  # inside block count - 2
    fresh = tmp_path / "fresh"
    done = subprocess.run(
        [str(BIN / "bor-node"), "import", str(history), "--data-dir", str(fresh)],
        capture_output=True,
        timeout=40 * SLOWDOWN,
        check=False,
    )
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode != 0 and "imported" not in done.stdout.decode(), done.stdout
    assert len(lines) == 1, lines
    assert f"block {count - 3} is its last whole block" in lines[0], lines
