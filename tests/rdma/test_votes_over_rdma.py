"""Finality by votes between node processes whose session runs over RDMA (Soft-RoCE in the
VM; skipped where there is none)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from node.commands.devnet import prepare
from p2p.rdma.device import detect
from tests.integration.conftest import Nodes, loopback_plan, wait_for


@pytest.fixture(autouse=True)
def need_rdma() -> None:
    info = detect()
    if not info.available:
        if os.environ.get("BOR_RDMA_REQUIRED"):
            pytest.fail(f"RDMA required but unavailable: {info.reason}")
        pytest.skip(f"no RDMA here: {info.reason}")


def test_two_finalizers_finalize_by_votes_sent_over_rdma(nodes: Nodes, tmp_path: Path) -> None:
    """Two producers, both finalizers (a QC needs both votes): the LIB keeps within a few
    blocks of the head, so each one's votes reach the other, over the RDMA session (after
    the set-up, TCP carries almost nothing while the LIB moves on)."""
    plan = loopback_plan(2)
    prepare(tmp_path, plan, {"finality": "votes"})
    ini = tmp_path / "node2" / "config.ini"
    lines = [x for x in ini.read_text().splitlines() if not x.startswith("p2p-peer-address")]
    lines += [f"p2p-peer-address = 127.0.0.1:{plan[0].p2p[1]}", "signature-workers = 0"]
    ini.write_text("\n".join(lines) + "\n")
    ini = tmp_path / "node1" / "config.ini"
    lines = [x for x in ini.read_text().splitlines() if not x.startswith("p2p-peer-address")]
    ini.write_text("\n".join([*lines, "signature-workers = 0"]) + "\n")
    procs = [
        nodes.run(tmp_path / n.name, rpc_port=n.rpc[1], admin_port=n.admin and n.admin[1])
        for n in plan
    ]
    for p in procs:
        p.start()

    def peer(i: int) -> dict[str, Any]:
        peers = procs[i].rpc("/v1/net/peers")["peers"]
        assert len(peers) == 1, peers
        return dict(peers[0])

    wait_for(lambda: procs[1].info()["last_irreversible_block_num"] > 4, 120, "a first LIB")
    assert peer(1)["transport"] == "rdma" and peer(0)["transport"] == "rdma"
    tcp_before = peer(1)["tcp_bytes_received"]
    lib_before = procs[1].info()["last_irreversible_block_num"]
    wait_for(
        lambda: procs[1].info()["last_irreversible_block_num"] >= lib_before + 8,
        20,
        "8 more final blocks",
    )
    wait_for(
        lambda: (
            (info := procs[1].info())["head_block_num"] - info["last_irreversible_block_num"] <= 4
        ),
        10,
        "the LIB within 4 blocks of the head",
    )
    assert peer(1)["tcp_bytes_received"] - tcp_before < 2000, "votes and blocks over RDMA"
    rows = procs[1].rpc("/v1/chain/get_finalizer_info")["policy"]["finalizers"]
    assert all(r["last_vote"] is not None for r in rows), rows
