"""What a transaction takes in an encoded block, counted without encoding it, and the room a
block needs besides its transactions: the producer fills blocks by these sums, and the chain's
parameters are checked against them (a block limit below ``min_block_bytes`` would strand the
largest transaction the chain admits in the mempool)."""

from __future__ import annotations

from chain.core.execution.transaction import MAX_SIGNATURES, SignedTransaction
from chain.core.primitives.crypto import SIGNATURE_SIZE

# What a block holds besides its transactions, at most: the header with a full schedule of
# MAX_SCHEDULE producers (6.3 KB), the signature and a QC signed by 125 finalizers (8.5 KB)
# come to 14.8 KB (tests/chain/core/execution/test_sizes.py builds that block); 16 KiB leaves room.
BLOCK_ENVELOPE_BYTES = 16 * 1024


def _bin_header(size: int) -> int:
    """The bytes msgpack puts before a bin of ``size`` bytes."""
    return 2 if size < 1 << 8 else 3 if size < 1 << 16 else 5


def _array_header(count: int) -> int:
    """The bytes msgpack puts before an array of ``count`` items."""
    return 1 if count < 16 else 3 if count < 1 << 16 else 5


def encoded_tx_size(stx: SignedTransaction) -> int:
    """The bytes ``stx`` takes in an encoded block: ``len(stx.encode())``, without encoding."""
    packed, sigs = len(stx.packed), len(stx.signatures)
    return 1 + _bin_header(packed) + packed + _array_header(sigs) + sigs * (2 + SIGNATURE_SIZE)


def min_block_bytes(max_tx_bytes: int) -> int:
    """The smallest block size limit under which a block can hold any one transaction a
    chain with ``max_tx_bytes`` admits (its most signatures included): below it, such a
    transaction would wait in the mempool and hold the ones behind it back."""
    sigs = MAX_SIGNATURES * (2 + SIGNATURE_SIZE)
    largest_tx = 1 + _bin_header(max_tx_bytes) + max_tx_bytes + _array_header(MAX_SIGNATURES) + sigs
    return BLOCK_ENVELOPE_BYTES + largest_tx
