"""The compiled core and the Python reference compute the same thing: for random blocks of
transfers and other native actions, every refusal and overflow among them, both give the same
included and refused transactions, refusal messages, writes, undo records and state root."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chain.controller import Chain
from chain.core.block_transition import Execution, execute_transactions
from chain.core.consensus.block import SignedBlock
from chain.core.execution import engine
from chain.core.execution.actions import Action, Stake, Transfer, Unstake, VoteProducer
from chain.core.execution.state import decode_account
from chain.core.execution.state_hash import StateHash
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives import schema
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.errors import InvalidBlock, TransactionError
from chain.core.primitives.types import MAX_AMOUNT, AccountName, PublicKey
from chain.storage.txfilter import TxFilter
from genesis.testing import DevNet

pytestmark = pytest.mark.skipif(not engine.available(), reason="the compiled core is not built")

USERS = ("alice", "bob", "carol")
NAMES = (*USERS, "nobody")  # nobody has no account
A, B = AccountName("alice"), AccountName("bob")


class Reader:
    """A chain's committed state with some balances set by the test (near the overflow), and
    bob's stake unbonded, half of it due (the settle path); ``applied`` transactions are in
    an earlier block (its id list and the transaction index), and with ``filtered`` the
    store's id filter (``chain.storage.txfilter``) is built from the id lists, as a store
    opening does."""

    def __init__(
        self,
        chain: Chain,
        balances: dict[str, int],
        applied: list[SignedTransaction] = (),  # type: ignore[assignment]
        filtered: bool = False,
    ) -> None:
        self.data = dict(chain.store.iterate(b"", b"\xff"))
        for name, balance in balances.items():
            key = schema.account_key(name)
            self.data[key] = decode_account(self.data[key])._replace(balance=balance).encode()
        key = schema.account_key("bob")
        due = ((0, 7), (2**32 - 1, 9))
        self.data[key] = decode_account(self.data[key])._replace(unbonding=due).encode()
        for stx in applied:
            self.data[schema.tx_index_key(stx.id)] = (1).to_bytes(8, "big")
            entry = schema.tx_block_value([(stx.tx.expiration, stx.id)])
            self.data[schema.tx_block_key(stx.tx.expiration, 1) + stx.id[:1]] = entry
        self._hash = chain.store.state_hash()
        self.tx_filter: TxFilter | None = None
        if filtered:
            add = engine.filter_adder()
            assert add is not None
            lists = (v for k, v in self.data.items() if k.startswith(schema.TX_BLOCK))
            self.tx_filter = TxFilter.of_entries(lists, add)

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def iterate(
        self, start: bytes, stop: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        for key in sorted((k for k in self.data if start <= k < stop), reverse=reverse):
            yield key, self.data[key]

    def state_hash(self) -> StateHash:
        return self._hash


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[DevNet, Chain]:
    """A one-producer dev chain with a block on it, whose unbonding delay is 0 (stake
    unstaked in a block settles in the same block: the settle path runs)."""
    net = DevNet.create(unbond_delay_s=0, max_tx_bytes=400)
    chain = net.open(Path(tmp_path_factory.mktemp("engine")) / "chain")
    chain.push_block(net.produce(chain), int(time.time() * 1000))
    return net, chain


amounts = st.one_of(
    st.integers(1, 20),
    st.integers(1, 10**6),
    st.integers(10**10, 10**12),  # more than a dev account holds
    st.sampled_from([MAX_AMOUNT, MAX_AMOUNT - 1, 2**63, 2**64 - 1]),  # past the bounds
)
names = st.sampled_from(NAMES)


def _action(draw: st.DrawFn) -> Action:
    kind = draw(st.sampled_from(["transfer"] * 6 + ["stake", "unstake", "vote"]))
    who = AccountName(draw(names))
    if kind == "transfer":
        memo = draw(st.sampled_from(["", "m", "x" * 400]))  # the last is oversized
        return Transfer(who, AccountName(draw(names)), draw(amounts), memo)
    if kind == "stake":
        return Stake(who, draw(amounts))
    if kind == "unstake":
        return Unstake(who, draw(amounts))
    return VoteProducer(who, (AccountName(draw(st.sampled_from(["producera", "nobody"]))),))


@st.composite
def blocks(draw: st.DrawFn) -> list[tuple[str, list[Action], int, str]]:
    """Transactions as (signers' choice, actions, expiration offset, TaPoS choice)."""
    out = []
    for _ in range(draw(st.integers(1, 12))):
        actions = [_action(draw) for _ in range(draw(st.sampled_from([1, 1, 1, 1, 2])))]
        signing = draw(st.sampled_from(["actor"] * 8 + ["other", "extra", "none"]))
        expiry = draw(st.sampled_from([600] * 8 + [-10_000, 10**6]))
        tapos = draw(st.sampled_from(["head"] * 9 + ["bad"]))
        out.append((signing, actions, expiry, tapos))
    return out


def _sign(
    net: DevNet, chain: Chain, plan: tuple[str, list[Action], int, str]
) -> tuple[SignedTransaction, frozenset[PublicKey]]:
    signing, actions, expiry, tapos = plan
    actor = actions[0].actors()[0]
    key = net.keys.get(actor, net.keys["alice"])
    signers = {
        "actor": [key],
        "other": [net.keys["carol" if actor != "carol" else "bob"]],
        "extra": [key, net.keys["bob" if actor != "bob" else "carol"]],
        "none": [],
    }[signing]
    ref_num, ref_prefix = tapos_of(chain.head.id)
    if tapos == "bad":
        ref_prefix ^= 1
    tx = Transaction(int(time.time()) + expiry, ref_num, ref_prefix, tuple(actions))
    stx = SignedTransaction.sign(tx, chain.chain_id, signers)
    return stx, frozenset(PrivateKey.public_key.__get__(k) for k in signers)


def _run(
    chain: Chain,
    reader: Reader,
    txs: list[tuple[SignedTransaction, frozenset[PublicKey]]],
    **kw: bool,
) -> Execution | str:
    try:
        return execute_transactions(
            reader,
            chain.head,
            chain.head.slot + 1,
            txs,
            params=chain.params,
            **kw,  # type: ignore[arg-type]
        )
    except InvalidBlock as err:
        return f"{type(err).__name__}: {err}"


def _same(a: Execution | str, b: Execution | str) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    assert [t.id for t in a.included] == [t.id for t in b.included]
    assert a.failed == b.failed
    assert a.changes == b.changes
    assert dict(a.originals) == dict(b.originals)
    assert dict(a.written) == dict(b.written)
    assert a.state_root == b.state_root


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    plans=blocks(),
    dups=st.lists(st.integers(0, 11), max_size=3),
    earlier=st.lists(st.integers(0, 11), max_size=3),
    rich=st.sampled_from([{}, {"bob": MAX_AMOUNT - 5}, {"alice": 0}]),
)
def test_both_engines_agree_on_random_blocks(
    world: tuple[DevNet, Chain],
    plans: list[tuple[str, list[Action], int, str]],
    dups: list[int],
    earlier: list[int],
    rich: dict[str, int],
) -> None:
    """Building, validating strictly and validating lightly, the compiled core (with the
    store's id filter and without) and the reference give the same transactions in and out,
    the same refusal (name and message), writes, undo record and state root; also for
    replays within the block and of transactions an earlier block applied."""
    net, chain = world
    was = engine.name() == engine.NATIVE
    txs = [_sign(net, chain, plan) for plan in plans]
    txs += [txs[i % len(txs)] for i in dups]  # replays of earlier transactions of the block
    applied = [txs[i % len(txs)][0] for i in earlier]
    try:
        for kw in ({"strict": False}, {"strict": True}, {"strict": True, "check_auth": False}):
            engine.select(False)
            reference = _run(chain, Reader(chain, rich, applied), txs, **kw)
            engine.select(True)
            for filtered in (False, True):
                _same(_run(chain, Reader(chain, rich, applied, filtered), txs, **kw), reference)
    finally:
        engine.select(was)


def _history(net: DevNet, path: Path, rounds: int) -> tuple[list[SignedBlock], list[SignedBlock]]:
    """Blocks of transfers, stakes, unstakes and votes built on one chain (some refused at
    admission, as a producer would), then two branches from its head: one block, and two
    blocks at later slots, which fork choice prefers."""
    chain = net.open(path / "maker")
    trunk: list[SignedBlock] = []
    for i in range(rounds):
        actions: list[Action] = [
            Transfer(AccountName("alice"), AccountName("bob"), 1 + i, str(i)),
            Transfer(AccountName("bob"), AccountName("carol"), 2 + i),
            Stake(AccountName("carol"), 3),
            Unstake(AccountName("carol"), 1),
            VoteProducer(AccountName("carol"), (AccountName("producera"),)),
            Transfer(AccountName("carol"), AccountName("alice"), 10**15),  # refused
        ]
        for action in actions:
            with contextlib.suppress(TransactionError):
                chain.admit_transaction(net.tx(chain, action), int(time.time() * 1000))
        block = net.produce(chain)
        chain.push_block(block, int(time.time() * 1000))
        trunk.append(block)
    slot = chain.head.slot
    chain.admit_transaction(net.tx(chain, Transfer(A, B, 5)), int(time.time() * 1000))
    lone = net.produce(chain, slot + 1)
    other = net.open(path / "other")
    for block in trunk:
        other.push_block(block, int(time.time() * 1000))
    longer = []
    for n in (2, 3):
        other.admit_transaction(net.tx(other, Transfer(B, A, n)), int(time.time() * 1000))
        block = net.produce(other, slot + n)
        other.push_block(block, int(time.time() * 1000))
        longer.append(block)
    return [*trunk, lone], longer


def test_replays_with_a_fork_switch_leave_equal_stores(tmp_path: Path) -> None:
    """A generated history replayed on one chain per engine, with a fork switch that undoes
    a block, leaves the two stores equal byte for byte: state, undo records, receipts and
    indexes."""
    net = DevNet.create(producers=3, unbond_delay_s=0)  # LIB trails: the switch can undo
    trunk, longer = _history(net, tmp_path, 6)
    dumps = []
    was = engine.name() == engine.NATIVE
    try:
        for native in (False, True):
            engine.select(native)
            chain = net.open(tmp_path / engine.name())
            for block in trunk:
                chain.push_block(block, int(time.time() * 1000))
            for block in longer:
                chain.push_block(block, int(time.time() * 1000))
            assert chain.head.id == longer[-1].id
            dumps.append(dict(chain.store.iterate(b"", b"\xff")))
    finally:
        engine.select(was)
    assert dumps[0] == dumps[1]
