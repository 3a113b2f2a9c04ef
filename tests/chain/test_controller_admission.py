"""Admission refuses, by name, what other nodes could not decode: an in-process caller builds
transactions as objects, and every limit of ``decode_transaction`` must hold for them too."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.core.consensus.block import decode_block
from chain.core.execution.actions import MAX_MEMO, Transfer
from chain.core.execution.transaction import (
    MAX_ACTIONS,
    MAX_SIGNATURES,
    SignedTransaction,
    Transaction,
)
from chain.core.primitives.errors import MalformedTransaction
from chain.core.primitives.types import AccountName
from chain.testing import now_ms
from genesis.testing import DevNet

A, B = AccountName("alice"), AccountName("bob")


@pytest.fixture
def net() -> DevNet:
    return DevNet.create(1)


def _transfers(count: int) -> list[Transfer]:
    return [Transfer(A, B, 1 + n) for n in range(count)]


def test_more_actions_than_peers_decode_are_refused(net: DevNet, tmp_path: Path) -> None:
    """A transaction of MAX_ACTIONS + 1 actions is refused as malformed, naming the field."""
    chain = net.open(tmp_path / "c")
    stx = net.tx(chain, *_transfers(MAX_ACTIONS + 1))
    with pytest.raises(MalformedTransaction, match=r"transaction\.actions"):
        chain.admit_transaction(stx, now_ms())
    assert stx.id not in chain.mempool


def test_the_largest_transaction_peers_decode_makes_a_block_they_decode(
    net: DevNet, tmp_path: Path
) -> None:
    """MAX_ACTIONS actions are admitted, and the block holding them decodes and applies on
    another node."""
    chain, other = net.open(tmp_path / "c"), net.open(tmp_path / "o")
    stx = net.tx(chain, *_transfers(MAX_ACTIONS))
    chain.admit_transaction(stx, now_ms())
    block = net.produce(chain)
    assert [t.id for t in block.transactions] == [stx.id]
    other.push_block(decode_block(block.encode()), now_ms())
    assert other.head.id == block.id


def test_a_field_longer_than_decoding_allows_is_refused(net: DevNet, tmp_path: Path) -> None:
    """A memo one character past MAX_MEMO is refused as malformed, naming the field."""
    chain = net.open(tmp_path / "c")
    stx = net.tx(chain, Transfer(A, B, 1, "m" * (MAX_MEMO + 1)))
    with pytest.raises(MalformedTransaction, match=r"transfer\.memo"):
        chain.admit_transaction(stx, now_ms())


def test_more_signatures_than_peers_decode_are_refused(net: DevNet, tmp_path: Path) -> None:
    """MAX_SIGNATURES + 1 signatures are refused as malformed before any is recovered."""
    chain = net.open(tmp_path / "c")
    stx = net.tx(chain, Transfer(A, B, 1))
    many = SignedTransaction(stx.tx, stx.packed, stx.signatures * (MAX_SIGNATURES + 1))
    with pytest.raises(MalformedTransaction, match="signatures"):
        chain.admit_transaction(many, now_ms())


def test_a_signature_of_the_wrong_size_is_refused(net: DevNet, tmp_path: Path) -> None:
    """A signature one byte short is refused as malformed."""
    chain = net.open(tmp_path / "c")
    stx = net.tx(chain, Transfer(A, B, 1))
    short = SignedTransaction(stx.tx, stx.packed, (stx.signatures[0][:-1],))
    with pytest.raises(MalformedTransaction, match="signature"):
        chain.admit_transaction(short, now_ms())


def test_packed_bytes_that_say_something_else_are_refused(net: DevNet, tmp_path: Path) -> None:
    """Packed bytes of another transaction than the objects held are refused: peers would
    apply the bytes, this node the objects."""
    chain = net.open(tmp_path / "c")
    stx = net.tx(chain, Transfer(A, B, 1))
    other = Transaction(stx.tx.expiration, stx.tx.ref_block_num, stx.tx.ref_block_prefix,
                        (Transfer(A, B, 2),))  # fmt: skip
    mixed = SignedTransaction(other, stx.packed, stx.signatures)
    with pytest.raises(MalformedTransaction, match="do not encode"):
        chain.admit_transaction(mixed, now_ms())


def test_a_batch_refuses_only_its_malformed_transactions(net: DevNet, tmp_path: Path) -> None:
    """In one batch, a malformed transaction is refused and the others beside it admitted."""
    chain = net.open(tmp_path / "c")
    good = net.tx(chain, Transfer(A, B, 1))
    bad = net.tx(chain, *_transfers(MAX_ACTIONS + 1))
    also_good = net.tx(chain, Transfer(A, B, 2))
    errors = chain.admit_transactions([good, bad, also_good], now_ms())
    assert errors[0] is None and errors[2] is None
    assert isinstance(errors[1], MalformedTransaction)
    assert good.id in chain.mempool and also_good.id in chain.mempool
