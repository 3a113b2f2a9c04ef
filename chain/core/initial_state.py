"""``InitialState``: the chain at block 0, as the genesis package hands it to the chain.

The genesis file is parsed and validated by ``genesis``; the chain only ever sees this value,
so it need not know that genesis files exist.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from chain.core.consensus.block import Schedule
from chain.core.consensus.dpos import HeaderState
from chain.core.consensus.finality import FINALITY_VOTES, BlockRef, FinalityCore
from chain.core.execution.state import Account, Changes, Producer, StateView
from chain.core.execution.state_hash import StateHash
from chain.core.primitives import schema
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import BlockId, BlockNum


class _NothingYet:
    """The state before genesis: every key is absent."""

    def get(self, key: bytes) -> bytes | None:
        return None

    def iterate(
        self, start: bytes, stop: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        return iter(())


@dataclass(frozen=True, slots=True)
class InitialState:
    """The state at block 0, built from a genesis file."""

    chain_id: bytes
    params: ChainParams
    genesis_slot: int
    accounts: tuple[Account, ...]
    producers: tuple[Producer, ...]
    schedule: Schedule

    @property
    def genesis_id(self) -> BlockId:
        return BlockId(bytes(4) + self.chain_id[4:])

    def header_state(self) -> HeaderState:
        """The header state of block 0: the genesis schedule active, nothing irreversible yet
        (on a finality = votes chain, block 0 is where finality starts)."""
        core = None
        if self.params.finality == FINALITY_VOTES:
            core = FinalityCore.genesis(BlockRef(self.genesis_id, self.genesis_slot, 0))
        return HeaderState(
            id=self.genesis_id,
            num=BlockNum(0),
            slot=self.genesis_slot,
            producer="",
            state_root=StateHash.of(
                (k, v) for k, v in self.state_changes() if v is not None and schema.committed(k)
            ).root(),
            active=self.schedule,
            pending=None,
            pending_num=0,
            last_produced=(),
            lib=BlockNum(0),
            core=core,
        )

    def state_changes(self) -> Changes:
        """Every state key genesis writes, encoded, in key order."""
        view = StateView(_NothingYet())
        for account in self.accounts:
            view.put_account(account)
        for producer in self.producers:
            view.put_producer(producer)
        view.set_block_summary(0, self.genesis_id)
        return view.changes()
