"""A block's size in bytes is bounded by the chain (``max_block_bytes``), so a funded
account cannot make a producer build a block no peer can receive (issue 28, item 1).

The attack, against real processes: a chain of two producers whose second is down, so the
first sits idle for the second's whole turn; during it, 8.7 MB of transfers with big memos
go in through the public RPC. When the first producer's turn comes back it used to put them
all in one block, fail to frame it for its follower, and exit.
"""

from __future__ import annotations

import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.params import DEFAULT_MAX_BLOCK_BYTES, slot_of_ms, slot_start_ms
from chain.core.primitives.types import AccountName, BlockId
from node.commands.devnet import plan, prepare
from tests.integration.conftest import Nodes, free_ports, wait_for

TURN = 36  # blocks per turn: the idle gap is 18 s
PUSH_SECONDS = 14  # of the gap left when pushing starts (it took 8.5 s on 2 busy cores)
TXS = 1200  # of 7.3 KB each: 8.7 MB, more than a frame (8 MiB) and twice the block limit
USERS = ("alice", "bob", "carol")


def big_transfers(keys: dict[str, str], chain_id: bytes, head_id: str) -> list[SignedTransaction]:
    """TXS transactions, each seven transfers with a memo of 256 four-byte characters."""
    memo = "\U0001f600" * 256
    ref = tapos_of(BlockId(bytes.fromhex(head_id)))
    signers = {name: PrivateKey.from_text(keys[name]) for name in USERS}
    txs = []
    for n in range(TXS):
        sender, recipient = AccountName(USERS[n % 3]), AccountName(USERS[(n + 1) % 3])
        actions = tuple(Transfer(sender, recipient, 1 + 7 * n + i, memo) for i in range(7))
        tx = Transaction(int(time.time()) + 600, ref[0], ref[1], actions)
        txs.append(SignedTransaction.sign(tx, chain_id, [signers[sender]]))
    return txs


def gap_left_s() -> float:
    """Seconds left of producerb's turn (``chain.core.consensus.dpos``'s rule), 0 outside it:
    producerb never starts, so nothing is produced then."""
    now_ms = time.time() * 1000
    slot = slot_of_ms(int(now_ms))
    turn_start = slot - slot % (2 * TURN)
    if slot - turn_start < TURN:
        return 0.0
    return (slot_start_ms(turn_start + 2 * TURN) - now_ms) / 1000


def test_a_flood_of_big_transfers_makes_several_blocks_within_the_limit(
    nodes: Nodes, tmp_path: Path
) -> None:
    """1,200 transfers of 7.3 KB pushed during the idle producer's gap are spread over blocks
    of at most DEFAULT_MAX_BLOCK_BYTES; the producer and its follower stay up, and every
    transfer reaches the follower's chain."""
    devs = plan(2, ("127.0.0.1", free_ports(2)), free_ports(2), free_ports(2))
    prepare(tmp_path / "net", devs, {"finality": "dpos", "blocks_per_turn": TURN})
    producer = nodes.run(tmp_path / "net" / "node1", rpc_port=devs[0].rpc[1]).start()
    producer.wait_for_head(1, TURN / 2 + 30)  # its first block may wait out producerb's turn
    follower_dir = tmp_path / "follower"
    follower_dir.mkdir()
    shutil.copy(tmp_path / "net" / "genesis.json", follower_dir / "genesis.json")
    follower = nodes.run(follower_dir, "--p2p-peer-address", f"127.0.0.1:{devs[0].p2p[1]}")
    follower.start().wait_for_head(1, 30)

    info = producer.info()
    keys = json.loads((tmp_path / "net" / "keys.json").read_text())
    txs = big_transfers(keys, bytes.fromhex(info["chain_id"]), info["head_block_id"])
    wait_for(lambda: gap_left_s() > PUSH_SECONDS, 2 * TURN, "producerb's turn (the gap)")
    head_before = producer.info()["head_block_num"]

    def push(stx: SignedTransaction) -> None:
        body = {"packed_trx": stx.packed.hex(), "signatures": [stx.signatures[0].hex()]}
        producer.rpc("/v1/chain/push_transaction", body | {"mode": "async"})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(push, txs))
    assert gap_left_s() > 0, "pushing took longer than the gap: nothing was tested"
    assert producer.info()["head_block_num"] == head_before  # all of it waits for one block

    included: set[str] = set()
    seen = [head_before]

    def all_in() -> bool:
        assert producer.running, producer.tail()
        assert follower.running, follower.tail()
        while seen[0] < follower.info()["head_block_num"]:
            block = follower.rpc("/v1/chain/get_block", {"block_num_or_id": seen[0] + 1})
            included.update(t["id"] for t in block["transactions"])
            seen[0] += 1
        return len(included) == TXS

    wait_for(all_in, 2 * TURN, "every transfer in the follower's chain")
    assert included == {stx.id.hex() for stx in txs}

    produced = [
        event
        for line in producer.log.read_text().splitlines()
        if line.startswith("{") and (event := json.loads(line)).get("event") == "block_produced"
    ]
    big = [e for e in produced if e["num"] > head_before and e["txs"]]
    assert sum(e["txs"] for e in big) == TXS
    assert len(big) >= 3, big  # 8.7 MB in blocks of at most 4 MiB
    assert all(e["bytes"] <= DEFAULT_MAX_BLOCK_BYTES for e in big), big
    assert producer.running and follower.running
