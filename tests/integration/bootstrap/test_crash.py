"""kill -9 while producing under load: the store holds whole blocks only, and the node resumes."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

from chain.controller import Chain
from chain.core.execution.state import decode_account
from chain.core.primitives.crypto import PrivateKey
from chain.storage.store import BlockStore
from chain.testing import now_ms, state_dump
from genesis.model import load_genesis
from tests.integration.conftest import Nodes, push_transfers


def test_kill_9_under_load_leaves_whole_blocks(nodes: Nodes, tmp_path: Path) -> None:
    """A node killed with SIGKILL under load leaves only whole blocks: a replay from genesis gives
    its stored state, and it restarts from its head."""
    node = nodes.devnet().start(wait_head=1)
    keys = {
        name: PrivateKey.from_text(text)
        for name, text in json.loads((node.data_dir / "keys.json").read_text()).items()
    }
    stop, sent = threading.Event(), []  # type: ignore[var-annotated]
    loader = threading.Thread(target=push_transfers, args=(node, keys, stop, sent), daemon=True)
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
