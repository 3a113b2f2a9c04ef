"""Chain parameters fixed at genesis, and slot/time arithmetic."""

from __future__ import annotations

from dataclasses import dataclass

from chain.core.primitives.types import AccountName

SLOT_MS = 500
# Slots count from 2000-01-01T00:00:00Z, as in EOSIO's block_timestamp_type.
SLOT_EPOCH_MS = 946_684_800_000

# A block's encoded size is a consensus rule, so that every valid block can be sent to a
# peer: p2p's frame limit (8 MiB) must hold the largest block a genesis may allow plus a
# message's framing (tests/p2p/test_block_frame.py pins it). 7 MiB leaves 1 MiB for that.
MAX_BLOCK_BYTES = 7 * 1024 * 1024
# Half the frame limit: a block of 5,000 transfers is about 0.6 MB, of 5,000 of the largest
# transactions (8 KiB) about 41 MB, which no peer could receive; 4 MiB holds about 500 of them.
DEFAULT_MAX_BLOCK_BYTES = 4 * 1024 * 1024


def slot_of_ms(unix_ms: int) -> int:
    return (unix_ms - SLOT_EPOCH_MS) // SLOT_MS


def slot_start_ms(slot: int) -> int:
    return SLOT_EPOCH_MS + slot * SLOT_MS


def slot_start_s(slot: int) -> float:
    """When a slot begins, in unix seconds (what clocks and Prometheus gauges read)."""
    return slot_start_ms(slot) / 1000


def slot_time_s(slot: int) -> int:
    """Block time in whole unix seconds, the unit of transaction expirations."""
    return slot_start_ms(slot) // 1000


# The contract parameters: hashed into the chain id only when one differs from its default.
CONTRACT_PARAMS = (
    "contract_deploy",
    "max_code_bytes",
    "max_memory_pages",
    "max_tx_fuel",
    "max_block_fuel",
    "max_inline_depth",
    "max_ram_bytes",
)


@dataclass(frozen=True, slots=True)
class ChainParams:
    """Consensus rules every node of one chain must share (they are part of the chain id)."""

    token_symbol: str = "BOR"
    token_precision: int = 4
    governance: tuple[AccountName, ...] = ()
    schedule_size: int = 21
    blocks_per_turn: int = 12
    max_tx_lifetime_s: int = 3600
    max_tx_bytes: int = 8192
    max_block_txs: int = 5000
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES  # the block's encoding, transactions and all
    unbond_delay_s: int = 3 * 24 * 3600
    election_interval_blocks: int = 120
    # Contracts (chain.vm). "open": any account may deploy code to itself; "approved": only
    # accounts a governance account allowed (the ``allowcode`` action).
    contract_deploy: str = "open"
    max_code_bytes: int = 256 * 1024  # a module's size, as setcode carries it
    max_memory_pages: int = 32  # 64 KiB pages of linear memory a contract may have (2 MiB)
    max_tx_fuel: int = 20_000_000  # wasmtime fuel per transaction, all its actions together
    max_block_fuel: int = 400_000_000  # fuel of every transaction of a block together
    max_inline_depth: int = 4  # how deep actions sent by send_inline may nest
    max_ram_bytes: int = 1 << 20  # contract storage one account may pay for
    # How blocks become irreversible: "votes" (finalizer votes and QCs,
    # ``chain.core.consensus.finality``) or "dpos" (more than two thirds of the producers built on
    # them, ``chain.core.consensus.dpos``).
    finality: str = "dpos"
    # Finalizers as (name, public key, weight); empty: the active producers, one vote each.
    finalizers: tuple[tuple[AccountName, bytes, int], ...] = ()
