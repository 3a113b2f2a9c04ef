"""``ChainView``: what the chain thread publishes after each change, for everyone else.

The chain (``Chain``) belongs to one thread. Readers on other threads — the RPC, the
producer loop, metrics, the peer layer — never touch it: they read the latest immutable
view, which the owner replaces (one reference assignment, atomic in CPython) after every
call that changed something. Anything a view does not hold is a request to the owner.
"""

from __future__ import annotations

from dataclasses import dataclass

from chain.core.consensus.dpos import HeaderState
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import BlockId, BlockNum


@dataclass(frozen=True, slots=True)
class ChainView:
    chain_id: bytes
    params: ChainParams
    head: HeaderState  # number, id, slot, producer, active and pending schedules
    lib_num: BlockNum
    lib_id: BlockId
    lib_slot: int
    mempool_size: int
    fork_db_size: int
    first_block: int = 1  # the lowest block held (a snapshot's, if one started us)
    mempool_bytes: int = 0  # what the pending transactions count against the byte bound

    @property
    def producer_keys(self) -> frozenset[bytes]:
        """Signing keys of the active schedule."""
        return frozenset(p.key for p in self.head.active.producers)
