"""kill -9 of a producer under load, over and over, on namespaced hosts: each time it comes
back on its last committed block and rejoins; afterwards its own store, exported and imported
with full validation into a fresh data dir, gives the live chain's block ids and state roots.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.integration.conftest import BIN, NodeProcess, free_port, wait_for
from tests.netns.conftest import Cluster, LibWatch, TxLoad, quick
from tests.support.wait import hold

KILLS = int(os.environ.get("BOR_NETNS_KILLS", "25"))
CONVERGE_SECONDS = 90


def _head(cluster: Cluster, index: int) -> int:
    return int(quick(cluster.nodes[index - 1], "/v1/chain/get_info")["head_block_num"])


def test_a_producer_killed_25_times_under_load_keeps_a_valid_chain(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Producer b is killed with SIGKILL 25 times under load, each time after a random part
    of a second to a few seconds of work and restarted at once; it comes back every time and
    catches up; no irreversible block is ever reverted; then its store exported and imported
    with full validation matches the live chain block by block (id and state root)."""
    wait_for(lambda: cluster.converged(lib_above=4), 60, "a meshed network with a LIB")
    victim = cluster.nodes[1]
    with LibWatch(cluster) as watch, TxLoad(cluster, 1, 2, 3) as load:
        for kill in range(KILLS):
            hold(0.3 + (kill % 7) * 0.5, "killed at many points of its work")
            assert victim.proc is not None and victim.running, victim.tail()
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait()
            victim.start()
            wait_for(lambda: _up(cluster), 30, f"node 2 back after kill {kill + 1}")
        sent = load.sent
    assert sent > 0, "the load ran"
    lib = max(int(i["last_irreversible_block_num"]) for i in cluster.infos())
    wait_for(lambda: cluster.converged(lib_above=lib), CONVERGE_SECONDS, "one chain again")
    assert watch.check_final() == []
    assert "Traceback" not in victim.log.read_text(), victim.tail()

    assert victim.stop() == 0  # a clean stop: export reads its store
    exported = tmp_path / "killed.log"
    _bor_node("export", "--data-dir", str(victim.data_dir), "--to", str(exported))
    imported = tmp_path / "imported"
    out = _bor_node("import", str(exported), "--data-dir", str(imported))
    count = int(out.split("head ")[1].split()[0])
    assert count >= lib, out
    live = cluster.nodes[0]
    port = free_port()
    args = ["run", "--data-dir", str(imported), "--rdma", "off", "--admin-http-server-address", ""]
    args += ["--http-server-address", f"127.0.0.1:{port}"]
    args += ["--p2p-listen-endpoint", f"127.0.0.1:{free_port()}"]
    checked = NodeProcess(imported, args, port, tmp_path / "imported.log").start()
    try:
        for num in range(1, count + 1):
            want = quick(live, "/v1/chain/get_block", {"block_num_or_id": num})
            got = checked.rpc("/v1/chain/get_block", {"block_num_or_id": num})
            assert (got["id"], got["state_root"]) == (want["id"], want["state_root"]), num
    finally:
        checked.stop()


def _up(cluster: Cluster) -> bool:
    """Node 2 answers and its head has reached the LIB the others agree on."""
    try:
        head = _head(cluster, 2)
    except OSError:
        return False
    return head >= int(cluster.infos([cluster.nodes[0]])[0]["last_irreversible_block_num"])


def _bor_node(*args: str) -> str:
    done = subprocess.run(
        [str(BIN / "bor-node"), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
