"""``ChainEvents``: what one call on the chain thread changed, published with its view.

The chain thread is the only place that knows what happened to the chain; everything else in
the node (block relay, the block cache, inclusion watches, block sync, the finality tracker,
metrics, the public websocket) learns it from one record, in the order it happened. A record
is immutable and holds decoded blocks only, so that a subscriber on another thread or task
never needs to ask the chain again to know what changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from chain.core.consensus.block import SignedBlock
from chain.core.execution.contracts import TxTrace
from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.types import BlockNum, TxId
from chain.view import ChainView


@dataclass(frozen=True, slots=True)
class BlockStep:
    """One block joining the best chain (``undo`` False) or leaving it in a fork switch.

    ``traces``: what the contract actions of a joining block did, per transaction that ran
    any, in block order (console, events, return values, fuel)."""

    block: SignedBlock
    undo: bool = False
    traces: tuple[tuple[TxId, TxTrace], ...] = ()


@dataclass(frozen=True, slots=True)
class ChainEvents:
    """The changes of one call, in the order they happened.

    A fork switch is its popped blocks (highest first) followed by the blocks of the new
    branch (lowest first); a batch of pushes may hold several switches, so order matters and
    the steps are kept in one sequence.
    """

    steps: tuple[BlockStep, ...] = ()
    # Transactions of popped blocks put back into the mempool (offered to peers again).
    requeued: tuple[SignedTransaction, ...] = ()
    # The block this node produced in this call, if it did (relayed to every peer at once).
    produced: SignedBlock | None = None

    @property
    def applied(self) -> list[SignedBlock]:
        return [s.block for s in self.steps if not s.undo]

    @property
    def popped(self) -> list[SignedBlock]:
        return [s.block for s in self.steps if s.undo]

    def __bool__(self) -> bool:
        return bool(self.steps or self.requeued or self.produced is not None)


NO_EVENTS = ChainEvents()


@dataclass(frozen=True, slots=True)
class ChainUpdate:
    """A view and the events that led to it; ``previous_lib`` tells whether the LIB moved
    (every block in (previous_lib, view.lib_num] became irreversible in this call)."""

    view: ChainView
    events: ChainEvents
    previous_lib: BlockNum

    @property
    def lib_advanced(self) -> bool:
        return self.view.lib_num > self.previous_lib
