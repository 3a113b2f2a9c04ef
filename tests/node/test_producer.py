"""The producer loop's decision to produce, on a real chain owned by its chain thread."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import cast

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


def test_a_slot_is_signed_once_even_when_the_head_falls_back_below_it(tmp_path: Path) -> None:
    """After our block for a slot, a head back below that slot (a longer fork from before it
    arrived, or a timer that woke early) does not make a second block for the same slot, which
    peers take as a double sign; the next slot produces."""
    devnet = DevNet.create()
    chain = devnet.open(tmp_path / "chain")
    name, _ = chain.head.scheduled(chain.head.slot + 1, chain.params)  # the only producer
    runner = ChainRunner(chain)
    producer = ProducerLoop(
        runner, (name,), {PublicKey(k.public_key): k for k in devnet.keys.values()}, NodeMetrics()
    )
    before = runner.view.head
    asked: list[object] = []

    class FellBack:
        """The runner as it looks after a fork switch back to ``before``: what it is asked to
        do is counted, not done."""

        view = SimpleNamespace(head=before, params=runner.view.params, lib_num=0)

        async def call_urgent(self, work: object) -> None:
            asked.append(work)

    async def main() -> None:
        slot = before.slot + 1
        assert await producer.maybe_produce(slot) is not None
        producer.runner = cast(ChainRunner, FellBack())
        assert await producer.maybe_produce(slot) is None
        assert asked == []
        producer.runner = runner
        block = await producer.maybe_produce(runner.view.head.slot + 1)
        assert block is not None and block.num == 2

    try:
        asyncio.run(main())
    finally:
        runner.close()
