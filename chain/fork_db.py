"""The fork database: every reversible block we know, and which branch is best.

Fork choice (EOSIO's ``by_lib_block_num``): the branch whose head has the higher last
irreversible block wins, then the longer branch, then the lower id. On a chain that
finalizes by votes (Spring's rule): the higher last final block, then the newer QC claim,
then the later slot, then the lower id — the later slot rather than the longer branch,
because every finalizer can still vote on the latest block it saw (its votes only move
forward in time), so after a partition heals the branch all can vote on wins. The root is
the last irreversible block; nothing at or below it can be replaced.
"""

from __future__ import annotations

from dataclasses import dataclass

from chain.core.consensus.block import SignedBlock
from chain.core.consensus.dpos import HeaderState
from chain.core.primitives.types import AccountName, BlockId


@dataclass(slots=True)
class ForkBlock:
    state: HeaderState
    block: SignedBlock | None  # None only for the root, whose block lives in the store


def _rank(fb: ForkBlock) -> tuple[int, int, bool, int, bytes]:
    state = fb.state
    inverted = bytes(255 - b for b in state.id)  # lower id ranks higher
    if state.core is None:
        return state.lib, 0, False, state.num, inverted
    claim = state.core.claim
    return state.lib, claim.num, claim.strong, state.slot, inverted


class ForkDatabase:
    def __init__(self, root: HeaderState) -> None:
        self._root = ForkBlock(root, None)
        self._blocks: dict[BlockId, ForkBlock] = {root.id: self._root}
        self._by_slot: dict[tuple[AccountName, int], BlockId] = {}

    @property
    def root(self) -> HeaderState:
        return self._root.state

    def __contains__(self, block_id: object) -> bool:
        return block_id in self._blocks

    def __len__(self) -> int:
        return len(self._blocks)

    def get(self, block_id: BlockId) -> ForkBlock | None:
        return self._blocks.get(block_id)

    def same_slot(self, producer: AccountName, slot: int) -> BlockId | None:
        """A block we already hold from ``producer`` in ``slot``, if any."""
        return self._by_slot.get((producer, slot))

    def add(self, state: HeaderState, block: SignedBlock) -> None:
        assert block.header.previous in self._blocks, "callers link blocks before adding"
        self._blocks[state.id] = ForkBlock(state, block)
        self._by_slot.setdefault((block.header.producer, block.header.slot), state.id)

    def best(self) -> HeaderState:
        return max(self._blocks.values(), key=_rank).state

    def branch(self, tip: BlockId, stop: BlockId) -> list[ForkBlock]:
        """Blocks from just after ``stop`` up to ``tip``, oldest first."""
        out: list[ForkBlock] = []
        cursor = tip
        while cursor != stop:
            fb = self._blocks[cursor]
            out.append(fb)
            assert fb.block is not None, f"walked past the root from {tip.hex()}"
            cursor = fb.block.header.previous
        out.reverse()
        return out

    def common_ancestor(self, a: BlockId, b: BlockId) -> BlockId:
        sa, sb = self._blocks[a].state, self._blocks[b].state
        while sa.id != sb.id:
            if sa.num >= sb.num:
                sa = self._parent(sa)
            else:
                sb = self._parent(sb)
        return sa.id

    def _parent(self, state: HeaderState) -> HeaderState:
        fb = self._blocks[state.id]
        assert fb.block is not None, "the root has no parent in the fork database"
        return self._blocks[fb.block.header.previous].state

    def remove(self, block_id: BlockId) -> list[BlockId]:
        """Drop ``block_id`` and every descendant (an invalid block poisons its children)."""
        doomed = {block_id}
        changed = True
        while changed:
            changed = False
            for bid, fb in self._blocks.items():
                parent = None if fb.block is None else fb.block.header.previous
                if bid not in doomed and parent in doomed:
                    doomed.add(bid)
                    changed = True
        for bid in doomed:
            self._drop(bid)
        return sorted(doomed)

    def _drop(self, block_id: BlockId) -> None:
        fb = self._blocks.pop(block_id, None)
        # Keyed from the header state, which the root keeps too: an old root's entry would
        # otherwise stay behind at every LIB advance, one per block, for as long as we run.
        if fb is not None:
            key = (AccountName(fb.state.producer), fb.state.slot)
            if self._by_slot.get(key) == block_id:
                del self._by_slot[key]

    def advance_root(self, new_root: BlockId) -> None:
        """Make ``new_root`` (a block on the head branch) the root; forget what it excludes."""
        keep_state = self._blocks[new_root].state
        # Everything that descends from new_root survives; everything else goes.
        survivors: set[BlockId] = {new_root}
        for bid, fb in sorted(self._blocks.items(), key=lambda kv: kv[1].state.num):
            if fb.block is not None and fb.block.header.previous in survivors:
                survivors.add(bid)
        for bid in list(self._blocks):
            if bid not in survivors:
                self._drop(bid)
        self._root = ForkBlock(keep_state, None)
        self._blocks[new_root] = self._root
