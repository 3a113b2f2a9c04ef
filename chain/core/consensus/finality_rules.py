"""The rules a block's QC claim and QC must keep, one check per line (``InvalidBlock``).

``check_qc_claim`` needs the header alone, so the producer's own blocks pass it too;
``verify_block_qc`` checks the QC's signatures, once, when a block arrives.
"""

from __future__ import annotations

from chain.core.consensus.block import BlockHeader, SignedBlock, SignedHeader
from chain.core.consensus.dpos import HeaderState
from chain.core.consensus.finality import finalizer_policy
from chain.core.consensus.qc import FinalizerPolicy, QcClaim, verify_qc
from chain.core.primitives.errors import InvalidBlock, QcError
from chain.core.primitives.params import ChainParams

__all__ = ["check_qc_claim", "claim_policy", "verify_block_qc"]


def check_qc_claim(parent: HeaderState, header: BlockHeader) -> None:
    """``header`` claims a QC exactly when its chain finalizes by votes, and its claim is no
    older than its parent's and names a block of its branch."""
    num, claim, core = header.num, header.qc_claim, parent.core
    if core is None:
        if claim is not None:
            raise InvalidBlock(num, "a QC claim on a chain without finality by votes")
        return
    if claim is None:
        raise InvalidBlock(num, "no QC claim: this chain finalizes by votes")
    if claim < core.claim:
        raise InvalidBlock(num, f"QC claim {claim} is older than the parent's {core.claim}")
    if claim.num >= num:
        raise InvalidBlock(num, f"QC claim on block {claim.num}, not an ancestor")


def claim_policy(parent: HeaderState, claim: QcClaim, params: ChainParams) -> FinalizerPolicy:
    """The policy a QC on the claimed block must satisfy: the one of that block, which is the
    parent's own (a QC may not reach back across a change of producer schedule when the
    schedule names the finalizers: there, claims wait for votes under the new schedule)."""
    core = parent.core
    assert core is not None
    target = core.ref_at(claim.num)
    if target is None:
        raise InvalidBlock(parent.num + 1, f"QC claim on block {claim.num}, before the final one")
    if not params.finalizers and target.version != parent.active.version:
        raise InvalidBlock(parent.num + 1, "QC claim across a change of finalizer policy")
    return finalizer_policy(params, parent.active)


def verify_block_qc(
    parent: HeaderState, block: SignedBlock | SignedHeader, params: ChainParams, chain_id: bytes
) -> None:
    """A block carries a QC exactly when its claim is newer than its parent's, and that QC
    proves the claim: the claimed block of this branch, as strong as claimed, and valid."""
    num, qc, claim, core = block.num, block.qc, block.header.qc_claim, parent.core
    if core is None or claim is None or claim == core.claim:
        if qc is not None:
            raise InvalidBlock(num, "a QC that proves no new claim")
        return
    if qc is None:
        raise InvalidBlock(num, f"new QC claim {claim} without the QC")
    policy = claim_policy(parent, claim, params)
    target = core.ref_at(claim.num)
    assert target is not None
    if qc.block_id != target.id:
        raise InvalidBlock(num, f"the QC is not on block {claim.num} of this branch")
    if qc.strong != claim.strong:
        raise InvalidBlock(num, "the QC's strength differs from the claim")
    try:
        verify_qc(qc, policy, chain_id)
    except QcError as err:
        raise InvalidBlock(num, f"{err.name}: {err}") from err
