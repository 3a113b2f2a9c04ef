"""bench_apply's RPC phases: its push_transactions bodies are what the RPC takes, each
transaction of a batch counts as accepted or refused, and the get_info probe counts answers."""

from __future__ import annotations

import json
from pathlib import Path

from chain.core.execution.actions import Transfer
from scripts.bench_apply import _ask_all, _push_batches, _push_body
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


def test_the_http_shell_probe_counts_answers_and_failures(tmp_path: Path) -> None:
    """The get_info probe counts the answers a real RPC gave within its time, and a route
    that refuses the empty body (get_account: no account_name, 400) only as failures."""

    async def scenario(rig: Rig) -> None:
        url = str(rig.client.make_url("/")).rstrip("/")
        ok, failed = await _ask_all(url, "/v1/chain/get_info", 2, 0.3)
        assert ok > 0 and failed == 0
        ok, failed = await _ask_all(url, "/v1/chain/get_account", 2, 0.3)
        assert ok == 0 and failed > 0

    _run(tmp_path, scenario)
