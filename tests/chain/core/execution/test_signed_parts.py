"""``decode_signed_parts`` (the RPC's decoder of packed_trx and signature bytes) gives what
``decode_signed_transaction`` gives for the same parts packed together: the same transaction,
or the same refusal."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from chain.core.execution.actions import Stake, Transfer
from chain.core.execution.transaction import (
    SignedTransaction,
    Transaction,
    decode_signed_parts,
    decode_signed_transaction,
)
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.encoding import pack
from chain.core.primitives.errors import EncodingError
from chain.core.primitives.types import AccountName

KEY = PrivateKey(b"\x07" * 32)
CHAIN = b"c" * 32


Outcome = tuple[object, ...]


def outcome(decode: Callable[[], SignedTransaction]) -> Outcome:
    """What a decoding gave: the transaction's fields, or the error's type and text."""
    try:
        stx = decode()
    except EncodingError as err:
        return ("refused", type(err), str(err))
    return (stx.tx, stx.packed, stx.signatures, stx.id)


def both(packed: bytes, signatures: list[bytes]) -> tuple[Outcome, Outcome]:
    old = outcome(lambda: decode_signed_transaction(pack([packed, signatures])))
    new = outcome(lambda: decode_signed_parts(packed, list(signatures)))
    return old, new


def valid() -> SignedTransaction:
    transfer = Transfer(AccountName("alice"), AccountName("bob"), 3)
    return SignedTransaction.sign(Transaction(100, 1, 2, (transfer,)), CHAIN, [KEY])


def test_a_valid_transaction_decodes_the_same() -> None:
    """A well-formed signed transaction decodes to the same transaction either way."""
    stx = valid()
    old, new = both(stx.packed, list(stx.signatures))
    assert old == new
    assert new == (stx.tx, stx.packed, stx.signatures, stx.id)


def test_a_non_canonical_transaction_is_refused_the_same() -> None:
    """A transaction with an integer in a wider form than needed is refused, the same way."""
    packed = Transaction(5, 0, 0, (Stake(AccountName("alice"), 1),)).pack()
    padded = b"\x94\xce\x00\x00\x00\x05" + packed[2:]
    old, new = both(padded, [KEY.sign(b"\x00" * 32)])
    assert old == new
    assert new[0] == "refused" and "canonical" in str(new[2])


def test_bad_signature_lists_are_refused_the_same() -> None:
    """A signature of the wrong size and too many signatures are refused alike (and no
    signature at all, which decoding leaves to the signer check, passes alike)."""
    stx = valid()
    sig = stx.signatures[0]
    assert both(stx.packed, [])[0] == both(stx.packed, [])[1]
    for sigs in ([sig[:64]], [sig] * 17, [sig, sig + b"\x00"]):
        old, new = both(stx.packed, sigs)
        assert old == new, sigs
        assert new[0] == "refused", sigs


@given(st.binary(max_size=200), st.data())
@settings(max_examples=200)
def test_mutated_and_random_bytes_decode_or_fail_the_same(junk: bytes, data: st.DataObject) -> None:
    """Random packed bytes, and a valid transaction with one byte changed, give the same result
    (transaction or refusal) either way."""
    stx = valid()
    raw = bytearray(stx.packed)
    raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    for packed in (junk, bytes(raw)):
        old, new = both(packed, list(stx.signatures))
        assert old == new
