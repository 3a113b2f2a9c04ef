"""Two real nodes: a transaction relayed by a peer is admitted where our RPC's are."""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.error
from pathlib import Path
from typing import Any

import pytest
import wasmtime

from chain.core.execution.actions import SetCode, Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName, BlockId
from tests.integration.conftest import (
    NodeProcess,
    Nodes,
    devnet_p2p_address,
    fresh_data_dir,
    wait_for,
)


def _accepted(node: NodeProcess) -> float:
    found = re.search(r"^bor_transactions_accepted_total (\S+)$", node.rpc_text("/metrics"), re.M)
    return float(found.group(1)) if found else 0.0


def _gauge(node: NodeProcess, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", node.rpc_text("/metrics"), re.M)
    return float(found.group(1)) if found else 0.0


def _transfer(
    producer: NodeProcess, amount: int, memo: str, ref_node: NodeProcess | None = None
) -> tuple[SignedTransaction, dict[str, Any]]:
    """A transfer from alice to bob signed for ``producer``'s chain at the head of
    ``ref_node`` (by default the producer's), and the body that pushes it. A node that
    receives it must hold the block it references: a follower a block behind refuses a
    transaction of the producer's newest block (tapos_mismatch)."""
    info = (ref_node or producer).info()
    keys = json.loads((producer.data_dir / "keys.json").read_text())
    ref = tapos_of(BlockId(bytes.fromhex(info["head_block_id"])))
    action = Transfer(AccountName("alice"), AccountName("bob"), amount, memo)
    tx = Transaction(int(time.time()) + 120, ref[0], ref[1], (action,))
    stx = SignedTransaction.sign(
        tx, bytes.fromhex(info["chain_id"]), [PrivateKey.from_text(keys["alice"])]
    )
    return stx, {"packed_trx": stx.packed.hex(), "signatures": [stx.signatures[0].hex()]}


def test_a_relayed_transaction_is_counted_by_the_receivers_admission(
    nodes: Nodes, tmp_path: Path
) -> None:
    """A transfer pushed to a producer's RPC reaches a joined peer by the tx relay, and the
    peer counts it in bor_transactions_accepted_total, the counter its RPC pushes go to."""
    producer = nodes.devnet("net").start(wait_head=1)
    data = fresh_data_dir(tmp_path / "peer", producer.data_dir / "genesis.json")
    peer = nodes.run(data, "--p2p-peer-address", devnet_p2p_address(producer)).start()
    wait_for(lambda: peer.info()["peer_count"] == 1, 20, "the peer to connect")
    wait_for(
        lambda: peer.info()["head_block_num"] >= producer.info()["head_block_num"] - 1,
        20,
        "the peer to follow the producer",
    )
    assert _accepted(producer) == _accepted(peer) == 0

    stx, body = _transfer(producer, 7, "relayed", ref_node=peer)
    pushed = producer.rpc("/v1/chain/push_transaction", body | {"mode": "sync"})
    assert pushed["transaction_id"] == stx.id.hex(), pushed

    # /metrics is rendered at most once a second: the counters show up on a later scrape.
    wait_for(lambda: _accepted(producer) == 1, 10, "the producer to count the pushed one")
    wait_for(lambda: _accepted(peer) == 1, 10, "the peer to count the relayed transaction")


def test_a_transaction_crosses_a_line_of_three_nodes_by_announcement(
    nodes: Nodes, tmp_path: Path
) -> None:
    """A transfer pushed to a producer reaches a node two hops away: the producer sends it
    whole to its peer, which passes on only its id; the far node asks for it, gets it, and
    admits it."""
    producer = nodes.devnet("net").start(wait_head=1)
    genesis = producer.data_dir / "genesis.json"
    middle = nodes.run(
        fresh_data_dir(tmp_path / "middle", genesis),
        "--p2p-peer-address",
        devnet_p2p_address(producer),
    ).start()
    far = nodes.run(
        fresh_data_dir(tmp_path / "far", genesis),
        "--p2p-peer-address",
        f"127.0.0.1:{nodes.p2p_ports[middle.data_dir]}",
    ).start()
    wait_for(lambda: middle.info()["peer_count"] == 2, 20, "the middle node to have both peers")
    wait_for(lambda: far.info()["peer_count"] == 1, 20, "the far node to connect")
    wait_for(
        lambda: far.info()["head_block_num"] >= producer.info()["head_block_num"] - 1,
        20,
        "the far node to follow the producer",
    )

    _, body = _transfer(producer, 9, "two hops", ref_node=far)
    producer.rpc("/v1/chain/push_transaction", body | {"mode": "async"})
    wait_for(lambda: _accepted(far) == 1, 15, "the far node to admit the announced transaction")


def _setcode(node: NodeProcess, account: str, salt: int, data_bytes: int) -> dict[str, Any]:
    """The body that pushes a ``setcode`` of a do-nothing contract padded with a data segment
    of ``data_bytes`` (no compile cost: the large transaction is all data), signed for
    ``node``'s chain at its head."""
    info = node.info()
    keys = json.loads((node.data_dir / "keys.json").read_text())
    code = bytes(
        wasmtime.wat2wasm(
            f'(module (memory (export "memory") {data_bytes // 65536 + 1})'
            ' (func (export "apply") (param i64 i64 i64) nop)'
            f' (data (i32.const 0) "{salt:08}{"p" * (data_bytes - 8)}"))'
        )
    )
    ref = tapos_of(BlockId(bytes.fromhex(info["head_block_id"])))
    tx = Transaction(int(time.time()) + 120, ref[0], ref[1], (SetCode(AccountName(account), code),))
    stx = SignedTransaction.sign(
        tx, bytes.fromhex(info["chain_id"]), [PrivateKey.from_text(keys[account])]
    )
    return {"packed_trx": stx.packed.hex(), "signatures": [stx.signatures[0].hex()]}


def _push_status(node: NodeProcess, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The HTTP status and JSON answer of a sync push."""
    try:
        return 200, node.rpc("/v1/chain/push_transaction", body | {"mode": "sync"})
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_large_transactions_stop_at_the_mempools_byte_bounds(nodes: Nodes, tmp_path: Path) -> None:
    """Large setcodes pushed to a node that does not produce (so they stay pending) are
    refused with 429 mempool_full naming max-mempool-account-bytes once one account's share
    is full, and naming max-mempool-bytes once the whole is, with the count bounds far off."""
    devnet = nodes.devnet("net").start()
    data = fresh_data_dir(tmp_path / "lone", devnet.data_dir / "genesis.json")
    shutil.copy(devnet.data_dir / "keys.json", data / "keys.json")
    mib = 1 << 20
    lone = nodes.run(
        data, "--max-mempool-bytes", str(2 * mib), "--max-mempool-account-bytes", str(mib)
    ).start()
    size = len(bytes.fromhex(_setcode(lone, "alice", 0, 200_000)["packed_trx"])) + 65
    per_account = mib // size  # 5 of about 200 KB in each account's MiB, 10 in the 2 MiB

    for salt in range(per_account):
        status, answer = _push_status(lone, _setcode(lone, "alice", salt, 200_000))
        assert status == 200, answer
    status, answer = _push_status(lone, _setcode(lone, "alice", 99, 200_000))
    assert status == 429 and answer["error"]["name"] == "mempool_full", answer
    assert "max-mempool-account-bytes" in answer["error"]["what"], answer

    for salt in range(per_account):
        status, answer = _push_status(lone, _setcode(lone, "bob", salt, 200_000))
        assert status == 200, answer
    status, answer = _push_status(lone, _setcode(lone, "carol", 0, 200_000))
    assert status == 429 and answer["error"]["name"] == "mempool_full", answer
    assert "max-mempool-bytes" in answer["error"]["what"], answer
    assert lone.info()["mempool_size"] == 2 * per_account
    # /metrics is rendered at most once a second, with six significant digits.
    wait_for(
        lambda: _gauge(lone, "bor_mempool_bytes") == pytest.approx(2 * per_account * size, 1e-5),
        10,
        "bor_mempool_bytes to show the pending bytes",
    )
