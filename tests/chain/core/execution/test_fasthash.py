"""The compiled commitment (``_fasthash``) and the Python reference compute the same thing:
for random change lists, ``before`` maps, keys of up to 300 bytes and memo bounds, both give
the same lanes and leave the same memo, call after call, sum entries alike, and encode a
view's changes (accounts and producers of every shape) to the same bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chain.core.execution import engine, state_hash
from chain.core.execution.state import Account, Producer, StateView
from chain.core.execution.state_hash import _BATCH, STATE_HASH_BYTES, StateHash

pytestmark = pytest.mark.skipif(
    not engine.available(), reason="the compiled commitment is not built"
)

# Short keys, and keys about the 256 bytes where the length prefix stops being looked up.
keys = st.one_of(st.binary(max_size=6), st.binary(min_size=250, max_size=300))
# Few values, so that a later call's old value is often one an earlier call put in (a memo
# hit); now and then a bytearray, which both sides hash as its bytes.
values = st.one_of(
    st.none(),
    st.sampled_from([b"", b"a", b"b", b"ab" * 40]),
    st.binary(max_size=8),
    st.binary(max_size=4).map(lambda b: cast(bytes, bytearray(b))),
)
Change = tuple[bytes, bytes | None]
Call = tuple[list[Change], dict[bytes, bytes | None]]


@st.composite
def calls(draw: st.DrawFn) -> list[Call]:
    """Calls of ``moved`` over one pool of keys: each a change list (a key may come twice)
    and a ``before`` value for every key, old == new among them; some of more than a batch
    of elements."""
    pool = draw(st.lists(keys, min_size=1, max_size=2 * _BATCH + 8, unique=True))
    made: list[Call] = []
    for _ in range(draw(st.integers(1, 5))):
        changed = draw(st.lists(st.sampled_from(pool), max_size=3 * _BATCH))
        changes = [(k, draw(values)) for k in changed]
        before = {k: draw(values) for k in pool}
        made.append((changes, before))
    return made


@contextmanager
def _engine(native: bool) -> Iterator[None]:
    was = engine.name() == engine.NATIVE
    engine.select(native)
    try:
        yield
    finally:
        engine.select(was)


def _replay(
    native: bool, start: bytes, made: list[Call]
) -> list[tuple[bytes, list[tuple[bytes, bytes]]]]:
    """Each call's lanes and the memo after it, from an empty memo."""
    memo = state_hash._scratch.memo
    memo.clear()
    seen = []
    current = StateHash.from_bytes(start)
    with _engine(native):
        for changes, before in made:
            was = current.to_bytes()
            moved = current.moved(changes, before)
            assert current.to_bytes() == was  # a new hash; the old one unchanged
            seen.append((moved.to_bytes(), list(memo.items())))
            current = moved
    memo.clear()
    return seen


@settings(max_examples=120, deadline=None)
@given(
    start=st.binary(min_size=STATE_HASH_BYTES, max_size=STATE_HASH_BYTES),
    made=calls(),
    bound=st.one_of(st.just(state_hash._MEMO), st.integers(0, 12)),
)
def test_both_move_the_lanes_and_the_memo_alike(start: bytes, made: list[Call], bound: int) -> None:
    """Call after call, the compiled ``moved`` gives the reference's lanes bit for bit and
    leaves the memo with the same elements in the same order, also with a bound small enough
    that the oldest are dropped."""
    with mock.patch.object(state_hash, "_MEMO", bound):
        native = _replay(True, start, made)
        reference = _replay(False, start, made)
    assert native == reference
    assert all(len(memo) <= bound for _, memo in native)


def test_a_memo_hit_is_served_and_the_result_stays_exact() -> None:
    """A key rewritten by the next call has its old element taken from the memo (the entry
    leaves it) and the lanes equal the new state's, computed from scratch."""
    first = {f"k{i:03}".encode(): b"v1" for i in range(3 * _BATCH + 5)}
    second = {k: b"v2" for k in first}
    memo = state_hash._scratch.memo
    memo.clear()
    with _engine(True):
        moved = StateHash.empty().moved(sorted(first.items()), dict.fromkeys(first))
        assert len(memo) == len(first)
        moved = moved.moved(sorted(second.items()), first)
        assert all(entry.endswith(b"v2") for entry in memo)
        assert moved == StateHash.of(second.items())
    with _engine(False):
        assert moved == StateHash.of(second.items())
    memo.clear()


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(keys, st.binary(max_size=40), max_size=3 * _BATCH))
def test_both_sum_entries_alike(entries: dict[bytes, bytes]) -> None:
    """``StateHash.of`` gives the same lanes from the compiled sum and the reference's."""
    with _engine(True):
        native = StateHash.of(entries.items()).to_bytes()
    with _engine(False):
        reference = StateHash.of(entries.items()).to_bytes()
    assert native == reference


def test_bor_native_0_leaves_the_commitment_to_the_reference() -> None:
    """With ``BOR_NATIVE=0`` a process has no compiled mover, summer or changes; without
    it, all three."""
    code = (
        "from chain.core.execution import engine;"
        "print(engine.state_mover() is None, engine.state_summer() is None,"
        " engine.changes_of() is None)"
    )
    for env, expected in (("0", "True True True"), ("1", "False False False")):
        done = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, engine.ENV: env},
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout.split() == expected.split()


class Name(str):
    """A str of another type: msgpack packs it as a str; the compiled encoder leaves it to
    msgpack."""


# Every boundary of msgpack's integer and length forms; the compiled encoder writes these.
ints = st.one_of(
    st.sampled_from([0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1]),
    st.integers(0, 2**64 - 1),
)
names = st.one_of(
    st.text(max_size=40),
    st.text(min_size=250, max_size=300),
    st.sampled_from([31, 32, 255, 256]).map(lambda n: "n" * n),  # where the forms change
)
blobs = st.one_of(st.binary(max_size=300), st.sampled_from([255, 256]).map(lambda n: b"b" * n))
# What it leaves to msgpack: negatives, past 64 bits, floats, a str of another type, a str
# that is not UTF-8 (an error from both), a str32 and a bin32 (past its buffer).
odd = st.one_of(
    st.integers(-(2**64), -1),
    st.integers(2**64, 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=8).map(Name),
    st.sampled_from(["\ud800", "a" * 70_000, b"k" * 70_000]),
)


def _sized(items: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    """Tuples of a few items, or about the 15 past which msgpack writes an array16."""
    sizes = st.sampled_from([0, 1, 2, 15, 16, 17])
    return sizes.flatmap(lambda n: st.lists(items, min_size=n, max_size=n).map(tuple))


def _account(fields: tuple[Any, ...]) -> Account:
    return Account(*fields)


def _producer(fields: tuple[Any, ...]) -> Producer:
    return Producer(*fields)


plain_accounts = st.tuples(
    names,
    blobs,
    ints,
    ints,
    _sized(st.tuples(ints, ints)),
    _sized(names),
)
plain_producers = st.tuples(names, blobs, names, st.booleans(), st.booleans(), ints)


@st.composite
def spoiled(draw: st.DrawFn, fields: st.SearchStrategy[tuple[Any, ...]]) -> tuple[Any, ...]:
    """Plain fields but one, which is odd."""
    made = list(draw(fields))
    made[draw(st.integers(0, len(made) - 1))] = draw(odd)
    return tuple(made)


records = st.one_of(
    plain_accounts.map(_account),
    plain_producers.map(_producer),
    spoiled(plain_accounts).map(_account),
    spoiled(plain_producers).map(_producer),
    st.none(),
    st.binary(max_size=20),
)


def _outcome(f: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "value", f()
    except Exception as err:  # the same refusal from both, for a str that is not UTF-8
        return "error", type(err)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.binary(min_size=1, max_size=12), records, max_size=24))
def test_both_encode_a_views_changes_alike(writes: dict[bytes, Any]) -> None:
    """The compiled ``changes`` gives the reference's list, in key order, byte for byte:
    accounts and producers of every field size msgpack writes differently (and those it
    leaves to msgpack), raw values and deletions; or the same error."""
    view = StateView({}.get)  # type: ignore[arg-type]  # never read: only writes here
    view.written().update(writes)
    with _engine(True):
        compiled = engine.changes_of()
    assert compiled is not None
    assert _outcome(lambda: compiled(view)) == _outcome(view.changes)
