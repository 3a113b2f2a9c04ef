"""Contract storage accounting: the bytes of state each account pays for.

Rows, index entries and code are billed to a payer, who may hold at most ``max_ram_bytes``.
Shared by the transition (code from ``setcode``) and the runtime (rows from ``db_*``), so that
both bill with the same arithmetic. Usage is kept in ``schema.RAM`` under the account's name.
"""

from __future__ import annotations

from chain.core.execution.state import StateView
from chain.core.primitives import schema
from chain.core.primitives.errors import ResourceExceeded
from chain.core.primitives.params import ChainParams

# What an entry costs beyond its bytes: the store's per-key overhead, so that many tiny rows
# are not free (Antelope charges a similar fixed overhead per row).
ENTRY_OVERHEAD = 100
# An idx64 entry: two keys of about 40 bytes (by secondary and by primary) and their overhead.
IDX64_ENTRY_BYTES = 2 * 40 + ENTRY_OVERHEAD


def index_entry_bytes(key_size: int) -> int:
    """What a secondary index entry of ``key_size`` key bytes costs (IDX64_ENTRY_BYTES for 8)."""
    return 2 * (32 + key_size) + ENTRY_OVERHEAD


def row_bytes(key: bytes, value: bytes) -> int:
    """What a stored row (or any state entry) costs its payer."""
    return len(key) + len(value) + ENTRY_OVERHEAD


def code_bytes(wasm: bytes, abi: str) -> int:
    """What deployed code costs the account it is deployed to."""
    return len(wasm) + len(abi.encode()) + ENTRY_OVERHEAD


def used(view: StateView, payer: str) -> int:
    """Bytes of contract storage ``payer`` pays for now."""
    raw = view.raw(schema.ram_key(payer))
    return 0 if raw is None else int.from_bytes(raw, "big")


def charge(view: StateView, payer: str, delta: int, params: ChainParams) -> int:
    """Add ``delta`` bytes (negative: a refund) to ``payer``'s usage and return the new total.

    Raises ResourceExceeded when an increase takes the payer past ``max_ram_bytes``; a refund
    never fails, even for a payer over a limit that was lowered since.
    """
    total = used(view, payer) + delta
    assert total >= 0, f"{payer}'s contract storage would go negative ({total})"
    if delta > 0 and total > params.max_ram_bytes:
        raise ResourceExceeded(
            f"{payer} uses {total} bytes of contract storage, "
            f"past max_ram_bytes {params.max_ram_bytes}"
        )
    view.put_raw(schema.ram_key(payer), total.to_bytes(8, "big") if total else None)
    return total
