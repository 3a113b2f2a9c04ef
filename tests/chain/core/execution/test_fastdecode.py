"""The compiled transaction decoder and the reference read every block the same: for valid
transfers, values at every encoding boundary, non-canonical encodings, mutated bytes and
other shapes, both give the same transactions (field types included) or the same error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chain.core.consensus.block import decode_transactions
from chain.core.execution import engine
from chain.core.execution.actions import MAX_MEMO, Stake, Transfer
from chain.core.execution.transaction import (
    SignedTransaction,
    Transaction,
    decode_signed_parts,
    decoded_kept,
    signed_transaction_from_wire,
)
from chain.core.primitives.crypto import SIGNATURE_SIZE
from chain.core.primitives.encoding import pack
from chain.core.primitives.errors import EncodingError
from chain.core.primitives.types import MAX_AMOUNT, AccountName

pytestmark = pytest.mark.skipif(not engine.available(), reason="the compiled core is not built")

U32 = 2**32 - 1
SIG = b"\x01" * SIGNATURE_SIZE
# Each integer format's first and last value, and those just outside the fields' bounds.
EDGES = (0, 1, 127, 128, 255, 256, 65535, 65536, U32, U32 + 1, MAX_AMOUNT, MAX_AMOUNT + 1)


@pytest.fixture(autouse=True)
def compiled() -> Iterator[None]:
    """The compiled decoder selected (also when the suite runs with BOR_NATIVE=0)."""
    was = engine.name() == engine.NATIVE
    engine.select(True)
    yield
    engine.select(was)


def outcome(decode: Any, wire: list[Any]) -> tuple[str, str]:
    try:
        return "ok", repr(decode(wire))  # repr: a bool where an int belongs would show
    except EncodingError as err:
        return "refused", str(err)


def both(wire: list[Any]) -> tuple[str, str]:
    """The reference's outcome, after checking that the compiled decoder's is the same,
    called directly and as decode_block calls it."""
    fast = engine.decoder()
    assert fast is not None
    ref = outcome(lambda w: tuple(signed_transaction_from_wire(t) for t in w), wire)
    assert outcome(decode_transactions, wire) == ref
    compiled = outcome(lambda w: fast(w, decoded_kept(), signed_transaction_from_wire), wire)
    assert compiled == ref
    return ref


def uints(hi: int) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([e for e in EDGES if e <= hi]), st.integers(0, hi))


# Each field valid, or (one field a transaction) not: ints out of bounds or not ints, names
# too long, empty, ending in '.', or not ASCII, memos too long, values of other types.
VALID: dict[str, st.SearchStrategy[Any]] = {
    "expiration": uints(U32),
    "ref_num": uints(0xFFFF),
    "ref_prefix": uints(U32),
    "code": st.just(1),
    "sender": st.from_regex(r"[a-z1-5.]{0,11}[a-z1-5]", fullmatch=True),
    "recipient": st.from_regex(r"[a-z1-5.]{0,11}[a-z1-5]", fullmatch=True),
    "amount": st.one_of(st.sampled_from(EDGES[1:-1]), st.integers(1, MAX_AMOUNT)),
    "memo": st.one_of(
        st.text(max_size=MAX_MEMO),
        st.text("aé€😀", min_size=MAX_MEMO - 2, max_size=MAX_MEMO),  # 1-4 bytes a character
        st.text("x", min_size=30, max_size=34),  # fixstr or str8
    ),
}
OTHER: st.SearchStrategy[Any] = st.sampled_from(
    [-1, -(2**63), 2**64 - 1, True, False, None, "1", 1.5, b"a", []]
)
NAMES = st.one_of(st.text("abz15.", max_size=13), st.text(min_size=1, max_size=3), OTHER)
INVALID: dict[str, st.SearchStrategy[Any]] = {
    "expiration": st.one_of(st.just(U32 + 1), OTHER),
    "ref_num": st.one_of(st.sampled_from([65536, U32]), OTHER),
    "ref_prefix": st.one_of(st.just(U32 + 1), OTHER),
    "code": st.one_of(st.sampled_from([0, 2, 3, 127]), OTHER),
    "sender": st.one_of(st.sampled_from(["alice.", "", "abcdefghijklm", "Alice"]), NAMES),
    "recipient": st.one_of(st.sampled_from(["bob.", "b6", "abcdefghijklm"]), NAMES),
    "amount": st.one_of(st.sampled_from([0, MAX_AMOUNT + 1]), OTHER),
    "memo": st.one_of(st.text(min_size=MAX_MEMO + 1, max_size=MAX_MEMO + 3), OTHER),
}


@st.composite
def transfer_txs(draw: st.DrawFn) -> bytes:
    """A one-transfer transaction's bytes, valid or with one field that is not."""
    bad = draw(st.sampled_from([None, None, *VALID]))
    value = {f: draw(INVALID[f] if f == bad else VALID[f]) for f in VALID}
    action = [value[f] for f in ("code", "sender", "recipient", "amount", "memo")]
    return pack([value["expiration"], value["ref_num"], value["ref_prefix"], [action]])


# Each integer form's head, its width, and the longer forms that can hold the same value.
UINTS = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}


def longer(packed: bytes, at: int) -> list[bytes]:
    """``packed`` with the value whose head is the byte ``at`` (an int or a string) written
    in each longer msgpack form: the same value, not canonical."""
    head, rest = packed[at], packed[at + 1 :]
    if head < 0x80 or head in UINTS:
        width = UINTS.get(head, 0)
        value = head if width == 0 else int.from_bytes(rest[:width], "big")
        rest = rest[width:]
        forms = [bytes([h]) + value.to_bytes(n, "big") for h, n in UINTS.items() if n > width]
    elif 0xA0 <= head <= 0xBF:
        value = head - 0xA0
        forms = [b"\xd9" + value.to_bytes(1, "big"), b"\xda" + value.to_bytes(2, "big")]
    elif head == 0xD9 and rest:
        value, rest = rest[0], rest[1:]
        forms = [b"\xda" + value.to_bytes(2, "big")]
    else:
        return []
    return [packed[:at] + form + rest for form in forms]


@settings(max_examples=300, deadline=None)
@given(transfer_txs(), st.data())
def test_transfers_decode_alike_and_refuse_alike(packed: bytes, data: st.DataObject) -> None:
    """Every value at its boundaries, canonical or written longer, truncated or extended."""
    at = data.draw(st.integers(0, len(packed) - 1))
    variants = [packed, packed[:at], packed + b"\x00"]
    for head in range(min(len(packed), 48)):  # the fields before a long memo's bytes
        variants += longer(packed, head)
    flipped = bytearray(packed)
    flipped[at] ^= 1 << data.draw(st.integers(0, 7))
    variants.append(bytes(flipped))
    for variant in variants:
        both([[variant, [SIG]]])


def parts_outcome(native: bool, packed: Any, signatures: Any) -> tuple[str, str]:
    """``decode_signed_parts`` (the RPC's decoder) on one engine, its memo left as found."""
    kept = decoded_kept()
    known = packed in kept if type(packed) is bytes else True
    engine.select(native)
    try:
        return outcome(lambda _: decode_signed_parts(packed, signatures), [])
    finally:
        engine.select(True)
        if not known:
            kept.pop(packed, None)


@settings(max_examples=100, deadline=None)
@given(transfer_txs(), st.sampled_from([[SIG], [SIG, SIG], [], [SIG[:-1]], SIG, [b"x" * 65]]))
def test_pushed_parts_decode_alike_and_refuse_alike(packed: bytes, sigs: Any) -> None:
    """A push's packed transaction and signatures: the same transaction or error from both."""
    for variant in (packed, packed + b"\x00", packed[:-1], *longer(packed, 0)):
        assert parts_outcome(True, variant, sigs) == parts_outcome(False, variant, sigs)


def test_a_valid_transfer_is_decoded_by_the_compiled_decoder_itself() -> None:
    """The fast path is taken: no call reaches the reference for a plain transfer."""
    fast = engine.decoder()
    assert fast is not None
    tx = Transaction(U32, 65535, 65536, (Transfer(AccountName("alice"), AccountName("b"), 5),))
    packed = tx.pack()

    def reference(item: Any) -> SignedTransaction:
        raise AssertionError("the reference was asked")

    (stx,) = fast([[packed, [SIG]]], {}, reference)
    assert (
        stx == SignedTransaction(tx, packed, (SIG,))
        and stx.id == SignedTransaction(tx, packed, (SIG,)).id
    )


def test_other_shapes_go_to_the_reference() -> None:
    """Several actions, another action, no or two signatures, a short signature, not a list:
    the same transactions or the same error at the same place."""
    transfer = Transfer(AccountName("alice"), AccountName("bob"), 7, "hi")
    one = Transaction(100, 1, 2, (transfer,)).pack()
    two = Transaction(100, 1, 2, (transfer, transfer)).pack()
    stake = Transaction(100, 1, 2, (Stake(AccountName("alice"), 9),)).pack()
    assert both([[one, [SIG]], [two, [SIG]], [stake, [SIG, SIG]], [one, []]])[0] == "ok"
    for bad in ([one, [SIG[:-1]]], [one], (one, [SIG]), [bytearray(one), [SIG]], [one, SIG]):
        assert both([[one, [SIG]], bad])[0] == "refused"


def test_a_kept_decoding_is_used_as_the_reference_uses_it() -> None:
    """A transaction decoded on its own lately is taken from the memo, whatever its shape
    (here one that its bytes do not say, to see which was used)."""
    transfer = Transfer(AccountName("alice"), AccountName("bob"), 7)
    tx = Transaction(100, 1, 2, (transfer, transfer))
    packed = Transaction(100, 1, 2, (transfer,)).pack()
    kept = decoded_kept()
    kept[packed] = tx
    try:
        (stx,) = decode_transactions([[packed, [SIG]]])
        assert stx.tx is tx and both([[packed, [SIG]]])[0] == "ok"
    finally:
        del kept[packed]


def test_the_reference_alone_when_not_selected() -> None:
    """BOR_NATIVE=0 (``select(False)``) leaves no compiled decoder in the way."""
    try:
        engine.select(False)
        assert engine.decoder() is None
    finally:
        engine.select(True)
    assert engine.decoder() is not None
