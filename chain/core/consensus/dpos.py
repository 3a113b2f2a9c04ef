"""DPoS: who produces a slot, how the last irreversible block moves, and elections.

``HeaderState`` is everything consensus needs to know about a block without its state: the
active and pending schedules and which block each active producer made last. It is computed
from headers alone (``advance``), so the fork database can rank branches it has not applied;
the rules a header must keep are checked in ``chain.core.block_transition``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chain.core.consensus.block import BlockHeader, ProducerKey, Schedule, schedule_from_wire
from chain.core.consensus.finality import BlockRef, FinalityCore, core_from_wire
from chain.core.execution.state import StateView
from chain.core.primitives.encoding import pack, unpack
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName, BlockId, BlockNum

__all__ = ["HeaderState", "elect", "producer_of_slot"]


def producer_of_slot(schedule: Schedule, slot: int, blocks_per_turn: int) -> int:
    """Index in ``schedule`` of the producer of ``slot``: turns of ``blocks_per_turn`` slots."""
    n = len(schedule.producers)
    return (slot % (n * blocks_per_turn)) // blocks_per_turn


def irreversible_candidate(schedule: Schedule, last_produced: dict[AccountName, int]) -> int:
    """The highest block that more than two thirds of ``schedule`` have produced on top of.

    Sorting each active producer's last produced block ascending, the entry at (n-1)//3 is
    one that floor(2n/3)+1 producers have reached or passed (EOSIO's 2/3+1 rule).
    """
    marks = sorted(last_produced.get(p.name, 0) for p in schedule.producers)
    return marks[(len(marks) - 1) // 3]


@dataclass(frozen=True, slots=True)
class HeaderState:
    id: BlockId
    num: BlockNum
    slot: int
    producer: str
    state_root: bytes
    active: Schedule
    pending: Schedule | None
    pending_num: int
    last_produced: tuple[tuple[AccountName, int], ...]
    lib: BlockNum
    # On finality = votes chains: the QC claims and final block (``chain.core.consensus.finality``),
    # from which ``lib`` comes; None on dpos chains, whose LIB follows the 2/3+1 producer rule.
    core: FinalityCore | None = None

    def scheduled(self, slot: int, params: ChainParams) -> tuple[AccountName, bytes]:
        p = self.active.producers[producer_of_slot(self.active, slot, params.blocks_per_turn)]
        return p.name, p.key

    def advance(self, header: BlockHeader, block_id: BlockId) -> HeaderState:
        """The header state after ``header``, whose rules the caller has checked
        (``chain.core.block_transition.process_header``): the producer's mark, the LIB, and a
        pending schedule that becomes active once the block proposing it is irreversible."""
        num = header.num
        pending, pending_num = self.pending, self.pending_num
        if header.new_producers is not None:
            pending, pending_num = header.new_producers, num
        marks = dict(self.last_produced)
        marks[header.producer] = num
        core, claim = self.core, header.qc_claim
        if core is not None:
            assert claim is not None, "process_header checks that votes chains claim a QC"
            lib: int = core.final_after(claim)
        else:
            lib = max(self.lib, irreversible_candidate(self.active, marks))
        active = self.active
        if pending is not None and lib >= pending_num:
            active, pending, pending_num = pending, None, 0
        if core is not None and claim is not None:
            core = core.next(BlockRef(block_id, header.slot, active.version), claim)
        keep = set(active.names())
        return HeaderState(
            id=block_id,
            num=num,
            slot=header.slot,
            producer=header.producer,
            state_root=header.state_root,
            active=active,
            pending=pending,
            pending_num=pending_num,
            last_produced=tuple(sorted((p, n) for p, n in marks.items() if p in keep)),
            lib=BlockNum(lib),
            core=core,
        )

    def encode(self) -> bytes:
        fields = [
            self.id,
            self.num,
            self.slot,
            self.producer,
            self.state_root,
            self.active.to_wire(),
            None if self.pending is None else self.pending.to_wire(),
            self.pending_num,
            [list(x) for x in self.last_produced],
            self.lib,
        ]
        if self.core is not None:
            fields.append(self.core.to_wire())
        return pack(fields)


def decode_header_state(data: bytes) -> HeaderState:
    r: list[Any] = unpack(data, "header state")
    return HeaderState(
        id=BlockId(r[0]),
        num=BlockNum(r[1]),
        slot=r[2],
        producer=r[3],
        state_root=r[4],
        active=schedule_from_wire(r[5]),
        pending=None if r[6] is None else schedule_from_wire(r[6]),
        pending_num=r[7],
        last_produced=tuple((AccountName(p), n) for p, n in r[8]),
        lib=BlockNum(r[9]),
        core=core_from_wire(r[10]) if len(r) > 10 else None,
    )


def elect(
    view: StateView, params: ChainParams, active: Schedule, pending: Schedule | None
) -> Schedule | None:
    """The schedule to propose now, if the vote tally calls for a change.

    The top ``schedule_size`` approved candidates by stake-weighted votes (ties by name),
    ordered by name. Nothing is proposed while a schedule is pending, when the result equals
    the active schedule, or when fewer candidates qualify than the active schedule holds
    (EOSIO's rule: a thin vote never shrinks the producer set).
    """
    if pending is not None:
        return None
    ranked = sorted(
        (p for p in view.producers() if p.electable), key=lambda p: (-p.total_votes, p.name)
    )
    top = sorted(ranked[: params.schedule_size], key=lambda p: p.name)
    if len(top) < len(active.producers):
        return None
    proposal = tuple((p.name, p.key) for p in top)
    if proposal == tuple((p.name, p.key) for p in active.producers):
        return None

    return Schedule(active.version + 1, tuple(ProducerKey(n, k) for n, k in proposal))
