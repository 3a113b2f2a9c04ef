"""The chain as the network sees it: ``ChainService`` over the chain thread."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence

from chain.block import SignedBlock
from chain.controller import Chain
from chain.errors import (
    DoubleSign,
    InvalidBlock,
    StaleBlock,
    TransactionError,
    UnlinkableBlock,
)
from chain.transaction import SignedTransaction
from chain.types import BlockId
from node.runner import ChainRunner
from p2p.handshake import ChainPosition
from p2p.service import BlockResult, Outcome

# Blocks whose signatures are recovered ahead of the one being applied.
PREFETCH_BLOCKS = 2


class NodeChainService:
    def __init__(
        self,
        runner: ChainRunner,
        on_applied: Callable[[list[SignedBlock]], None],
        light_upto: Callable[[], int] = lambda: 0,
    ) -> None:
        self.runner = runner
        self.light_upto = light_upto  # blocks up to this number are applied in light mode
        self.chain: Chain = runner.chain
        self.chain_id = self.chain.chain_id
        self.on_applied = on_applied
        self._lib_cache: tuple[int, BlockId] | None = None

    def position(self) -> ChainPosition:
        head, lib = self.chain.head, self.chain.lib
        if self._lib_cache is None or self._lib_cache[0] != lib:
            # A LevelDB read from the event loop, once per LIB change: plyvel reads are
            # thread-safe, and the LIB's id never changes once it is the LIB.
            lib_id = self.chain.store.block_id_at(lib)
            assert lib_id is not None, "the LIB is on the applied chain"
            self._lib_cache = (lib, lib_id)
        return ChainPosition(lib, self._lib_cache[1], head.num, head.id)

    def producer_keys(self) -> Collection[bytes]:
        return {p.key for p in self.chain.head.active.producers}

    async def id_at(self, num: int) -> BlockId | None:
        return await self.runner.call(self.chain.store.block_id_at, num)

    def _encoded(self, start: int, end: int) -> list[bytes]:
        store = self.chain.store
        out = []
        for num in range(start, end + 1):
            block_id = store.block_id_at(num)
            raw = None if block_id is None else store.block_bytes(block_id)
            if raw is None:
                break
            out.append(raw)
        return out

    async def encoded_blocks(self, start: int, end: int) -> list[bytes]:
        return await self.runner.call(self._encoded, start, end)

    def _push(self, blocks: Sequence[SignedBlock]) -> tuple[list[BlockResult], list[SignedBlock]]:
        chain = self.chain
        light_upto = self.light_upto()
        chain.set_light_validation(light_upto)
        now = int(time.time() * 1000)
        results: list[BlockResult] = []
        applied: list[SignedBlock] = []

        def prefetch(block: SignedBlock) -> None:
            if block.num > light_upto:
                chain.prefetch_keys(block.transactions)

        for block in blocks[:PREFETCH_BLOCKS]:
            prefetch(block)
        for i, block in enumerate(blocks):
            if i + PREFETCH_BLOCKS < len(blocks):
                prefetch(blocks[i + PREFETCH_BLOCKS])
            try:
                pushed = chain.push_block(block, now)
            except UnlinkableBlock as err:
                results.append(BlockResult(block, Outcome.UNLINKABLE, err.reason))
                continue
            except StaleBlock as err:
                results.append(BlockResult(block, Outcome.STALE, err.reason))
                continue
            except (InvalidBlock, DoubleSign) as err:
                results.append(BlockResult(block, Outcome.INVALID, f"{err.name}: {err.reason}"))
                continue
            applied.extend(pushed.applied)
            if pushed.applied:
                outcome = Outcome.APPLIED
            else:
                outcome = Outcome.ADDED if pushed.added else Outcome.DUPLICATE
            results.append(BlockResult(block, outcome))
        return results, applied

    async def push_blocks(self, blocks: Sequence[SignedBlock]) -> list[BlockResult]:
        results, applied = await self.runner.call_urgent(self._push, blocks)
        if applied:
            self.on_applied(applied)
        return results

    async def admit_transactions(
        self, txs: Sequence[SignedTransaction]
    ) -> list[TransactionError | None]:
        return await self.runner.call(self.chain.admit_transactions, txs, int(time.time() * 1000))
