"""bench_apply's batch phase: its push_transactions bodies are what the RPC takes, and it
counts each transaction of a batch as accepted or refused."""

from __future__ import annotations

import json
from pathlib import Path

from chain.core.execution.actions import Transfer
from scripts.bench_apply import _push_batches, _push_body
from tests.node.api.test_rpc import A, B, Rig, _run


def test_batches_count_each_transaction_accepted_or_refused(tmp_path: Path) -> None:
    """Two batches pushed to a real RPC, the second repeating one transaction of the first:
    every transaction counts once, the repeated one as refused (a duplicate), so that the
    batch rate is of transactions the node took, not of requests."""

    async def scenario(rig: Rig) -> None:
        txs = [await rig.tx(Transfer(A, B, 1 + i)) for i in range(5)]
        bodies = [
            json.dumps({"transactions": [_push_body(t) for t in part], "mode": "sync"}).encode()
            for part in (txs[:3], txs[2:])
        ]
        url = str(rig.client.make_url("/")).rstrip("/")
        assert await _push_batches(url, bodies, 1, 60) == (5, 1)
        status, info = await rig.post("/v1/chain/get_info", {})
        assert status == 200 and info["mempool_size"] == 5

    _run(tmp_path, scenario)
