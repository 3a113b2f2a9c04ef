"""The listener's budget of large answers being written (``max_response_bytes_in_flight``),
served as the node serves it (``node.api.http.serve``, real sockets): a client that asks for a
big block and never reads holds its answer's bytes against the budget until it goes, and
meanwhile others asking for big answers get 503 busy while small answers still go out."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import aiohttp
import pytest

from chain.controller import Chain
from chain.core.consensus.block import SignedBlock
from chain.core.execution.actions import Transfer
from chain.core.primitives.types import AccountName
from chain.testing import now_ms
from genesis.testing import DevNet
from node.admission import Admitter
from node.api.http import make_app, serve
from node.api.rpc import Api
from node.metrics import NodeMetrics
from node.runner import ChainRunner, InclusionWatch
from tests.node.api.limits import CALL_FUEL, http_limits
from tests.node.api.test_rpc import FakeNetwork
from tests.support.wait import until

# Transactions of seven 1 KB-memo transfers in the big block: 2.27 MB of JSON, the size of
# issue 28's block.
BIG_BLOCK_TXS = 280


def add_big_block(net: DevNet, chain: Chain) -> SignedBlock:
    """An empty block, a block of BIG_BLOCK_TXS transactions (2.2 MB; 2.27 MB as JSON) and
    another empty block on ``chain``; the big one."""
    net.produce(chain)
    users = [AccountName(name) for name in ("alice", "bob", "carol")]
    memo = "\U0001f600" * 256

    def transfers(n: int) -> tuple[Transfer, ...]:
        sender, recipient = users[n % 3], users[(n + 1) % 3]
        return tuple(Transfer(sender, recipient, 1 + 7 * n + i, memo) for i in range(7))

    txs = [net.tx(chain, *transfers(n)) for n in range(BIG_BLOCK_TXS)]
    assert not any(chain.admit_transactions(txs, now_ms()))
    big = net.produce(chain)
    assert len(big.transactions) == BIG_BLOCK_TXS
    net.produce(chain)
    return big


def _get_block_request(port: int, num: int) -> bytes:
    body = json.dumps({"block_num_or_id": num}).encode()
    head = (
        f"POST /v1/chain/get_block HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@pytest.mark.parametrize("leaves", ["closes", "is_cut_off"])
def test_big_answers_past_the_budget_get_503_until_a_stalled_one_is_gone(
    tmp_path: Path, leaves: str
) -> None:
    """With a budget of 3 MiB, a client that asked for a 2.27 MB block and reads nothing
    holds it: another get_block of it is a 503 busy (get_info still 200); once the stalled
    client closes, or the write timeout cuts it off, the block is served whole."""
    net = DevNet.create(1)
    chain = net.open(tmp_path)
    big = add_big_block(net, chain)

    async def main() -> None:
        runner = ChainRunner(chain)
        metrics = NodeMetrics()
        api = Api(
            runner,
            metrics,
            InclusionWatch(),
            Admitter(runner, metrics),
            FakeNetwork(),
            call_fuel=CALL_FUEL,
        )
        limits = http_limits(max_response_bytes_in_flight=3 << 20, write_timeout_s=1.5)
        site = await serve(make_app(api, metrics, limits), "127.0.0.1", 0, limits)
        reads = asyncio.create_task(api.run())
        port = int(site.addresses[0][1])
        url = f"http://127.0.0.1:{port}"
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # takes ~nothing
        try:
            stalled.setblocking(False)
            await asyncio.get_running_loop().sock_connect(stalled, ("127.0.0.1", port))
            stalled.send(_get_block_request(port, big.num))
            async with aiohttp.ClientSession() as http:

                async def post(path: str, body: object) -> tuple[int, dict[str, object]]:
                    async with http.post(url + path, json=body) as response:
                        return response.status, await response.json()

                answers: list[tuple[int, dict[str, object]]] = []

                async def block_is(status: int) -> bool:
                    answers.append(await post("/v1/chain/get_block", {"block_num_or_id": 2}))
                    return answers[-1][0] == status

                # Its answer fills the kernel's queues, and waits: the budget is taken.
                await until(lambda: block_is(503), "the stalled answer holding the budget")
                refused = answers[-1][1]
                assert "being written" in str(refused["error"])
                assert (await post("/v1/chain/get_info", {}))[0] == 200
                if leaves == "closes":
                    stalled.close()
                await until(lambda: block_is(200), "the block served", 10)
                block = answers[-1][1]
                assert len(block["transactions"]) == BIG_BLOCK_TXS  # type: ignore[arg-type]
        finally:
            stalled.close()
            reads.cancel()
            await site.cleanup()
            runner.close()

    try:
        asyncio.run(main())
    finally:
        chain.store.close()
