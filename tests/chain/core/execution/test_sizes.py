"""A block's size in bytes is a consensus rule (``max_block_bytes``): the producer fills a
block up to it and leaves the rest in the mempool, and a block over it is invalid."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from chain.controller import Chain
from chain.core.block_transition import process_block_header
from chain.core.consensus.block import MAX_SCHEDULE, BlockHeader, ProducerKey, Schedule, SignedBlock
from chain.core.consensus.qc import MAX_FINALIZERS, QcClaim, QuorumCertificate
from chain.core.execution.actions import Transfer
from chain.core.execution.sizes import BLOCK_ENVELOPE_BYTES, encoded_tx_size, min_block_bytes
from chain.core.execution.transaction import MAX_SIGNATURES, SignedTransaction, Transaction
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.errors import InvalidBlock, OversizedBlock
from chain.core.primitives.merkle import merkle_root
from chain.core.primitives.types import AccountName, BlockId, BlockNum
from chain.testing import now_ms
from genesis.testing import DevNet

A, B = AccountName("alice"), AccountName("bob")
# Room for six of the big transactions below (7.3 KB each) besides the envelope.
LIMIT = 64 * 1024
U32 = 2**32 - 1


def big_actions(n: int) -> tuple[Transfer, ...]:
    """Seven transfers, each with a memo of 256 four-byte characters: a transaction of about
    7.3 KB (the issue's "7 KiB memos-and-padding"); ``n`` makes the amounts unique."""
    memo = "\U0001f600" * 256
    return tuple(Transfer(A, B, 1 + n * 7 + i, memo) for i in range(7))


def big_tx(net: DevNet, chain: Chain, n: int) -> SignedTransaction:
    return net.tx(chain, *big_actions(n))


def test_encoded_tx_size_is_the_length_of_the_encoding() -> None:
    """``encoded_tx_size`` counts what a transaction adds to a block exactly, for every
    msgpack length class of its bytes and of its signature list."""
    tx = Transaction(0, 0, 0, big_actions(0))
    signature = PrivateKey.generate().sign(bytes(32))
    for packed_len in (10, 255, 256, 65_535, 65_536):
        for sigs in (0, 1, 15, 16):
            stx = SignedTransaction(tx, b"x" * packed_len, (signature,) * sigs)
            assert encoded_tx_size(stx) == len(stx.encode()), (packed_len, sigs)


def _name(i: int) -> AccountName:
    """A 12-character account name per ``i`` below 26 * 26."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return AccountName("producerzz" + letters[i // 26] + letters[i % 26])


def test_the_largest_envelope_fits_in_block_envelope_bytes() -> None:
    """A block with every field besides its transactions at its largest (a full schedule
    proposal, a QC claim, a QC signed by every finalizer, a transaction count that needs the
    longest list header) is smaller than BLOCK_ENVELOPE_BYTES, which the producer reserves."""
    keys = [PrivateKey.generate() for _ in range(2)]
    producers = tuple(ProducerKey(_name(i), keys[i % 2].public_key) for i in range(MAX_SCHEDULE))
    header = BlockHeader(
        num=BlockNum(U32),
        previous=BlockId(b"\xff" * 32),
        slot=U32,
        producer=AccountName("abcdefghijkl"),
        schedule_version=U32,
        tx_root=b"\xff" * 32,
        state_root=b"\xff" * 32,
        new_producers=Schedule(U32, producers),
        qc_claim=QcClaim(BlockNum(U32), True),
    )
    bits = b"\xff" * ((MAX_FINALIZERS + 7) // 8)
    signature = keys[0].sign(bytes(32))
    qc = QuorumCertificate(BlockId(b"\xff" * 32), bits, bits, (signature,) * MAX_FINALIZERS)
    block = SignedBlock.sign(header, (), bytes(32), keys[0], qc)
    longest_list_header = 5 - 1  # the empty list's header is 1 byte
    assert len(block.encode()) + longest_list_header < BLOCK_ENVELOPE_BYTES


def test_the_producer_fills_a_block_up_to_the_limit_and_leaves_the_rest(tmp_path: Path) -> None:
    """With 20 transactions of 7.3 KB pending and a 64 KiB limit, each block takes as many as
    fit in arrival order and stays within the limit; the rest stay pending and go into the
    next blocks until all 20 are in, and a peer accepts every such block."""
    net = DevNet.create(1, max_block_bytes=LIMIT)
    chain, peer = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    txs = [big_tx(net, chain, n) for n in range(20)]
    for stx in txs:
        chain.admit_transaction(stx, now_ms())
    included: list[SignedTransaction] = []
    sizes: list[int] = []
    while len(chain.mempool):
        block = net.produce(chain)
        sizes.append(len(block.encode()))
        included.extend(block.transactions)
        assert len(chain.mempool) == len(txs) - len(included)
        peer.push_block(block, now_ms())
    assert included == txs
    assert all(size <= LIMIT for size in sizes)
    assert len(sizes) >= 4 and sizes[0] > LIMIT - BLOCK_ENVELOPE_BYTES - 8 * 1024
    assert peer.head.id == chain.head.id


def test_a_block_over_the_limit_is_an_invalid_block(tmp_path: Path) -> None:
    """A block signed by the slot's producer that holds 12 transactions of 7.3 KB (88 KB)
    on a chain whose limit is 64 KiB is refused with OversizedBlock, an InvalidBlock (so its
    sender is treated as any sender of an invalid block), and the head does not move."""
    net = DevNet.create(1, max_block_bytes=LIMIT)
    chain = net.open(tmp_path)
    txs = tuple(big_tx(net, chain, n) for n in range(12))
    slot = chain.head.slot + 1
    producer, _ = chain.head.scheduled(slot, chain.params)
    header = BlockHeader(
        num=BlockNum(chain.head.num + 1),
        previous=chain.head.id,
        slot=slot,
        producer=producer,
        schedule_version=chain.head.active.version,
        tx_root=merkle_root([t.id for t in txs]),
        state_root=bytes(32),
    )
    block = SignedBlock.sign(header, txs, chain.chain_id, net.keys[producer])
    with pytest.raises(OversizedBlock) as refused:
        chain.push_block(block, now_ms())
    assert isinstance(refused.value, InvalidBlock)
    assert refused.value.size == len(block.encode()) > LIMIT == refused.value.limit
    assert chain.head.num == 0
    # The same block under a limit it fits passes the header's checks.
    roomy = dataclasses.replace(chain.params, max_block_bytes=len(block.encode()))
    process_block_header(
        chain.head, block, earlier=None, params=roomy, chain_id=chain.chain_id, now_ms=now_ms()
    )


def test_min_block_bytes_holds_the_largest_admissible_transaction() -> None:
    """The lowest limit a genesis may set leaves room, after the envelope, for a transaction
    of max_tx_bytes with the most signatures a transaction may carry."""
    signature = PrivateKey.generate().sign(bytes(32))
    tx = Transaction(0, 0, 0, big_actions(0))
    stx = SignedTransaction(tx, b"x" * 8192, (signature,) * MAX_SIGNATURES)
    assert min_block_bytes(8192) == BLOCK_ENVELOPE_BYTES + len(stx.encode())
