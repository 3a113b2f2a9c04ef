"""When finality last moved, and whether production should pause for want of votes.

On a finality = votes chain, a producer that keeps building while no QC forms only makes
a longer branch that nothing can finalize (and that a partition's other side may discard).
Like Spring's ``production-pause-vote-timeout-ms``, production pauses once a block has gone
unanswered for that long: the clock starts at the first new head after finality last moved,
not at the move itself, so a stretch with no blocks at all (a crashed producer's turn)
pauses nothing and the next producer builds on. Finality moves when the LIB rises, when the
head claims a newer QC, or when votes reaching this node complete a QC — the last is what
restarts production after a partition heals: the finalizers of the other side vote on the
head all can vote on, their votes complete a QC here, and the next block carries it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from chain.core.consensus.qc import QcClaim
from chain.core.consensus.votes import VoteOutcome
from chain.core.primitives.params import slot_start_ms
from chain.events import ChainUpdate


class FinalityProgress:
    def __init__(
        self,
        timeout_ms: int,
        votes_chain: bool,
        on_final: Callable[[int, float], None] = lambda lib, age_ms: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``on_final(lib, age_ms)``: the LIB rose to block ``lib``, made ``age_ms`` ago."""
        self.timeout_ms = timeout_ms
        self.votes_chain = votes_chain
        self._clock = clock
        self._waiting_since: float | None = None  # the first head since finality moved
        self._head: bytes | None = None
        self._claim: QcClaim | None = None
        self._on_final = on_final

    def chain_updated(self, update: ChainUpdate) -> None:
        """A subscriber of the chain's updates: a LIB rise or a newer claim is finality
        moving; a new head starts the wait for it."""
        view = update.view
        core = view.head.core
        claim = None if core is None else core.claim
        moved = update.lib_advanced
        if moved:
            age_ms = time.time() * 1000 - slot_start_ms(view.lib_slot)
            self._on_final(view.lib_num, age_ms)
        if claim is not None and (self._claim is None or claim > self._claim):
            self._claim = claim
            moved = True
        new_head = view.head.id != self._head
        self._head = view.head.id
        if moved:
            self._waiting_since = None
        elif new_head and self._waiting_since is None:
            self._waiting_since = self._clock()

    def vote_counted(self, outcome: VoteOutcome) -> None:
        if outcome.new_qc:
            self._waiting_since = None

    def peer_joined(self) -> None:
        """A peer connected: maybe the other half of a healed partition. Its finalizers can
        vote only on blocks made from now on, so production gets a fresh timeout; were every
        producer left paused, equal heads on both sides would make no block to vote on and
        nothing would ever finalize again."""
        self._waiting_since = None

    @property
    def idle_ms(self) -> float:
        """How long the oldest block not followed by finality has waited (0: none waits)."""
        return 0.0 if self._waiting_since is None else (self._clock() - self._waiting_since) * 1000

    @property
    def paused(self) -> bool:
        """Whether production waits for votes."""
        return self.votes_chain and self.timeout_ms > 0 and self.idle_ms > self.timeout_ms
