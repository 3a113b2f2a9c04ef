"""Codec round trips (Hypothesis) and refusal of non-canonical or malformed bytes."""

from __future__ import annotations

import contextlib
import dataclasses
import threading

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chain.core.consensus.block import BlockHeader, ProducerKey, Schedule, SignedBlock, decode_block
from chain.core.execution.actions import (
    Action,
    NewAccount,
    Stake,
    Transfer,
    VoteProducer,
    action_from_json,
    action_to_json,
)
from chain.core.execution.transaction import (
    SignedTransaction,
    Transaction,
    decode_signed_transaction,
)
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.encoding import pack
from chain.core.primitives.errors import EncodingError
from chain.core.primitives.merkle import merkle_root
from chain.core.primitives.types import AccountName, BlockId, BlockNum, PublicKey

KEY = PrivateKey(b"\x05" * 32)
PUB = KEY.public_key

names = st.from_regex(r"[a-z1-5]{1,11}[a-z1-5]", fullmatch=True).map(AccountName)
amounts = st.integers(min_value=1, max_value=2**62)
actions: st.SearchStrategy[Action] = st.one_of(
    st.builds(Transfer, names, names, amounts, st.text(max_size=40)),
    st.builds(NewAccount, names, names, st.just(PUB)),
    st.builds(Stake, names, amounts),
    st.builds(
        VoteProducer, names, st.lists(names, max_size=30).map(lambda x: tuple(sorted(set(x))))
    ),
)
transactions = st.builds(
    Transaction,
    st.integers(0, 2**32 - 1),
    st.integers(0, 0xFFFF),
    st.integers(0, 2**32 - 1),
    st.lists(actions, min_size=1, max_size=4).map(tuple),
)


@given(transactions)
def test_signed_transaction_round_trip(tx: Transaction) -> None:
    """A signed transaction decodes from its encoding to an equal value with the same id."""
    stx = SignedTransaction.sign(tx, b"c" * 32, [KEY])
    again = decode_signed_transaction(stx.encode())
    assert again == stx
    assert again.id == stx.id


@given(actions)
def test_action_json_round_trip(action: Action) -> None:
    """Every action survives its JSON form unchanged."""
    assert action_from_json(action_to_json(action)) == action


@given(st.lists(transactions, max_size=5), st.integers(1, 2**31), st.booleans())
@settings(max_examples=50)
def test_block_round_trip(txs: list[Transaction], num: int, with_schedule: bool) -> None:
    """A signed block, with or without a new schedule, decodes to an equal block whose id starts
    with its number, and encodes as the bytes it came from (a changed copy: as itself)."""
    stxs = tuple(SignedTransaction.sign(t, b"c" * 32, [KEY]) for t in txs)
    schedule = Schedule(3, (ProducerKey(AccountName("pa"), PublicKey(PUB)),))
    header = BlockHeader(
        BlockNum(num),
        BlockId(b"\x01" * 32),
        7,
        AccountName("pa"),
        2,
        merkle_root([t.id for t in stxs]),
        b"\x02" * 32,
        schedule if with_schedule else None,
    )
    block = SignedBlock.sign(header, stxs, b"c" * 32, KEY)
    data = block.encode()
    again = decode_block(data)
    assert again == block
    assert again.id[:4] == num.to_bytes(4, "big")
    assert again.encode() is data, "a decoded block keeps the bytes it came from"
    changed = dataclasses.replace(again, transactions=stxs[:-1])
    assert decode_block(changed.encode()).transactions == stxs[:-1], "a copy encodes itself"


@given(st.binary(max_size=300))
def test_random_bytes_never_escape_as_foreign_errors(data: bytes) -> None:
    """Random bytes given to either decoder decode or raise EncodingError, nothing else."""
    for decode in (decode_signed_transaction, decode_block):
        with contextlib.suppress(EncodingError):
            decode(data)


@given(transactions, st.data())
@settings(max_examples=200)
def test_mutated_transactions_decode_or_fail_cleanly(tx: Transaction, data: st.DataObject) -> None:
    """A signed transaction with one byte changed raises EncodingError or decodes to a value that
    re-encodes to exactly those bytes."""
    raw = bytearray(SignedTransaction.sign(tx, b"c" * 32, [KEY]).encode())
    index = data.draw(st.integers(0, len(raw) - 1))
    raw[index] = data.draw(st.integers(0, 255))
    try:
        decoded = decode_signed_transaction(bytes(raw))
    except EncodingError:
        return
    assert decoded.encode() == bytes(raw)  # whatever decodes is canonical


def test_non_canonical_integer_is_refused() -> None:
    """An integer packed in a wider msgpack form than needed is refused as non-canonical."""
    tx = Transaction(5, 0, 0, (Stake(AccountName("alice"), 1),))
    packed = tx.pack()
    # The same integer 5 as a uint32 instead of a fixint: valid msgpack, not canonical.
    padded = b"\x94\xce\x00\x00\x00\x05" + packed[2:]
    assert msgpack.unpackb(padded) == msgpack.unpackb(packed)
    try:
        decode_signed_transaction(msgpack.packb([padded, [KEY.sign(b"\x00" * 32)]]))
    except EncodingError as err:
        assert "canonical" in str(err)
    else:
        raise AssertionError("a non-canonical transaction was accepted")


def test_merkle_root_distinguishes_duplicated_leaf() -> None:
    """The Merkle root changes when the last leaf is duplicated and when two leaves swap places."""
    a, b, c = b"a" * 32, b"b" * 32, b"c" * 32
    assert merkle_root([a, b, c]) != merkle_root([a, b, c, c])
    assert merkle_root([a, b]) != merkle_root([b, a])


@given(st.builds(Transfer, names, names, amounts, st.text(max_size=40)), st.data())
@settings(max_examples=200)
def test_transfer_fast_path_agrees_with_the_generic_checks(
    transfer: Transfer, data: st.DataObject
) -> None:
    """For a transfer with one field replaced by junk, the fast decoder gives the same value or
    EncodingError as the generic field checks."""
    from chain.core.execution.actions import _SPECS, encode_action

    raw = encode_action(transfer)
    field = data.draw(st.integers(1, 4))
    raw[field] = data.draw(
        st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3), st.just("x" * 300))
    )
    cls, checks = _SPECS[Transfer.CODE]
    try:
        generic: object = cls(*[c(v, w) for (_, c, w), v in zip(checks, raw[1:], strict=True)])
    except EncodingError:
        generic = EncodingError
    try:
        from chain.core.execution.actions import decode_action

        fast: object = decode_action(raw)
    except EncodingError:
        fast = EncodingError
    assert fast == generic


def test_pack_matches_packb_from_several_threads_and_recovers_from_a_failed_pack() -> None:
    """The per-thread packer gives msgpack.packb's bytes on every thread, and an object it
    cannot pack leaves nothing behind for the next call."""
    objects = [[n, "name", b"\x00" * n, None, (1, (2,))] for n in range(200)]
    results: dict[int, list[bytes]] = {}

    def work(k: int) -> None:
        results[k] = [pack(o) for o in objects]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = [msgpack.packb(o, use_bin_type=True) for o in objects]
    assert all(results[k] == expected for k in range(4))
    with pytest.raises(TypeError):
        pack([1, object()])
    assert pack([1, 2]) == msgpack.packb([1, 2], use_bin_type=True)
