"""What the network needs from the chain, as a protocol the node implements.

Keeping it a protocol keeps ``p2p`` free of ``node``: the peer layer never touches the
chain thread, the store or the mempool directly. Whatever the chain side needs to decide
(e.g. up to which block light validation applies) comes with the request; the chain side
never reads the peer layer's state.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from chain.core.consensus.block import SignedBlock
from chain.core.consensus.qc import Vote
from chain.core.consensus.votes import VoteOutcome
from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.errors import TransactionError
from chain.core.primitives.types import BlockId
from p2p.wire.handshake import ChainPosition

SERVE_CHUNK = 50  # blocks read from the store per trip to the chain thread when serving


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

    def position(self) -> ChainPosition:
        """Our head and LIB as last published by the chain (no wait)."""
        ...

    def producer_keys(self) -> Collection[bytes]:
        """Signing keys of the active schedule (for ``allowed-connection = producers``)."""
        ...

    async def id_at(self, num: int) -> BlockId | None: ...

    async def encoded_blocks(self, start: int, end: int) -> list[bytes]:
        """Encoded blocks ``start``..``end`` of our chain (fewer if our head is lower)."""
        ...

    async def push_blocks(
        self,
        blocks: Sequence[SignedBlock],
        light_upto: int,
        ahead: Sequence[SignedBlock] = (),
        taken: Callable[[int], None] | None = None,
    ) -> list[BlockResult]:
        """Validate and add ``blocks``; those numbered up to ``light_upto`` in light mode.
        One result per block, in order; which blocks joined or left our chain on the way the
        chain's events tell every subscriber (``chain.events``).
        ``ahead``: the blocks likely pushed next, whose signatures may be recovered early.
        ``taken(num)`` is called on the event loop as the chain is done with each block of
        ``blocks`` (whatever came of it), before the call returns."""
        ...

    async def admit_transactions(
        self, txs: Sequence[SignedTransaction]
    ) -> list[TransactionError | None]: ...

    async def add_votes(self, votes: Sequence[Vote]) -> list[VoteOutcome]:
        """Count finalizer votes (each checked: known block, finalizer, signature)."""
        ...
