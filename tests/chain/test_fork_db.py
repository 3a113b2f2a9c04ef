"""The fork database as a state machine: random branches, root advances and removals keep
fork choice, ancestry and the slot index consistent with a plain model of the tree."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from chain.core.consensus.block import BlockHeader, ProducerKey, Schedule, SignedBlock
from chain.core.consensus.dpos import HeaderState
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName, BlockId, BlockNum
from chain.fork_db import ForkDatabase

PRODUCERS = tuple(AccountName(n) for n in ("pa", "pb", "pc"))
SCHEDULE = Schedule(
    0,
    tuple(
        ProducerKey(n, PrivateKey(bytes([i + 1]) * 32).public_key) for i, n in enumerate(PRODUCERS)
    ),
)
ROOT = HeaderState(
    id=BlockId(bytes(4) + b"\x11" * 28),
    num=BlockNum(0),
    slot=100,
    producer="",
    state_root=b"\x00" * 32,
    active=SCHEDULE,
    pending=None,
    pending_num=0,
    last_produced=(),
    lib=BlockNum(0),
)


@dataclass(frozen=True)
class Node:
    """The model's view of one block: enough to rank it and to walk to its parent."""

    parent: BlockId | None
    num: int
    lib: int
    slot: int
    producer: AccountName


def _block(parent: HeaderState, slot: int, producer: AccountName, lib: int) -> SignedBlock:
    """An unsigned block: the fork database reads only the header's links."""
    header = BlockHeader(
        num=BlockNum(parent.num + 1),
        previous=parent.id,
        slot=slot,
        producer=producer,
        schedule_version=0,
        tx_root=b"\x00" * 32,
        state_root=lib.to_bytes(32, "big"),  # makes blocks differing only in lib distinct
    )
    return SignedBlock(header, header.pack(), b"\x00" * 65, ())


def _rank(block_id: BlockId, node: Node) -> tuple[int, int, bytes]:
    return node.lib, node.num, bytes(255 - b for b in block_id)


class ForkDatabaseMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.fork = ForkDatabase(ROOT)
        self.root = ROOT.id
        self.model: dict[BlockId, Node] = {}
        self.slots_used: set[tuple[AccountName, int]] = set()

    @initialize()
    def start(self) -> None:
        self.model = {ROOT.id: Node(None, 0, 0, ROOT.slot, AccountName(""))}

    def _ids(self) -> list[BlockId]:
        return sorted(self.model)

    def _descendants(self, top: BlockId) -> set[BlockId]:
        found = {top}
        for block_id in sorted(self.model, key=lambda b: self.model[b].num):
            parent = self.model[block_id].parent
            if parent in found:
                found.add(block_id)
        return found

    @rule(
        data=st.data(),
        gap=st.integers(1, 3),
        producer=st.sampled_from(PRODUCERS),
        lib_step=st.integers(0, 4),
    )
    def add_block(
        self, data: st.DataObject, gap: int, producer: AccountName, lib_step: int
    ) -> None:
        parent_id = data.draw(st.sampled_from(self._ids()), label="parent")
        parent = self.model[parent_id]
        num, slot = parent.num + 1, parent.slot + gap
        held = self.fork.same_slot(producer, slot)
        if held is not None and held in self.fork:
            return  # the chain refuses a second block of a producer's slot before adding it
        lib = min(parent.lib + lib_step, num - 1)
        parent_state = self.fork.get(parent_id)
        assert parent_state is not None
        block = _block(parent_state.state, slot, producer, lib)
        state = HeaderState(
            id=block.id,
            num=block.num,
            slot=slot,
            producer=producer,
            state_root=block.header.state_root,
            active=SCHEDULE,
            pending=None,
            pending_num=0,
            last_produced=(),
            lib=BlockNum(lib),
        )
        self.fork.add(state, block)
        self.model[block.id] = Node(parent_id, num, lib, slot, producer)
        self.slots_used.add((producer, slot))

    @rule(data=st.data())
    def advance_root(self, data: st.DataObject) -> None:
        new_root = data.draw(st.sampled_from(self._ids()), label="new root")
        self.fork.advance_root(new_root)
        kept = self._descendants(new_root)
        self.model = {b: n for b, n in self.model.items() if b in kept}
        node = self.model[new_root]
        self.model[new_root] = Node(None, node.num, node.lib, node.slot, node.producer)
        self.root = new_root

    @precondition(lambda self: len(self.model) > 1)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        victim = data.draw(st.sampled_from([b for b in self._ids() if b != self.root]))
        doomed = self._descendants(victim)
        assert sorted(self.fork.remove(victim)) == sorted(doomed)
        self.model = {b: n for b, n in self.model.items() if b not in doomed}

    @precondition(lambda self: len(self.model) > 1)
    @rule(data=st.data())
    def ancestry_is_consistent(self, data: st.DataObject) -> None:
        a = data.draw(st.sampled_from(self._ids()), label="a")
        b = data.draw(st.sampled_from(self._ids()), label="b")
        common = self.fork.common_ancestor(a, b)
        path_a = [fb.state.id for fb in self.fork.branch(a, common)]
        path_b = [fb.state.id for fb in self.fork.branch(b, common)]
        assert not set(path_a) & set(path_b), "the common ancestor is the lowest one"
        for tip, path in ((a, path_a), (b, path_b)):
            assert (path[-1] if path else common) == tip
            links = [common, *path]
            assert all(self.model[c].parent == p for p, c in itertools.pairwise(links))

    @invariant()
    def best_is_the_highest_ranked(self) -> None:
        expected = max(self.model, key=lambda b: _rank(b, self.model[b]))
        assert self.fork.best().id == expected

    @invariant()
    def sizes_and_contents_match_the_model(self) -> None:
        assert len(self.fork) == len(self.model)
        for block_id in self.model:
            held = self.fork.get(block_id)
            assert held is not None and held.state.id == block_id

    @invariant()
    def nothing_below_the_root_is_kept(self) -> None:
        assert self.fork.root.id == self.root
        root = self.model[self.root]
        for block_id, node in self.model.items():
            assert node.num >= root.num
            if block_id != self.root:
                branch = self.fork.branch(block_id, self.root)
                assert branch[0].block is not None
                assert branch[0].block.header.previous == self.root

    @invariant()
    def slot_index_finds_every_block(self) -> None:
        for block_id, node in self.model.items():
            if block_id != self.root:
                assert self.fork.same_slot(node.producer, node.slot) == block_id

    @invariant()
    def slot_index_forgets_what_is_gone(self) -> None:
        for producer, slot in self.slots_used:
            held = self.fork.same_slot(producer, slot)
            assert held is None or held in self.fork, "the index names only blocks held"


ForkDatabaseMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40)
TestForkDatabase = ForkDatabaseMachine.TestCase
TestForkDatabase.__doc__ = (
    "Adding, re-rooting and removing in any order keeps best(), ancestry, the root and the "
    "slot index consistent with a model of the block tree."
)


def _child(fork: ForkDatabase, parent: HeaderState, slot: int, lib: int) -> HeaderState:
    block = _block(parent, slot, PRODUCERS[slot % 3], lib)
    state = HeaderState(
        block.id, block.num, slot, block.header.producer, b"", SCHEDULE, None, 0, (), BlockNum(lib)
    )
    fork.add(state, block)
    return state


def test_higher_lib_beats_length_and_length_beats_id() -> None:
    """Fork choice ranks by LIB first, then by length, and only then by the lower id."""
    fork = ForkDatabase(ROOT)
    long_tip = ROOT
    for slot in range(101, 105):  # four blocks, LIB still 0
        long_tip = _child(fork, long_tip, slot, 0)
    short_tip = _child(fork, _child(fork, ROOT, 110, 0), 111, 1)  # two blocks, LIB 1
    assert fork.best() == short_tip
    twin = _child(fork, _child(fork, ROOT, 120, 0), 121, 1)  # as long, same LIB
    assert fork.best() == min(short_tip, twin, key=lambda s: s.id)
    fork.remove(short_tip.id)
    fork.remove(twin.id)
    assert fork.best() == long_tip
