"""kill -9 while producing under load: the store holds whole blocks only, and the node resumes."""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
from pathlib import Path
from typing import Any

from chain.actions import Transfer
from chain.controller import Chain
from chain.crypto import PrivateKey
from chain.state import decode_account
from chain.store import BlockStore
from chain.testing import now_ms, state_dump
from chain.transaction import SignedTransaction, Transaction, tapos_of
from chain.types import AccountName, BlockId
from genesis.model import load_genesis
from tests.integration.conftest import Nodes


def _load(node: Any, keys: dict[str, PrivateKey], stop: threading.Event, sent: list[int]) -> None:
    info = node.rpc("/v1/chain/get_info")
    chain_id = bytes.fromhex(info["chain_id"])
    users = ["alice", "bob", "carol"]
    n = 0
    while not stop.is_set():
        try:
            head = node.rpc("/v1/chain/get_info")
        except (urllib.error.URLError, OSError):
            return  # the node was killed
        ref = tapos_of(BlockId(bytes.fromhex(head["head_block_id"])))
        for _ in range(50):
            n += 1
            sender, recipient = users[n % 3], users[(n + 1) % 3]
            action = Transfer(AccountName(sender), AccountName(recipient), 1 + n % 97, str(n))
            tx = Transaction(int(time.time()) + 120, ref[0], ref[1], (action,))
            stx = SignedTransaction.sign(tx, chain_id, [keys[sender]])
            body = {"packed_trx": stx.packed.hex(), "signatures": [stx.signatures[0].hex()]}
            try:
                node.rpc("/v1/chain/push_transaction", body | {"mode": "async"})
            except (urllib.error.URLError, OSError):
                return  # the node was killed
            sent.append(n)


def test_kill_9_under_load_leaves_whole_blocks(nodes: Nodes, tmp_path: Path) -> None:
    """A node killed with SIGKILL under load leaves only whole blocks: a replay from genesis gives
    its stored state, and it restarts from its head."""
    node = nodes.devnet().start(wait_head=1)
    keys = {
        name: PrivateKey.from_text(text)
        for name, text in json.loads((node.data_dir / "keys.json").read_text()).items()
    }
    stop, sent = threading.Event(), []  # type: ignore[var-annotated]
    loader = threading.Thread(target=_load, args=(node, keys, stop, sent), daemon=True)
    loader.start()
    node.wait_for_head(node.rpc("/v1/chain/get_info")["head_block_num"] + 6)
    assert node.stop(signal.SIGKILL) == -signal.SIGKILL
    stop.set()
    loader.join(timeout=10)
    assert len(sent) > 100, "the node was under load when it died"

    genesis = load_genesis(node.data_dir / "genesis.json")
    crashed = Chain(BlockStore(str(node.data_dir / "node1" / "blocks")), genesis.to_initial_state())
    head = crashed.head
    assert crashed.store.head_id() == head.id == crashed.store.block_id_at(head.num)
    assert crashed.store.block_id_at(head.num + 1) is None, "no block beyond the head"
    txs = 0
    replay = Chain(BlockStore(str(tmp_path / "replay")), genesis.to_initial_state())
    for num in range(1, head.num + 1):
        block = crashed.block_by_num(num)
        txs += len(block.transactions)
        for stx in block.transactions:
            assert crashed.store.tx_block_num(stx.id) == num
        replay.push_block(block, now_ms())
    assert txs > 0, "blocks under load carried transactions"
    # Replaying the stored blocks from genesis gives exactly the stored state: no block is
    # half-applied and no state change lacks its block.
    assert replay.head.id == head.id
    assert state_dump(replay) == state_dump(crashed)
    balances = [
        decode_account(v).balance + decode_account(v).staked
        for k, v in crashed.store.iterate(b"sa", b"sb")
    ]
    assert sum(balances) == genesis.token_supply
    crashed.store.close()
    replay.store.close()

    node.start(wait_head=1)  # and the node resumes from its last committed block
    info = node.wait_for_head(head.num + 2)
    first_new = node.rpc("/v1/chain/get_block", {"block_num_or_id": head.num + 1})
    assert first_new["previous"] == head.id.hex()
    assert info["chain_id"] == genesis.chain_id.hex()
