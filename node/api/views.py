"""JSON views of chain objects for the RPC (EOSIO-like field names)."""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import Any

import orjson

from chain.controller import Chain
from chain.core.consensus.block import Schedule, SignedBlock
from chain.core.consensus.finality import finalizer_policy
from chain.core.consensus.qc import QuorumCertificate
from chain.core.execution.state import Account, Producer
from chain.core.primitives.crypto import public_key_to_text
from chain.core.primitives.keytext import public_key_text
from chain.core.primitives.params import ChainParams, slot_start_ms
from node.api.antelope import (
    account_fields,
    block_fields,
    block_signature_fields,
    transaction_receipt,
    voter_info_fields,
)
from node.api.payloads import NATIVE_ACTION_SCHEMA, transaction_json
from p2p.blocksync.manager import SyncStatus
from p2p.statesync.fetch import StateSyncStatus


def dumps(value: Any) -> bytes:
    """Compact JSON of ``value``. orjson measured 20x faster than ``json`` on a block's
    transactions; the standard library takes the few values orjson refuses (integers beyond
    64 bits)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()


@functools.lru_cache(maxsize=4096)
def slot_iso(slot: int) -> str:
    """A slot's start as Antelope writes times (UTC, milliseconds, no zone); cached, since
    every get_info asks for the head's and the LIB's, which stay the same for many calls."""
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
            {
                "producer_name": p.name,
                "block_signing_key": public_key_text(p.key),
                "block_signing_key_hex": public_key_to_text(p.key),
            }
            for p in schedule.producers
        ],
    }


def block_json(block: SignedBlock, lib: int, params: ChainParams) -> dict[str, Any]:
    """A block as get_block shows it (amounts in ``params``' token)."""
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
        **block_signature_fields(block.signature),
        "irreversible": h.num <= lib,
        "transactions": [
            transaction_json(t, params) | transaction_receipt(t) for t in block.transactions
        ],
        "qc_claim": None
        if h.qc_claim is None
        else {"block_num": h.qc_claim.num, "strong": h.qc_claim.strong},
        "qc": qc_json(block.qc),
    } | block_fields(block.id)


def finalizer_info_json(chain: Chain, now_ms: int) -> dict[str, Any]:
    """The chain's side of get_finalizer_info (run on the chain thread): the policy of the
    head, each finalizer's last vote counted here, the head's claim, double votes seen."""
    head = chain.head
    core = head.core
    out: dict[str, Any] = {
        "finality": chain.params.finality,
        "head_block_num": head.num,
        "last_irreversible_block_num": chain.lib,
        "qc_claim": None
        if core is None
        else {"block_num": core.claim.num, "strong": core.claim.strong},
        "policy": None,
        "double_votes": [
            {
                "finalizer": public_key_to_text(e.key),
                "slot": e.slot,
                "votes": [
                    {
                        "block_id": v.block_id.hex(),
                        "strong": v.strong,
                        "signature": v.signature.hex(),
                    }
                    for v in (e.first, e.second)
                ],
            }
            for e in chain.vote_evidence()[-100:]
        ],
    }
    if core is None:
        return out
    policy = finalizer_policy(chain.params, head.active)
    rows = []
    for i, f in enumerate(policy.finalizers):
        seen = chain.votes.activity.get(f.key)
        last = None
        if seen is not None:
            age = max(0, now_ms - seen.at_ms)
            last = {
                "block_num": seen.block_num,
                "block_id": seen.block_id.hex(),
                "strong": seen.strong,
                "age_ms": age,
            }
        rows.append(
            {
                "index": i,
                "name": f.name,
                "key": public_key_to_text(f.key),
                "weight": f.weight,
                "votes": 0 if seen is None else seen.votes,
                "last_vote": last,
            }
        )
    out["policy"] = {
        "generation": policy.generation,
        "threshold": policy.threshold,
        "total_weight": policy.total_weight,
        "finalizers": rows,
    }
    return out


def qc_json(qc: QuorumCertificate | None) -> dict[str, Any] | None:
    """A QC: its block, strength and voters (indexes into the block's finalizer policy, as
    /v1/chain/get_finalizer_info lists it)."""
    if qc is None:
        return None
    strong, weak = qc.voters()
    return {
        "block_id": qc.block_id.hex(),
        "block_num": qc.num,
        "strong": qc.strong,
        "strong_votes": strong,
        "weak_votes": weak,
        "signatures": [s.hex() for s in qc.signatures],
    }


def account_json(
    account: Account,
    producer: Producer | None,
    params: ChainParams,
    head: tuple[int, str],
    ram_used: int,
) -> dict[str, Any]:
    """An account at ``head`` (number, time), with the fields Antelope's clients read."""
    voter_info = {"producers": list(account.votes), "weight": account.staked}
    return {
        "account_name": account.name,
        "key": public_key_to_text(account.key),
        "balance": account.balance,
        "staked": account.staked,
        "unbonding": [{"amount": a, "release_time": t} for t, a in account.unbonding],
        "voter_info": voter_info | voter_info_fields(account),
        "producer": None if producer is None else producer_json(producer),
    } | account_fields(account, params, head, ram_used)


def producer_json(p: Producer) -> dict[str, Any]:
    return {
        "owner": p.name,
        "producer_key": public_key_to_text(p.key),
        "url": p.url,
        "approved": p.approved,
        "is_active": p.registered,
        "total_votes": p.total_votes,
    }


# --- JSON Schemas of the views above, for the OpenAPI document ------------------------------


def sync_json(status: SyncStatus) -> dict[str, Any]:
    """Block sync's status, as /v1/node/sync and /v1/net/peers' ``sync`` give it."""
    return {
        "stage": str(status.stage),
        "head": status.head,
        "lib": status.lib,
        "target": status.target,
        "next_expected": status.next_expected,
        "sources": list(status.sources),
        "ranges_in_flight": status.ranges_in_flight,
        "blocks_per_s": status.blocks_per_s,
        "txs_per_s": status.txs_per_s,
        "eta_s": status.eta_s,
        "peers": status.peers,
        "holds_production": status.holds_production,
    }


def state_sync_json(status: StateSyncStatus) -> dict[str, Any]:
    """A snapshot download's status, as /v1/node/sync's ``state_sync`` gives it."""
    headers = status.headers
    return {
        "stage": "done" if status.done else "state_sync",
        "block_id": None if status.block_id is None else status.block_id.hex(),
        "block_num": status.block_num,
        "headers": None if headers is None else {"tip": headers[0], "lib": headers[1]},
        "chunks": status.chunks,
        "chunks_total": status.chunks_total,
        "chunks_fetched": status.chunks_fetched,
        "chunks_resumed": status.chunks_resumed,
        "bytes": status.bytes,
        "bytes_total": status.bytes_total,
        "bytes_per_s": status.bytes_per_s,
        "eta_s": status.eta_s,
        "sources": list(status.sources),
        "dropped": list(status.dropped),
        "peers_banned": dict(status.peers_banned),
    }


def sync_summary_json(status: SyncStatus | None) -> dict[str, Any]:
    """What get_info says of sync: ``status``'s, or while fetching a snapshot (None), the
    stage only."""
    if status is None:
        return {
            "sync_stage": "state_sync",
            "sync_target": 0,
            "sync_blocks_per_s": 0,
            "sync_txs_per_s": 0,
            "sync_eta_s": None,
        }
    return {
        "sync_stage": str(status.stage),
        "sync_target": status.target,
        "sync_blocks_per_s": status.blocks_per_s,
        "sync_txs_per_s": status.txs_per_s,
        "sync_eta_s": status.eta_s,
    }


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def json_object(
    properties: dict[str, dict[str, Any]], optional: tuple[str, ...] = ()
) -> dict[str, Any]:
    """An object schema whose ``properties`` are all required but ``optional``; others may
    appear (answers may grow fields without breaking clients)."""
    required = [name for name in properties if name not in optional]
    return {"type": "object", "properties": properties, "required": required}


INTEGER = {"type": "integer"}
COUNT = {"type": "integer", "minimum": 0}
STRING = {"type": "string"}
BOOLEAN = {"type": "boolean"}
HEX = {"type": "string", "pattern": "^[0-9a-f]*$"}
ID = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
TIME = {"type": "string", "description": "UTC, ISO 8601 with milliseconds"}
ERROR_SCHEMA = json_object(
    {
        "code": INTEGER,
        "message": STRING,
        "error": json_object({"name": STRING, "what": STRING}),
    }
)
SCHEDULE_SCHEMA = nullable(
    json_object(
        {
            "version": COUNT,
            "producers": {
                "type": "array",
                "items": json_object(
                    {
                        "producer_name": STRING,
                        "block_signing_key": STRING,
                        "block_signing_key_hex": STRING,
                    }
                ),
            },
        }
    )
)
TRANSACTION_SCHEMA = json_object(
    {
        "id": ID,
        "expiration": COUNT,
        "ref_block_num": COUNT,
        "ref_block_prefix": COUNT,
        "actions": {"type": "array", "items": NATIVE_ACTION_SCHEMA},
        "signatures": {"type": "array", "items": HEX},
    }
)
# Antelope's fields, for its clients (node.api.antelope says what BoR puts in each).
ANTELOPE_BLOCK: dict[str, dict[str, Any]] = {
    "confirmed": COUNT,
    "action_mroot": ID,
    "ref_block_prefix": COUNT,
}
SIG_K1 = {"type": "string", "pattern": "^SIG_K1_[1-9A-HJ-NP-Za-km-z]+$"}
ANTELOPE_RECEIPT: dict[str, dict[str, Any]] = {
    "status": STRING,
    "cpu_usage_us": COUNT,
    "net_usage_words": COUNT,
    "trx": json_object(
        {
            "id": ID,
            "signatures": {"type": "array", "items": SIG_K1},
            "compression": STRING,
            "packed_context_free_data": HEX,
            "context_free_data": {"type": "array"},
            "packed_trx": HEX,
        }
    ),
}
_LIMIT = json_object({"used": INTEGER, "available": INTEGER, "max": INTEGER})
_AUTHORITY = json_object(
    {
        "threshold": COUNT,
        "keys": {"type": "array", "items": json_object({"key": STRING, "weight": COUNT})},
        "accounts": {"type": "array"},
        "waits": {"type": "array"},
    }
)
ANTELOPE_ACCOUNT: dict[str, dict[str, Any]] = {
    "head_block_num": COUNT,
    "head_block_time": TIME,
    "privileged": BOOLEAN,
    "last_code_update": TIME,
    "created": TIME,
    "core_liquid_balance": STRING,
    "ram_quota": INTEGER,
    "ram_usage": COUNT,
    "net_weight": INTEGER,
    "cpu_weight": INTEGER,
    "net_limit": _LIMIT,
    "cpu_limit": _LIMIT,
    "permissions": {
        "type": "array",
        "items": json_object({"perm_name": STRING, "parent": STRING, "required_auth": _AUTHORITY}),
    },
}
ANTELOPE_VOTER_INFO: dict[str, dict[str, Any]] = {
    "owner": STRING,
    "proxy": STRING,
    "staked": COUNT,
    "last_vote_weight": {"type": "number"},
    "proxied_vote_weight": {"type": "number"},
    "is_proxy": BOOLEAN,
    "reserved2": COUNT,
    "reserved3": STRING,
}
ANTELOPE_INFO: dict[str, dict[str, Any]] = {
    "virtual_block_cpu_limit": COUNT,
    "virtual_block_net_limit": COUNT,
    "block_cpu_limit": COUNT,
    "block_net_limit": COUNT,
    "server_version_string": STRING,
    "fork_db_head_block_num": COUNT,
    "fork_db_head_block_id": ID,
}
BLOCK_SCHEMA = json_object(
    {
        "id": ID,
        "block_num": COUNT,
        "previous": ID,
        "timestamp": TIME,
        "slot": COUNT,
        "producer": STRING,
        "schedule_version": COUNT,
        "transaction_mroot": ID,
        "state_root": ID,
        "new_producers": SCHEDULE_SCHEMA,
        "producer_signature": SIG_K1,
        "producer_signature_hex": HEX,
        "irreversible": BOOLEAN,
        "transactions": {
            "type": "array",
            "items": json_object(TRANSACTION_SCHEMA["properties"] | ANTELOPE_RECEIPT),
        },
        "qc_claim": nullable(json_object({"block_num": COUNT, "strong": BOOLEAN})),
        **ANTELOPE_BLOCK,
        "qc": nullable(
            json_object(
                {
                    "block_id": ID,
                    "block_num": COUNT,
                    "strong": BOOLEAN,
                    "strong_votes": {"type": "array", "items": COUNT},
                    "weak_votes": {"type": "array", "items": COUNT},
                    "signatures": {"type": "array", "items": HEX},
                }
            )
        ),
    }
)
_VOTE = nullable(
    json_object(
        {"block_num": COUNT, "block_id": ID, "strong": BOOLEAN, "age_ms": COUNT},
        optional=("strong", "age_ms", "slot"),
    )
)
FINALIZER_INFO_SCHEMA = json_object(
    {
        "finality": STRING,
        "head_block_num": COUNT,
        "last_irreversible_block_num": COUNT,
        "qc_claim": nullable(json_object({"block_num": COUNT, "strong": BOOLEAN})),
        "policy": nullable(
            json_object(
                {
                    "generation": COUNT,
                    "threshold": COUNT,
                    "total_weight": COUNT,
                    "finalizers": {
                        "type": "array",
                        "items": json_object(
                            {
                                "index": COUNT,
                                "name": STRING,
                                "key": STRING,
                                "weight": COUNT,
                                "votes": COUNT,
                                "last_vote": _VOTE,
                            }
                        ),
                    },
                }
            )
        ),
        "local_finalizers": {
            "type": "array",
            "items": json_object({"key": STRING, "lock": _VOTE, "last_vote": _VOTE}),
        },
        "production_paused": BOOLEAN,
        "double_votes": {"type": "array", "items": {"type": "object"}},
    }
)
PRODUCER_SCHEMA = json_object(
    {
        "owner": STRING,
        "producer_key": STRING,
        "url": STRING,
        "approved": BOOLEAN,
        "is_active": BOOLEAN,
        "total_votes": COUNT,
    }
)
ACCOUNT_SCHEMA = json_object(
    {
        "account_name": STRING,
        "key": STRING,
        "balance": COUNT,
        "staked": COUNT,
        "unbonding": {
            "type": "array",
            "items": json_object({"amount": COUNT, "release_time": COUNT}),
        },
        "voter_info": json_object(
            {
                "producers": {"type": "array", "items": STRING},
                "weight": COUNT,
                **ANTELOPE_VOTER_INFO,
            }
        ),
        "producer": nullable(PRODUCER_SCHEMA),
        **ANTELOPE_ACCOUNT,
    }
)
DECIMAL = {"type": "string", "pattern": "^[0-9]+[.][0-9]+$"}
PRODUCER_ROW_SCHEMA = json_object(
    {
        "owner": STRING,
        "total_votes": DECIMAL,
        "producer_key": STRING,
        "is_active": {"type": "integer", "enum": [0, 1]},
        "url": STRING,
        "unpaid_blocks": COUNT,
        "last_claim_time": TIME,
        "location": COUNT,
        "producer_authority": {"type": "array"},
        "approved": BOOLEAN,
        "in_schedule": BOOLEAN,
        "registered": BOOLEAN,
        "voted_stake": COUNT,
        "key": STRING,
    }
)
PRODUCERS_SCHEMA = json_object(
    {
        "rows": {
            "type": "array",
            "items": {
                "anyOf": [PRODUCER_ROW_SCHEMA, {"type": "string", "description": "json=false: hex"}]
            },
        },
        "total_producer_vote_weight": DECIMAL,
        "total_voted_stake": COUNT,
        "more": {
            "type": "string",
            "description": "the next producer: lower_bound of the next page",
        },
        "active": SCHEDULE_SCHEMA,
        "pending": SCHEDULE_SCHEMA,
    }
)
INFO_SCHEMA = json_object(
    {
        "server_version": STRING,
        "chain_id": ID,
        "head_block_num": COUNT,
        "head_block_id": ID,
        "head_block_time": TIME,
        "head_block_producer": STRING,
        "last_irreversible_block_num": COUNT,
        "last_irreversible_block_id": ID,
        "last_irreversible_block_time": TIME,
        "schedule_version": COUNT,
        "token_symbol": STRING,
        "token_precision": COUNT,
        "mempool_size": COUNT,
        "fork_db_size": COUNT,
        **ANTELOPE_INFO,
        # From the peer layer, when the node has one.
        "peer_count": COUNT,
        "sync_stage": STRING,
        "rdma": {"type": "object"},
    },
    optional=("peer_count", "sync_stage", "rdma"),
)
TX_STATUS_SCHEMA = {
    "anyOf": [
        json_object({"id": ID, "status": {"const": "pending"}}),
        # An async push the node refused: its error name and reason.
        json_object({"id": ID, "status": {"const": "refused"}, "error": STRING, "reason": STRING}),
        json_object(
            TRANSACTION_SCHEMA["properties"]
            | {"block_num": COUNT, "status": {"enum": ["executed", "irreversible"]}}
        ),
    ]
}
PUSH_SCHEMA = json_object(
    {
        "transaction_id": ID,
        "status": {"enum": ["submitted", "accepted", "pending", "included"]},
        "block_num": COUNT,
        "trace": {
            "type": "object",
            "description": "when it ran contracts: what they did on the head state (the block"
            " may differ): fuel and actions (contract, action, receiver: the contract or an"
            " account it notified, data or hex, console, events, return_value and"
            " return_value_hex, fuel)",
        },
    },
    optional=("block_num", "trace"),
)
HEALTH_SCHEMA = json_object(
    {"status": {"const": "ok"}, "head_block_num": COUNT, "head_age_s": {"type": "number"}}
)
