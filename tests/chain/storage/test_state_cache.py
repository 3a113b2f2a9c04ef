"""The cache of committed accounts: it holds what blocks wrote, reads the rest through, and
never answers with a value the store no longer has (a popped block's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from chain.controller import Pushed
from chain.core.execution.actions import Transfer
from chain.core.execution.state import Account, StateView, decode_account
from chain.core.execution.state_hash import StateHash
from chain.core.primitives import schema
from chain.core.primitives.types import AccountName, PublicKey
from chain.storage.state_cache import CachedState
from chain.testing import now_ms, state_dump
from genesis.testing import DevNet

A, B, C = AccountName("alice"), AccountName("bob"), AccountName("carol")


class DictStore:
    """A store of raw values in a dict, counting reads."""

    def __init__(self, values: dict[bytes, bytes]) -> None:
        self.values = values
        self.reads = 0

    def get(self, key: bytes) -> bytes | None:
        self.reads += 1
        return self.values.get(key)

    def iterate(
        self, start: bytes, stop: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        chosen = sorted((k, v) for k, v in self.values.items() if start <= k < stop)
        yield from reversed(chosen) if reverse else chosen

    def state_hash(self) -> StateHash:
        return StateHash.empty()


def _account(name: str, balance: int) -> Account:
    return Account(AccountName(name), PublicKey(b"\x02" * 33), balance)


def test_accounts_written_are_read_from_memory_and_the_rest_from_the_store() -> None:
    """After a commit, a view reads the written accounts without touching the store (same raw
    bytes for the undo record), while other keys and deleted accounts go to the store."""
    alice, bob = _account("alice", 5), _account("bob", 7)
    ka, kb, kp = schema.account_key(A), schema.account_key(B), schema.producer_key("p")
    store = DictStore({ka: alice.encode(), kb: bob.encode(), kp: b"producer"})
    cache = CachedState(store)
    cache.committed([(ka, alice.encode()), (kb, None), (kp, b"producer")], {ka: alice, kb: None})
    del store.values[kb]

    view = StateView(cache)
    assert view.account(A) == alice and store.reads == 0, "held, decoded"
    assert view.originals()[ka] == alice.encode()
    assert view.account(B) is None and store.reads == 1, "a deleted account is not held"
    assert cache.get(kp) == b"producer" and store.reads == 2, "only accounts are held"


def test_past_the_limit_the_half_held_longest_goes() -> None:
    """The cache is bounded: past the limit the accounts held longest are dropped, down to
    half the limit, and the newest stay."""
    cache = CachedState(DictStore({}), limit=4)
    accounts = [_account(f"a{n}", 1) for n in range(5)]
    keys = [schema.account_key(a.name) for a in accounts]
    for key, account in zip(keys, accounts, strict=True):
        cache.committed([(key, account.encode())], {key: account})
    assert len(cache) == 2
    assert [cache.cached(k) is not None for k in keys] == [False, False, False, True, True]


def test_after_a_fork_switch_blocks_build_on_the_rewound_accounts(tmp_path: Path) -> None:
    """A node that pops its own block (alice pays bob) for a better branch forgets what that
    block wrote: its next block, with the requeued payment, builds on the rewound balances and
    a peer accepts it (stale cached balances would give another state root)."""
    net = DevNet.create(3, blocks_per_turn=1)
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    for _ in range(3):
        y.push_block(net.produce(x), now_ms())
    base_slot = x.head.slot
    before = y.account(B).balance
    to_bob = net.tx(x, Transfer(A, B, 100))
    x.admit_transaction(to_bob, now_ms())
    x_block = net.produce(x, base_slot + 1)
    y_blocks = [net.produce(y, base_slot + 2 + i) for i in range(3)]
    x.take_events()
    for b in y_blocks:
        x.push_block(b, now_ms())
    assert x.take_events().popped == [x_block], "x switched to y's branch"
    assert x.account(B).balance == before

    block = net.produce(x)
    assert [t.id for t in block.transactions] == [to_bob.id], "the requeued payment"
    assert y.push_block(block, now_ms()) is Pushed.APPLIED
    assert state_dump(x) == state_dump(y)
    raw = x.store.get(schema.account_key(B))
    assert raw is not None and decode_account(raw).balance == before + 100
