"""The two-chain finality rule over QC claims, and the finalizer policy."""

from __future__ import annotations

from chain.core.consensus.block import ProducerKey, Schedule
from chain.core.consensus.finality import BlockRef, FinalityCore, core_from_wire, finalizer_policy
from chain.core.consensus.qc import QcClaim
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.encoding import pack, unpack
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName, BlockId, BlockNum


def ref(num: int, branch: int = 0) -> BlockRef:
    return BlockRef(BlockId(num.to_bytes(4, "big") + bytes([branch]) * 28), 100 + num, 0)


def claim(num: int, strong: bool = True) -> QcClaim:
    return QcClaim(BlockNum(num), strong)


def chain_of(claims: list[QcClaim]) -> FinalityCore:
    """Blocks 1..len(claims) on block 0, block i claiming ``claims[i-1]``."""
    core = FinalityCore.genesis(ref(0))
    for i, c in enumerate(claims, start=1):
        core = core.next(ref(i), c)
    return core


def test_strong_qc_on_a_block_makes_the_block_it_claimed_final() -> None:
    """Block 2 carries a QC on 1, block 3 a strong QC on 2 (which claimed 1): 1 is final."""
    core = chain_of([claim(0, False), claim(1), claim(2)])
    assert core.final_num == 1
    assert core.claim == claim(2)
    assert core.next(ref(4), claim(3)).final_num == 2


def test_steady_votes_keep_finality_two_blocks_behind() -> None:
    """With a strong QC on each parent, the final block trails the current one by two."""
    core = chain_of([claim(0, False)] + [claim(i) for i in range(1, 30)])
    assert core.current.num == 30 and core.final_num == 28
    assert len(core.refs) == 3, "references below the final block are dropped"


def test_weak_qc_claims_move_no_finality() -> None:
    """A weak QC proves no two-chain: nothing new is final until a strong QC arrives."""
    core = chain_of([claim(0, False), claim(1), claim(2, False), claim(3, False)])
    assert core.final_num == 0
    # A strong QC on 3, which claimed a weak QC on 2: block 2 is final (Savanna's rule).
    assert core.next(ref(5), claim(3)).final_num == 2


def test_repeated_claims_without_new_qcs_stall_finality() -> None:
    """Blocks that carry no new QC repeat their parent's claim; the final block stays."""
    core = chain_of([claim(0, False), claim(1), claim(2)] + [claim(2)] * 5)
    assert core.final_num == 1 and core.current.num == 8
    assert core.final_after(claim(2)) == 1
    assert core.final_after(claim(8)) == 2, "a strong QC on 8, which claimed 2, finalizes 2"


def test_extends_knows_the_branch_back_to_the_final_block() -> None:
    """A core tells its strict ancestors (from the final block on) from other blocks."""
    core = chain_of([claim(0, False), claim(1), claim(1), claim(1)])
    assert core.final_num == 0
    assert core.extends(ref(2).id) and core.extends(ref(0).id)
    assert not core.extends(ref(4).id), "a block does not extend itself"
    assert not core.extends(ref(2, branch=1).id)
    assert core.claimed() == ref(1)


def test_core_survives_its_encoding() -> None:
    """The header state stores the core; it decodes to the same value."""
    core = chain_of([claim(0, False), claim(1), claim(2, False), claim(2)])
    assert core_from_wire(unpack(pack(core.to_wire()), "core")) == core


def test_policy_follows_the_schedule_unless_genesis_names_finalizers() -> None:
    """By default the scheduled producers finalize with one vote each; named finalizers
    replace them, whatever the schedule."""
    keys = [PrivateKey.generate().public_key for _ in range(3)]
    schedule = Schedule(
        4, tuple(ProducerKey(AccountName(f"p{i + 1}"), k) for i, k in enumerate(keys))
    )
    policy = finalizer_policy(ChainParams(finality="votes"), schedule)
    assert policy.generation == 4
    assert [(f.name, f.key, f.weight) for f in policy.finalizers] == [
        (AccountName(f"p{i + 1}"), k, 1) for i, k in enumerate(keys)
    ]
    named = ChainParams(finality="votes", finalizers=((AccountName("fin"), keys[0], 5),))
    only = finalizer_policy(named, schedule)
    assert only.generation == 0 and only.threshold == 4
