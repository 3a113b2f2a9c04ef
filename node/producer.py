"""The producer loop: at every slot that belongs to one of our producers, make the block."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from chain.core.consensus.block import SignedBlock
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.params import slot_of_ms, slot_start_ms
from chain.core.primitives.types import PublicKey
from chain.vm.errors import RuntimeFault
from node.metrics import NodeMetrics
from node.runner import ChainRunner

log = structlog.get_logger("producer")

# A head from one of the last this many slots is in step with the network, whatever peers
# claim: blocks reach us as they are produced, so there is nothing to wait for (two slots:
# one block in flight and one being applied).
IN_STEP_SLOTS = 2


class ProducerLoop:
    def __init__(
        self,
        runner: ChainRunner,
        producers: tuple[str, ...],
        keys: dict[PublicKey, PrivateKey],
        metrics: NodeMetrics,
        may_produce: Callable[[], bool] = lambda: True,  # False while sync holds production
        votes_missing: Callable[[], bool] = lambda: False,  # True: finality stalled, pause
        probe_every: float = 6.0,  # while paused, one block this often (seconds)
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """While paused, one block every ``probe_every`` seconds still goes out: should the
        votes on our last head have been lost (a peer gone, a finalizer that was behind),
        nothing else would ever give the finalizers a block to vote on, and the pause would
        last for good. The production-pause timeout is the natural period: the pause still
        slows an unfinalized branch's growth by that much."""
        self.runner = runner
        self.producers = set(producers)
        self.keys = keys
        self.metrics = metrics
        self.may_produce = may_produce
        self.votes_missing = votes_missing
        self.paused = False
        self.probe_every = probe_every
        self._clock = clock
        self._probed_at = 0.0  # when the pause began or the last probe went out
        self._warned: set[str] = set()
        # The last slot each of our producers signed a block for. A slot is signed once: the
        # head can fall back below it (a longer fork arrived) and a timer can wake a little
        # before the next slot, and a second block for the slot is a double sign, for which
        # every peer sends this node away for good.
        self._signed: dict[str, int] = {}

    async def run(self) -> None:
        log.info("producer_started", producers=sorted(self.producers))
        while True:
            slot = slot_of_ms(int(time.time() * 1000))
            await self.maybe_produce(slot)
            wait_ms = slot_start_ms(slot + 1) - time.time() * 1000
            await asyncio.sleep(max(wait_ms, 1.0) / 1000)

    async def maybe_produce(self, slot: int) -> SignedBlock | None:
        runner = self.runner
        view = runner.view
        head = view.head
        if head.slot >= slot:
            return None
        name, key_pub = head.scheduled(slot, view.params)
        if name not in self.producers or slot <= self._signed.get(name, -1):
            return None
        if slot - head.slot > IN_STEP_SLOTS and not self.may_produce():
            log.info("production_paused_while_syncing", producer=name, slot=slot)
            return None
        if self.votes_missing() != self.paused:
            self.paused = not self.paused
            self._probed_at = self._clock()
            event = "production_paused_no_votes" if self.paused else "production_resumed"
            log.warning(event, producer=name, slot=slot, head=head.num, lib=view.lib_num)
        if self.paused:
            if self._clock() - self._probed_at < self.probe_every:
                return None
            self._probed_at = self._clock()
            log.info("production_probe", producer=name, slot=slot, head=head.num)
        key = self.keys.get(PublicKey(key_pub))
        if key is None:
            if name not in self._warned:
                self._warned.add(name)
                log.warning("no_signing_key", producer=name, slot=slot)
            return None
        started = time.perf_counter()
        # The head may have moved since the view was read; produce_block checks the slot's
        # producer again on the chain thread.
        try:
            block = await runner.call_urgent(lambda chain: chain.produce_block(slot, key))
        except RuntimeFault as err:
            # This node could not run a contract: its slot is missed, not the node stopped.
            log.error("contract_runtime_fault", producer=name, slot=slot, why=str(err))
            return None
        self._signed[name] = slot
        elapsed = time.perf_counter() - started
        self.metrics.produced.inc()
        self.metrics.produce_seconds.observe(elapsed)
        log.info(
            "block_produced",
            num=block.num,
            id=block.id.hex()[:16],
            producer=name,
            txs=len(block.transactions),
            bytes=len(block.encode()),
            lib=runner.view.lib_num,
            ms=round(elapsed * 1000, 1),
        )
        return block
