"""Several real node processes on loopback: a devnet, a joining node, bootstrap, partition."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.error
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName, BlockId
from node.commands.devnet import prepare
from scripts.make_history import make_history
from tests.integration.conftest import BIN, Nodes, loopback_plan, rpc, wait_for


def _transfer_body(info: dict[str, Any], key: PrivateKey, memo: str) -> tuple[str, dict[str, Any]]:
    ref = tapos_of(BlockId(bytes.fromhex(info["last_irreversible_block_id"])))
    action = Transfer(AccountName("alice"), AccountName("bob"), 7, memo)
    tx = Transaction(int(time.time()) + 120, ref[0], ref[1], (action,))
    stx = SignedTransaction.sign(tx, bytes.fromhex(info["chain_id"]), [key])
    body = {"packed_trx": stx.packed.hex(), "signatures": [stx.signatures[0].hex()]}
    return stx.id.hex(), body


def _joiner(
    nodes: Nodes, tmp: Path, genesis: Path, peer_p2p: int, name: str = "joiner", *extra: str
) -> Any:
    data = tmp / name
    data.mkdir()
    shutil.copy(genesis, data / "genesis.json")
    return nodes.run(data, "--p2p-peer-address", f"127.0.0.1:{peer_p2p}", *extra)


def test_three_producers_advance_lib_and_a_joiner_relays_a_transfer(
    nodes: Nodes, tmp_path: Path
) -> None:
    """The devnet command runs 3 producer processes whose LIB advances; a non-producer that
    joins follows them, and a transfer pushed to it is included by a producer."""
    devnet = nodes.devnet("net", producers=3).start(wait_head=1)
    manifest = json.loads((devnet.data_dir / "devnet.json").read_text())
    urls = [n["rpc"] for n in manifest["nodes"]]
    wait_for(lambda: rpc(urls[2], "/v1/chain/get_info")["peer_count"] == 2, 30, "full mesh")
    # A full round is 36 blocks (18 s); LIB needs all three producers to have built on it.
    wait_for(
        lambda: rpc(urls[0], "/v1/chain/get_info")["last_irreversible_block_num"] > 12,
        60,
        "a first irreversible block",
    )
    lib1 = rpc(urls[0], "/v1/chain/get_info")["last_irreversible_block_num"]
    first_p2p = int(manifest["nodes"][0]["p2p"].split(":")[1])
    joiner = _joiner(nodes, tmp_path, devnet.data_dir / "genesis.json", first_p2p).start()
    wait_for(
        lambda: (
            joiner.info()["head_block_num"]
            >= rpc(urls[0], "/v1/chain/get_info")["head_block_num"] - 2
        ),
        60,
        "the joiner to catch up",
    )
    keys = json.loads((devnet.data_dir / "keys.json").read_text())
    tx_id, body = _transfer_body(joiner.info(), PrivateKey.from_text(keys["alice"]), "via joiner")
    pushed = joiner.rpc("/v1/chain/push_transaction", body | {"mode": "commit"})
    assert pushed["status"] == "included", pushed
    # node2 may apply the block a moment after the joiner did (it answers "pending" then).
    wait_for(
        lambda: (
            rpc(urls[1], "/v1/chain/get_transaction", {"id": tx_id}).get("block_num")
            == pushed["block_num"]
        ),
        10,
        "node2 to hold the transaction in the same block",
    )
    wait_for(
        lambda: rpc(urls[0], "/v1/chain/get_info")["last_irreversible_block_num"] > lib1,
        60,
        "LIB to keep advancing",
    )
    heads = {u: rpc(u, "/v1/chain/get_info") for u in urls}
    ids = {rpc(u, "/v1/chain/get_block", {"block_num_or_id": lib1})["id"] for u in urls}
    assert len(ids) == 1, "every producer has the same irreversible block"
    assert all(h["sync_stage"] == "in_sync" for h in heads.values())
    assert devnet.stop() == 0


def _history_node(nodes: Nodes, tmp: Path, blocks: int) -> tuple[Any, dict[str, Any]]:
    summary = make_history(tmp / "history", txs=blocks * 5, per_block=5, accounts=50)
    server = nodes.run(tmp / "history").start()
    return server, summary


def test_bootstrap_from_a_peer_resumes_after_kill(nodes: Nodes, tmp_path: Path) -> None:
    """A fresh node with only the genesis and one peer syncs every block to the same head id
    and state root; killed mid-sync and restarted, it resumes and ends the same (that one in
    light validation)."""
    server, summary = _history_node(nodes, tmp_path, 2500)
    target = server.info()
    assert target["head_block_num"] == summary["head"] > summary["lib"] > 2000
    genesis = tmp_path / "history" / "genesis.json"
    server_p2p = nodes.p2p_ports[tmp_path / "history"]

    fresh = _joiner(nodes, tmp_path, genesis, server_p2p, "fresh").start()
    fresh.wait_for_head(target["head_block_num"], timeout=120)
    assert fresh.info()["head_block_id"] == target["head_block_id"]
    head_block = fresh.rpc("/v1/chain/get_block", {"block_num_or_id": target["head_block_num"]})
    assert (
        head_block["state_root"]
        == server.rpc("/v1/chain/get_block", {"block_num_or_id": target["head_block_num"]})[
            "state_root"
        ]
    )
    status = fresh.rpc("/v1/node/sync")
    assert status["stage"] == "in_sync"

    killed = _joiner(
        nodes, tmp_path, genesis, server_p2p, "killed", "--validation-mode", "light"
    ).start()
    killed.wait_for_head(600, timeout=60)
    assert killed.stop(signal.SIGKILL) == -signal.SIGKILL
    killed.start()
    resumed_at = killed.info()["head_block_num"]
    assert resumed_at >= 600, "it resumes from its last committed block"
    killed.wait_for_head(target["head_block_num"], timeout=120)
    assert killed.info()["head_block_id"] == target["head_block_id"]


def test_export_then_import_gives_the_same_head_and_state(nodes: Nodes, tmp_path: Path) -> None:
    """A history exported and imported into a fresh data dir (the genesis travels beside the
    export) in full and light mode gives the source's LIB block, id and state root alike; without
    the genesis the import is a one-line error."""
    summary = make_history(tmp_path / "h", txs=3000, per_block=20, accounts=50)
    exported = tmp_path / "out.log"
    done = subprocess.run(
        [str(BIN / "bor-node"), "export", "--data-dir", str(tmp_path / "h"), "--to", str(exported)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    source = nodes.run(tmp_path / "h").start()
    lib = summary["lib"]
    expected = source.rpc("/v1/chain/get_block", {"block_num_or_id": lib})
    for mode in ("full", "light"):
        target = tmp_path / f"import-{mode}"  # does not exist: the README's fresh data dir
        done = subprocess.run(
            [
                str(BIN / "bor-node"),
                "import",
                str(exported),
                "--data-dir",
                str(target),
                "--validation-mode",
                mode,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert f"head {lib}" in done.stdout
        imported = nodes.run(target).start()
        block = imported.rpc("/v1/chain/get_block", {"block_num_or_id": lib})
        assert (block["id"], block["state_root"]) == (expected["id"], expected["state_root"])
        imported.stop()

    alone = tmp_path / "alone" / "out.log"  # the history without the genesis beside it
    alone.parent.mkdir()
    shutil.copy(exported, alone)
    done = subprocess.run(
        [str(BIN / "bor-node"), "import", str(alone), "--data-dir", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "no genesis.json" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, "one line, no traceback"


def test_partition_heals_to_one_chain_without_touching_the_old_lib(
    nodes: Nodes, tmp_path: Path
) -> None:
    """Producers a, b on one side, c alone; both sides produce; on healing every node ends
    on one chain and the blocks up to the LIB from before the split are unchanged."""
    plan = loopback_plan(3)
    prepare(tmp_path, plan, {"finality": "dpos"})  # both sides produce on: the dpos rule
    procs = [
        nodes.run(tmp_path / n.name, rpc_port=n.rpc[1], admin_port=n.admin and n.admin[1])
        for n in plan
    ]
    for p in procs:
        p.start()
    wait_for(lambda: procs[0].info()["last_irreversible_block_num"] > 5, 60, "a first LIB")
    before = procs[0].info()
    old_lib = before["last_irreversible_block_num"]
    old_ids = {
        n: procs[0].rpc("/v1/chain/get_block", {"block_num_or_id": n})["id"]
        for n in range(1, old_lib + 1)
    }
    # Split: node3 drops its peers (it dialled both), and they do not dial it back.
    for peer in procs[2].rpc("/v1/net/peers")["peers"]:
        procs[2].admin("/v1/net/disconnect", {"peer": peer["peer"]})
    wait_for(lambda: procs[2].info()["peer_count"] == 0, 10, "node3 without peers")
    ini = (tmp_path / "node3" / "config.ini").read_text().splitlines()
    (tmp_path / "node3" / "config.ini").write_text(
        "\n".join(line for line in ini if not line.startswith("p2p-peer-address")) + "\n"
    )
    procs[2].stop()
    procs[2].start()
    assert procs[2].info()["peer_count"] == 0
    split_head = procs[0].info()["head_block_num"]
    wait_for(
        lambda: (
            procs[2].info()["head_block_num"] > split_head + 3
            and procs[0].info()["head_block_num"] > split_head + 3
        ),
        60,
        "both sides to produce",
    )
    sides = {procs[0].info()["head_block_id"], procs[2].info()["head_block_id"]}
    assert len(sides) == 2, "the two sides diverged"
    # Each side's head, read once (its JSON is cached): the losing side's is popped.
    heads = {}
    for i in (0, 2):
        num = procs[i].info()["head_block_num"]
        heads[i] = (num, procs[i].rpc("/v1/chain/get_block", {"block_num_or_id": num})["id"])
    # Heal.
    procs[2].admin("/v1/net/connect", {"address": f"127.0.0.1:{plan[0].p2p[1]}"})

    def converged() -> bool:
        infos = [p.info() for p in procs]
        lib = min(i["last_irreversible_block_num"] for i in infos)
        ids = {p.rpc("/v1/chain/get_block", {"block_num_or_id": lib})["id"] for p in procs}
        return lib > old_lib and len(ids) == 1

    wait_for(converged, 90, "one chain on every node")
    for p in procs:
        for n in (1, old_lib // 2, old_lib):
            assert p.rpc("/v1/chain/get_block", {"block_num_or_id": n})["id"] == old_ids[n]
    # A block popped by the fork switch leaves get_block's cache: once the LIB passes its
    # number it is gone (not served from the cache, and never as irreversible).
    popped = 0
    for i, (num, block_id) in heads.items():
        node = procs[i]
        past = partial(lambda p, n: p.info()["last_irreversible_block_num"] >= n, node, num)
        wait_for(past, 60, "the LIB past the popped block")
        if node.rpc("/v1/chain/get_block", {"block_num_or_id": num})["id"] == block_id:
            continue  # this side won
        popped += 1
        with pytest.raises(urllib.error.HTTPError) as missing:
            node.rpc("/v1/chain/get_block", {"block_num_or_id": block_id})
        assert missing.value.code == 404
    assert popped >= 1, "one side's head was popped"
