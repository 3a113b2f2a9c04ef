"""Each native action: the valid case and its invalid siblings, on a dict-backed state."""

from __future__ import annotations

import pytest

from chain.core.execution.actions import (
    ApproveProducer,
    NewAccount,
    RegProducer,
    Stake,
    Transfer,
    UnregProducer,
    Unstake,
    UpdateKey,
    VoteProducer,
)
from chain.core.execution.state import Account, Producer, StateView
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.execution.transition import (
    Context,
    apply_action,
    apply_transaction,
    format_units,
    settle,
)
from chain.core.primitives import schema
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.errors import (
    DuplicateTransaction,
    ExpiredTransaction,
    InsufficientFunds,
    InvalidAction,
    MissingAuthority,
    OversizedTransaction,
    TaposMismatch,
    Unauthorized,
    UnknownAccount,
)
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName, BlockId, PublicKey, TxId
from chain.testing import MemoryKV

KEYS = {n: PrivateKey(bytes([i + 1]) * 32) for i, n in enumerate(["gov", "alice", "bob", "pa"])}
PARAMS = ChainParams(governance=(AccountName("gov"),), unbond_delay_s=100)
NOW = 1_000_000
CTX = Context(PARAMS, NOW)
GENESIS_ID = BlockId(bytes(4) + b"\x07" * 28)


def N(s: str) -> AccountName:
    return AccountName(s)


@pytest.fixture
def view() -> StateView:
    v = StateView(MemoryKV())
    for name, key in KEYS.items():
        v.put_account(Account(N(name), key.public_key, balance=1000))
    v.put_producer(Producer(N("pa"), KEYS["pa"].public_key, approved=True))
    v.set_block_summary(0, GENESIS_ID)
    return v


def test_transfer_moves_balance(view: StateView) -> None:
    """A transfer takes the amount from the sender's balance and adds it to the receiver's."""
    apply_action(view, Transfer(N("alice"), N("bob"), 300, "x"), CTX)
    assert view.account("alice").balance == 700  # type: ignore[union-attr]
    assert view.account("bob").balance == 1300  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("action", "error"),
    [
        (Transfer(N("alice"), N("bob"), 1001), InsufficientFunds),
        (Transfer(N("alice"), N("nobody"), 1), UnknownAccount),
        (Transfer(N("nobody"), N("bob"), 1), UnknownAccount),
        (Transfer(N("alice"), N("alice"), 1), InvalidAction),
    ],
)
def test_transfer_refusals(view: StateView, action: Transfer, error: type[Exception]) -> None:
    """An overdrawn transfer, one to or from an unknown account, and one to oneself are refused and
    write nothing."""
    before = view.changes()
    with pytest.raises(error):
        apply_action(view, action, CTX)
    assert view.changes() == before, "a refused action writes nothing (checks before writes)"


def test_newaccount_by_governance(view: StateView) -> None:
    """A governance account creates an account with the given key and no tokens."""
    key = PrivateKey.generate().public_key
    apply_action(view, NewAccount(N("gov"), N("carol"), key), CTX)
    assert view.account("carol") == Account(N("carol"), key)


def test_newaccount_refusals(view: StateView) -> None:
    """An account created by a non-governance account, or under a name already taken, is refused."""
    key = PrivateKey.generate().public_key
    with pytest.raises(Unauthorized):
        apply_action(view, NewAccount(N("alice"), N("carol"), key), CTX)
    with pytest.raises(InvalidAction):
        apply_action(view, NewAccount(N("gov"), N("bob"), key), CTX)


def test_updatekey_rotates_and_refuses_same_key(view: StateView) -> None:
    """Updating a key rotates it; setting the same key again, or updating an unknown account, is
    refused."""
    key = PrivateKey.generate().public_key
    apply_action(view, UpdateKey(N("alice"), key), CTX)
    assert view.account("alice").key == key  # type: ignore[union-attr]
    with pytest.raises(InvalidAction):
        apply_action(view, UpdateKey(N("alice"), key), CTX)
    with pytest.raises(UnknownAccount):
        apply_action(view, UpdateKey(N("nobody"), key), CTX)


def test_stake_and_unstake_with_unbonding_delay(view: StateView) -> None:
    """Staking moves balance into stake; unstaked tokens settle back into the balance only once the
    unbonding delay has passed."""
    apply_action(view, Stake(N("alice"), 400), CTX)
    alice = view.account("alice")
    assert alice is not None and (alice.balance, alice.staked) == (600, 400)
    apply_action(view, Unstake(N("alice"), 150), CTX)
    alice = view.account("alice")
    assert alice is not None and alice.staked == 250
    assert alice.unbonding == ((NOW + 100, 150),)
    assert settle(alice, NOW + 99).balance == 600
    assert settle(alice, NOW + 100).balance == 750
    assert settle(alice, NOW + 100).unbonding == ()


def test_stake_refusals(view: StateView) -> None:
    """Staking beyond the balance or unstaking beyond the stake is refused and writes nothing."""
    before = view.changes()
    with pytest.raises(InsufficientFunds):
        apply_action(view, Stake(N("alice"), 1001), CTX)
    with pytest.raises(InsufficientFunds):
        apply_action(view, Unstake(N("alice"), 1), CTX)
    assert view.changes() == before


def test_unbonded_tokens_become_spendable_after_delay(view: StateView) -> None:
    """Unbonding tokens cannot be transferred before the delay ends and can be from the moment it
    does."""
    apply_action(view, Stake(N("alice"), 1000), CTX)
    apply_action(view, Unstake(N("alice"), 1000), CTX)
    with pytest.raises(InsufficientFunds):
        apply_action(view, Transfer(N("alice"), N("bob"), 1), Context(PARAMS, NOW + 99))
    apply_action(view, Transfer(N("alice"), N("bob"), 1000), Context(PARAMS, NOW + 100))
    assert view.account("bob").balance == 2000  # type: ignore[union-attr]


def test_regproducer_approve_unreg(view: StateView) -> None:
    """A producer registers, is approved only by governance and only once, unregisters only once;
    approving a non-producer or registering an unknown account is refused."""
    key = PrivateKey.generate().public_key
    apply_action(view, RegProducer(N("bob"), key, "https://bob"), CTX)
    assert view.producer("bob") == Producer(N("bob"), key, "https://bob")
    with pytest.raises(Unauthorized):
        apply_action(view, ApproveProducer(N("alice"), N("bob")), CTX)
    apply_action(view, ApproveProducer(N("gov"), N("bob")), CTX)
    assert view.producer("bob").approved  # type: ignore[union-attr]
    with pytest.raises(InvalidAction):
        apply_action(view, ApproveProducer(N("gov"), N("bob")), CTX)
    with pytest.raises(InvalidAction):
        apply_action(view, ApproveProducer(N("gov"), N("alice")), CTX)
    apply_action(view, UnregProducer(N("bob")), CTX)
    assert not view.producer("bob").registered  # type: ignore[union-attr]
    with pytest.raises(InvalidAction):
        apply_action(view, UnregProducer(N("bob")), CTX)
    with pytest.raises(UnknownAccount):
        apply_action(view, RegProducer(N("nobody"), key), CTX)


def test_vote_weights_follow_stake(view: StateView) -> None:
    """A voter's stake counts for the producers it votes for and follows later stakes and unstakes;
    an empty vote withdraws it."""
    apply_action(view, Stake(N("alice"), 500), CTX)
    apply_action(view, VoteProducer(N("alice"), (N("pa"),)), CTX)
    assert view.producer("pa").total_votes == 500  # type: ignore[union-attr]
    apply_action(view, Stake(N("alice"), 100), CTX)
    assert view.producer("pa").total_votes == 600  # type: ignore[union-attr]
    apply_action(view, Unstake(N("alice"), 200), CTX)
    assert view.producer("pa").total_votes == 400  # type: ignore[union-attr]
    apply_action(view, VoteProducer(N("alice"), ()), CTX)
    assert view.producer("pa").total_votes == 0  # type: ignore[union-attr]


def test_vote_refusals(view: StateView) -> None:
    """Votes for an unapproved producer, with a duplicate, or in unsorted order are refused,
    and none of them writes anything."""
    key = PrivateKey.generate().public_key
    apply_action(view, RegProducer(N("bob"), key), CTX)  # registered but not approved
    before = view.changes()
    with pytest.raises(InvalidAction):
        apply_action(view, VoteProducer(N("alice"), (N("bob"),)), CTX)
    assert view.changes() == before
    with pytest.raises(InvalidAction):
        apply_action(view, VoteProducer(N("alice"), (N("pa"), N("pa"))), CTX)
    assert view.changes() == before
    apply_action(view, ApproveProducer(N("gov"), N("bob")), CTX)
    before = view.changes()
    with pytest.raises(InvalidAction):  # not sorted
        apply_action(view, VoteProducer(N("alice"), (N("pa"), N("bob"))), CTX)
    assert view.changes() == before


# --- transactions ---------------------------------------------------------------------------


def _stx(*actions: object, signers: list[str], expiration: int = NOW + 60) -> SignedTransaction:
    ref_num, ref_prefix = tapos_of(GENESIS_ID)
    tx = Transaction(expiration, ref_num, ref_prefix, tuple(actions))  # type: ignore[arg-type]
    return SignedTransaction.sign(tx, b"chain", [KEYS[s] for s in signers])


def _keys(*names: str) -> frozenset[PublicKey]:
    return frozenset(KEYS[n].public_key for n in names)


def test_transaction_applies_and_is_deduplicated(view: StateView) -> None:
    """A signed transaction applies its actions once; the same transaction again is refused as a
    duplicate."""
    stx = _stx(Transfer(N("alice"), N("bob"), 10), signers=["alice"])
    apply_transaction(view, stx, _keys("alice"), CTX)
    assert view.account("bob").balance == 1010  # type: ignore[union-attr]
    with pytest.raises(DuplicateTransaction):
        apply_transaction(view, stx, _keys("alice"), CTX)


def test_failing_action_leaves_no_trace(view: StateView) -> None:
    """When a later action fails, the earlier actions' writes are dropped and the transaction is not
    marked seen."""
    stx = _stx(
        Transfer(N("alice"), N("bob"), 10),
        Transfer(N("alice"), N("bob"), 5000),
        signers=["alice"],
    )
    before = view.changes()
    with pytest.raises(InsufficientFunds):
        apply_transaction(view, stx, _keys("alice"), CTX)
    assert view.changes() == before
    assert not view.tx_seen(stx.id)


@pytest.mark.parametrize(
    ("expiration", "ok"),
    [(NOW - 1, False), (NOW, True), (NOW + 3600, True), (NOW + 3601, False)],
)
def test_expiration_window(view: StateView, expiration: int, ok: bool) -> None:
    """An expiration in the past or more than an hour ahead is refused as expired; now and exactly
    an hour ahead pass."""
    stx = _stx(Transfer(N("alice"), N("bob"), 1), signers=["alice"], expiration=expiration)
    if ok:
        apply_transaction(view, stx, _keys("alice"), CTX)
    else:
        with pytest.raises(ExpiredTransaction):
            apply_transaction(view, stx, _keys("alice"), CTX)


def test_tapos_must_name_a_known_block(view: StateView) -> None:
    """A transaction whose TaPoS reference names no known block is refused."""
    tx = Transaction(NOW + 60, 0, 12345, (Transfer(N("alice"), N("bob"), 1),))
    stx = SignedTransaction.sign(tx, b"chain", [KEYS["alice"]])
    with pytest.raises(TaposMismatch):
        apply_transaction(view, stx, _keys("alice"), CTX)


def test_authority_checks(view: StateView) -> None:
    """A transfer signed by another account, or with an extra signature, lacks authority; an unknown
    sender is refused."""
    transfer = Transfer(N("alice"), N("bob"), 1)
    with pytest.raises(MissingAuthority):  # bob signed alice's transfer
        apply_transaction(view, _stx(transfer, signers=["bob"]), _keys("bob"), CTX)
    with pytest.raises(MissingAuthority):  # an extra, unneeded signature
        stx = _stx(transfer, signers=["alice", "bob"])
        apply_transaction(view, stx, _keys("alice", "bob"), CTX)
    with pytest.raises(UnknownAccount):
        stx = _stx(Transfer(N("zed"), N("bob"), 1), signers=["alice"])
        apply_transaction(view, stx, _keys("alice"), CTX)


def test_oversized_transaction_refused(view: StateView) -> None:
    """A transaction larger than max_tx_bytes is refused as oversized."""
    small = Context(ChainParams(governance=(N("gov"),), max_tx_bytes=256), NOW)
    stx = _stx(Transfer(N("alice"), N("bob"), 1, "m" * 250), signers=["alice"])
    with pytest.raises(OversizedTransaction):
        apply_transaction(view, stx, _keys("alice"), small)


def test_expired_id_lists_are_pruned_block_by_block() -> None:
    """Pruning at a time drops a block's id list once the last of its transactions expired
    before it, and keeps it while any of them has not; the undo record gets the dropped
    list's old value without reading it again."""
    kv = MemoryKV()
    v = StateView(kv)
    v.record_block_txs(1, [(100, b"a" * 32), (120, b"b" * 32)])
    v.record_block_txs(2, [(200, b"c" * 32)])
    kv.data.update({k: val for k, val in v.changes() if val is not None})
    fresh = StateView(kv)
    assert fresh.prune_expired_txs(110) == 0, "block 1 still has an unexpired id"
    assert fresh.prune_expired_txs(150) == 2
    deleted = {k for k, val in fresh.changes() if val is None}
    assert deleted == {schema.tx_block_key(120, 1)}
    assert fresh.originals()[schema.tx_block_key(120, 1)] == kv.data[schema.tx_block_key(120, 1)]


def test_an_id_is_seen_once_applied_in_the_view_or_indexed_in_a_block() -> None:
    """An id marked in a view or in a child merged into it, or in the store's transaction
    index, is seen; one marked in a dropped child is not; marks are no state writes."""
    kv = MemoryKV()
    kv.data[schema.tx_index_key(TxId(b"i" * 32))] = schema.be(7, 8)
    v = StateView(kv)
    assert v.tx_seen(b"i" * 32) and not v.tx_seen(b"m" * 32)
    v.mark_tx(b"m" * 32)
    kept, dropped = v.child(), v.child()
    kept.mark_tx(b"k" * 32)
    kept.merge_into_parent()
    dropped.mark_tx(b"d" * 32)
    assert v.tx_seen(b"m" * 32) and v.tx_seen(b"k" * 32) and not v.tx_seen(b"d" * 32)
    assert dropped.tx_seen(b"m" * 32), "a child sees what its parent applied"
    assert v.changes() == []


def test_format_units() -> None:
    """Units format with all the token's decimals, and with none when it has none."""
    assert format_units(15000, 4, "BOR") == "1.5000 BOR"
    assert format_units(7, 0, "X") == "7 X"
