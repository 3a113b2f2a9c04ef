"""The producer loop's decision to produce, on a real chain owned by its chain thread."""

from __future__ import annotations

import asyncio
from pathlib import Path

from chain.core.primitives.types import PublicKey
from genesis.testing import DevNet
from node.metrics import NodeMetrics
from node.producer import IN_STEP_SLOTS, ProducerLoop
from node.runner import ChainRunner


def test_catch_up_holds_production_only_while_our_head_is_behind_the_clock(
    tmp_path: Path,
) -> None:
    """While sync holds production, a head from one of the last IN_STEP_SLOTS slots still
    produces (we follow the network, whatever a peer claims); an older head waits; once sync
    lets go, the old head produces."""
    devnet = DevNet.create()
    chain = devnet.open(tmp_path / "chain")
    name, _ = chain.head.scheduled(chain.head.slot + 1, chain.params)  # the only producer
    runner = ChainRunner(chain)
    held = [True]
    producer = ProducerLoop(
        runner,
        (name,),
        {PublicKey(k.public_key): k for k in devnet.keys.values()},
        NodeMetrics(),
        may_produce=lambda: not held[0],
    )

    async def main() -> None:
        first = runner.view.head.slot
        assert await producer.maybe_produce(first + 1) is not None, "in step: produces"
        head = runner.view.head.slot
        assert await producer.maybe_produce(head + IN_STEP_SLOTS) is not None
        head = runner.view.head.slot
        assert await producer.maybe_produce(head + IN_STEP_SLOTS + 1) is None, "behind: waits"
        held[0] = False
        block = await producer.maybe_produce(head + IN_STEP_SLOTS + 1)
        assert block is not None and block.num == 3

    try:
        asyncio.run(main())
    finally:
        runner.close()
