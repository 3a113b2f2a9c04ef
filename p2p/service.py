"""What the network needs from the chain, as a protocol the node implements.

Keeping it a protocol keeps ``p2p`` free of ``node``: the peer manager never touches the
chain thread, the store or the mempool directly.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from chain.block import SignedBlock
from chain.errors import TransactionError
from chain.transaction import SignedTransaction
from chain.types import BlockId
from p2p.handshake import ChainPosition


class Outcome(StrEnum):
    APPLIED = "applied"  # the block is on our chain now (maybe after a fork switch)
    ADDED = "added"  # valid and kept in the fork database, but not (yet) our head
    DUPLICATE = "duplicate"
    UNLINKABLE = "unlinkable"
    INVALID = "invalid"
    STALE = "stale"  # conflicts with our irreversible chain


@dataclass(frozen=True, slots=True)
class BlockResult:
    block: SignedBlock
    outcome: Outcome
    detail: str = ""


class ChainService(Protocol):
    chain_id: bytes

    def position(self) -> ChainPosition: ...

    def producer_keys(self) -> Collection[bytes]:
        """Signing keys of the active schedule (for ``allowed-connection = producers``)."""
        ...

    async def id_at(self, num: int) -> BlockId | None: ...

    async def encoded_blocks(self, start: int, end: int) -> list[bytes]:
        """Encoded blocks ``start``..``end`` of our chain (fewer if our head is lower)."""
        ...

    async def push_blocks(self, blocks: Sequence[SignedBlock]) -> list[BlockResult]: ...

    async def admit_transactions(
        self, txs: Sequence[SignedTransaction]
    ) -> list[TransactionError | None]: ...
