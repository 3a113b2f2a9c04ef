"""Snapshots between real node processes: made over the admin RPC, verified and refused by
the CLI with one line, a node started from one follows, restarts and serves the blocks it
holds, and a fresh node never asks it for older ones."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from chain.storage.snapshot import MAGIC
from scripts.make_history import make_history
from tests.integration.conftest import BIN, NodeProcess, Nodes, wait_for


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "bor-node"), *args], capture_output=True, text=True, timeout=120
    )


def _damaged(source: Path, tmp: Path) -> dict[str, Path]:
    data = source.read_bytes()
    middle = len(data) // 2
    copies = {
        "truncated": data[: len(data) - 1000],
        "format version 9": MAGIC + (9).to_bytes(4, "big") + data[len(MAGIC) + 4 :],
        "damaged|content hash mismatch|truncated": data[:middle]
        + bytes([data[middle] ^ 0x40])
        + data[middle + 1 :],
    }
    out: dict[str, Path] = {}
    for reason, content in copies.items():
        path = tmp / f"bad-{len(out)}.bin"
        path.write_bytes(content)
        out[reason] = path
    return out


def _check_damaged_copies_refused(snap: Path, tmp_path: Path) -> None:
    """``snapshot verify`` refuses each damaged copy of ``snap`` in one line naming the
    damage."""
    for reason, bad in _damaged(snap, tmp_path).items():
        refused = _cli("snapshot", "verify", str(bad))
        assert refused.returncode == 2
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("bor-node: "), refused.stderr
        assert any(r in lines[0] for r in reason.split("|")), (reason, lines[0])


def _check_commands_refused_while_running(node: NodeProcess, data: Path, log: Path) -> None:
    """The commands that would write to a running node's data dir are refused in one line,
    and ``export`` hints at the node's admin address (from node.json) as a command to copy."""
    assert node.proc is not None
    running = f"a node is running on this data dir (pid {node.proc.pid})"
    for command in (
        ["export", "--to", str(log)],
        ["snapshot", "create"],
        ["import", str(log)],
        ["run"],
    ):
        met = _cli(*command, "--data-dir", str(data))
        assert met.returncode == 2 and met.stderr.count("\n") == 1, met.stderr
        assert met.stderr.startswith(f"bor-node: {running}"), met.stderr
    # The node wrote its admin address into node.json: the hint is a command to copy.
    hint = _cli("export", "--to", str(log), "--data-dir", str(data)).stderr
    assert "use its admin API: curl -X POST http://127.0.0.1:" in hint, hint
    assert hint.rstrip().endswith("/v1/node/export_history"), hint


def test_snapshot_made_verified_refused_and_started_from(nodes: Nodes, tmp_path: Path) -> None:
    """The admin RPC writes a snapshot at the LIB that ``snapshot verify`` accepts; damaged
    copies are refused in one line naming the damage; ``run --snapshot`` follows the chain
    from there, restarts, serves its blocks and says it has no older ones; a fresh node
    syncing from it and a full node gets the whole history without asking it for any."""
    history = make_history(tmp_path / "history", txs=1500, per_block=5, accounts=200)
    head, lib = int(history["head"]), int(history["lib"])  # type: ignore[call-overload]
    server = nodes.run(tmp_path / "history").start()
    server_p2p = nodes.p2p_ports[tmp_path / "history"]
    genesis = tmp_path / "history" / "genesis.json"

    made: dict[str, Any] = server.admin("/v1/producer/create_snapshot", {})
    snap = Path(made["snapshot_name"])
    assert made["head_block_num"] == lib < head
    assert snap.exists() and snap.stat().st_size == made["bytes"]

    verified = _cli("snapshot", "verify", str(snap))
    assert verified.returncode == 0, verified.stderr
    assert made["head_block_id"] in verified.stdout

    _check_damaged_copies_refused(snap, tmp_path)

    started = tmp_path / "started"  # none yet: the genesis given once is kept in it
    peer = ("--p2p-peer-address", f"127.0.0.1:{server_p2p}")
    node = nodes.run(started, "--genesis-json", str(genesis), "--snapshot", str(snap), *peer)
    node.start()
    node.wait_for_head(head, timeout=60)
    assert node.info()["head_block_id"] == server.info()["head_block_id"]
    first = made["head_block_num"]
    with pytest.raises(Exception, match="404"):
        node.rpc("/v1/chain/get_block", {"block_num_or_id": first - 1})
    assert (
        node.rpc("/v1/chain/get_block", {"block_num_or_id": first + 1})["id"]
        == (server.rpc("/v1/chain/get_block", {"block_num_or_id": first + 1})["id"])
    )

    _check_commands_refused_while_running(node, started, tmp_path / "x.log")
    with pytest.raises(Exception, match="409"):  # its LIB is the snapshot's block
        node.admin("/v1/node/export_history", {})
    exported = server.admin("/v1/node/export_history", {})
    assert (exported["first_block_num"], exported["last_block_num"]) == (1, lib)
    assert Path(exported["file"]).exists() and Path(exported["genesis"]).exists()

    assert node.stop() == 0
    held = _cli("export", "--data-dir", str(started), "--to", str(tmp_path / "x.log"))
    assert held.returncode == 2 and f"block {first}" in held.stderr, held.stderr
    assert "missing" not in held.stderr
    node.args.remove("--genesis-json")
    node.args.remove(str(genesis))
    node.start()  # no genesis flag: the data dir kept it, and goes on from its chain
    assert node.info()["head_block_id"] == server.info()["head_block_id"]
    assert node.info()["last_irreversible_block_num"] >= first

    node_p2p = nodes.p2p_ports[started]
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(genesis, fresh / "genesis.json")
    joiner = nodes.run(
        fresh,
        "--p2p-peer-address",
        f"127.0.0.1:{node_p2p}",
        "--p2p-peer-address",
        f"127.0.0.1:{server_p2p}",
    ).start()
    joiner.wait_for_head(head, timeout=120)
    assert joiner.info()["head_block_id"] == server.info()["head_block_id"]
    wait_for(lambda: node.log.exists(), 5, "the node's log")
    assert "range_not_held" not in node.log.read_text(), "asked for blocks it does not hold"

    assert joiner.stop() == 0
    occupied = _cli(
        "import-snapshot", str(snap), "--data-dir", str(fresh), "--genesis-json", str(genesis)
    )
    assert occupied.returncode == 2 and "holds" in occupied.stderr


def test_periodic_snapshots_are_written_pruned_and_listed(nodes: Nodes) -> None:
    """With snapshot-interval-blocks = 4 a producing node writes a snapshot each time its LIB
    passes a multiple of 4, keeps the newest two, and lists them at /v1/node/snapshots."""
    devnet = nodes.devnet("periodic").start(wait_head=1)
    assert devnet.stop() == 0
    node_dir = devnet.data_dir / "node1"
    with (node_dir / "config.ini").open("a") as ini:
        ini.write("snapshot-interval-blocks = 4\nsnapshot-keep = 2\n")
    devnet.start()
    lib = devnet.info()["last_irreversible_block_num"]
    wait_for(
        lambda: devnet.info()["last_irreversible_block_num"] >= lib + 14, 60, "14 more final blocks"
    )

    def on_disk() -> list[int]:
        files = (node_dir / "snapshots").glob("snapshot-*.bin")
        return sorted(int(f.name.split("-")[1]) for f in files)

    def listed() -> list[int]:
        return sorted(s["block_num"] for s in devnet.rpc("/v1/node/snapshots")["snapshots"])

    agreed: list[int] = []

    def listing_agrees() -> bool:
        nums = on_disk()
        agreed[:] = nums
        return len(nums) == 2 and listed() == nums == on_disk()

    # The node goes on writing one every 2 s and pruning: the listing and the files are
    # compared when neither changed in between.
    wait_for(listing_agrees, 20, "two snapshots listed, the two files on disk")
    assert "snapshot_pruned" in devnet.log.read_text()
    assert devnet.stop() == 0  # (a snapshot cut short by the stop may have left no prune)
    (newest,) = (node_dir / "snapshots").glob(f"snapshot-{agreed[-1]:010d}-*.bin")
    assert _cli("snapshot", "verify", str(newest)).returncode == 0
