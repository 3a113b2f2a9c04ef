"""Finality by votes: the finalizer policy and the two-chain rule over QC claims.

Every block of a ``finality = votes`` chain claims the newest QC on its branch (its parent's
claim, or a newer one it proves by carrying the QC). ``FinalityCore`` is what a block's
header state keeps to apply the rule of Savanna (Antelope Spring): when a block claims a
*strong* QC on block B, the block that B itself claimed is final. With votes arriving
within a slot, block N+1 carries a QC on N and block N+2 one on N+1, which makes N final:
about a second after N was produced.

The core is a pure value: the references of the blocks from the last final one to the
current one (id, slot, schedule version) and the claim of each block since the newest
claimed one, so that a header state alone answers "which block did B claim?" and "does this
branch contain that block?" (the finalizer's safety rules ask the latter).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chain.core.consensus.block import Schedule
from chain.core.consensus.qc import Finalizer, FinalizerPolicy, QcClaim
from chain.core.primitives.encoding import check_bytes, check_int, check_list
from chain.core.primitives.errors import EncodingError
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName, BlockId, BlockNum, PublicKey, block_num_of

__all__ = ["BlockRef", "FinalityCore", "QcLink", "finalizer_policy"]

FINALITY_VOTES = "votes"
FINALITY_DPOS = "dpos"
FINALITY_MODES = (FINALITY_VOTES, FINALITY_DPOS)
# Reversible blocks a core may span. Production pauses after a few seconds without votes
# (the node's production-pause-vote-timeout-ms), so a live chain never gets near this; it
# bounds what a peer's header state can make us hold (a reference is ~45 bytes).
MAX_CORE_REFS = 100_000


def finalizer_policy(params: ChainParams, schedule: Schedule) -> FinalizerPolicy:
    """The finalizers of a block whose active schedule is ``schedule``: the ones genesis
    names, else the scheduled producers with their signing keys, one vote each."""
    if params.finalizers:
        return FinalizerPolicy(
            0,
            tuple(Finalizer(AccountName(n), PublicKey(k), w) for n, k, w in params.finalizers),
        )
    return FinalizerPolicy(
        schedule.version, tuple(Finalizer(p.name, p.key, 1) for p in schedule.producers)
    )


@dataclass(frozen=True, slots=True)
class BlockRef:
    """A block as finality needs to know it: its id, slot and schedule version."""

    id: BlockId
    slot: int
    version: int

    @property
    def num(self) -> BlockNum:
        return block_num_of(self.id)

    def to_wire(self) -> list[Any]:
        return [self.id, self.slot, self.version]


def block_ref_from_wire(raw: Any) -> BlockRef:
    if type(raw) is not list or len(raw) != 3:
        raise EncodingError("block_ref", "expected [id, slot, version]")
    return BlockRef(
        BlockId(check_bytes(raw[0], 32, "block_ref.id")),
        check_int(raw[1], 0, 2**32 - 1, "block_ref.slot"),
        check_int(raw[2], 0, 2**32 - 1, "block_ref.version"),
    )


@dataclass(frozen=True, slots=True)
class QcLink:
    """Block ``source`` claims a QC on block ``target`` (strong or weak)."""

    source: BlockNum
    target: BlockNum
    strong: bool


@dataclass(frozen=True, slots=True)
class FinalityCore:
    """The finality view of one block (its header state keeps it).

    ``refs``: every block from the last final one to this one, by ascending number.
    ``links``: the claim of every block from the newest claimed one (or the final one) to
    this one, by ascending source. ``links[0].target`` is the last final block.
    """

    refs: tuple[BlockRef, ...]
    links: tuple[QcLink, ...]

    @classmethod
    def genesis(cls, ref: BlockRef) -> FinalityCore:
        """The core of the block finality starts from: final, claiming a weak QC on itself."""
        return cls((ref,), (QcLink(ref.num, ref.num, False),))

    @property
    def current(self) -> BlockRef:
        return self.refs[-1]

    @property
    def final(self) -> BlockRef:
        return self.refs[0]

    @property
    def final_num(self) -> BlockNum:
        return self.refs[0].num

    @property
    def claim(self) -> QcClaim:
        last = self.links[-1]
        return QcClaim(last.target, last.strong)

    def ref_at(self, num: int) -> BlockRef | None:
        """The block numbered ``num`` on this branch, if it is not older than the final one."""
        i = num - self.final_num
        return self.refs[i] if 0 <= i < len(self.refs) else None

    def claimed(self) -> BlockRef:
        """The block this block's claim names (never older than the final block)."""
        ref = self.ref_at(self.claim.num)
        assert ref is not None, "a claim never names a block before the final one"
        return ref

    def extends(self, block_id: BlockId) -> bool:
        """Whether ``block_id`` is a strict ancestor of this block, not older than the final
        one (an older block cannot tell; the safety rules treat it as not extended)."""
        ref = self.ref_at(block_num_of(block_id))
        return ref is not None and ref.id == block_id and ref is not self.current

    def _link_from(self, num: int) -> QcLink:
        link = self.links[num - self.links[0].source]
        assert link.source == num, "links are contiguous"
        return link

    def final_after(self, claim: QcClaim) -> BlockNum:
        """The last final block once a child of this block claims ``claim`` (two-chain rule:
        a strong QC on B makes final the block B claimed)."""
        if not claim.strong:
            return self.final_num
        return self._link_from(claim.num).target

    def next(self, ref: BlockRef, claim: QcClaim) -> FinalityCore:
        """The core of this block's child ``ref``, which claims ``claim``. The caller has
        checked the claim (``chain.core.consensus.finality_rules.check_qc_claim``): not older than
        ours, on a block of this branch."""
        assert ref.num == self.current.num + 1 and claim >= self.claim
        assert claim.num <= self.current.num
        final = self.final_after(claim)
        front = claim.num if claim.strong else self.links[0].source
        refs = (*self.refs[final - self.final_num :], ref)
        links = (
            *self.links[front - self.links[0].source :],
            QcLink(ref.num, claim.num, claim.strong),
        )
        return FinalityCore(refs, links)

    def to_wire(self) -> list[Any]:
        return [
            [r.to_wire() for r in self.refs],
            self.links[0].source,
            [[x.target, x.strong] for x in self.links],
        ]


def core_from_wire(raw: Any) -> FinalityCore:
    """A core from our own store (trusted, but checked for shape all the same)."""
    if type(raw) is not list or len(raw) != 3:
        raise EncodingError("finality core", "expected [refs, first source, links]")
    refs = tuple(block_ref_from_wire(r) for r in check_list(raw[0], MAX_CORE_REFS, "core.refs"))
    source = check_int(raw[1], 0, 2**32 - 1, "core.source")
    links = tuple(
        QcLink(BlockNum(source + i), BlockNum(t), bool(s))
        for i, (t, s) in enumerate(check_list(raw[2], MAX_CORE_REFS, "core.links"))
    )
    if not refs or not links:
        raise EncodingError("finality core", "empty")
    return FinalityCore(refs, links)
