"""What each RPC route answers, as frozen dataclasses (built by ``bor_client.model``).

Field names are the node's JSON names; a field with a default is one the answer may lack.
Each class keeps the members it does not declare in ``extra``. The route's answer schema in
the node's OpenAPI document is the source: ``tests/bor_client/test_openapi.py`` fails when a
class and its schema disagree (a name, whether it is required, a type).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Json = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Info:
    """get_info: the chain's identity, head and LIB, and the node's version."""

    server_version: str
    chain_id: str
    head_block_num: int
    head_block_id: str
    head_block_time: str
    head_block_producer: str
    last_irreversible_block_num: int
    last_irreversible_block_id: str
    last_irreversible_block_time: str
    schedule_version: int
    token_symbol: str
    token_precision: int
    mempool_size: int
    fork_db_size: int
    virtual_block_cpu_limit: int
    virtual_block_net_limit: int
    block_cpu_limit: int
    block_net_limit: int
    server_version_string: str
    fork_db_head_block_num: int
    fork_db_head_block_id: str
    peer_count: int | None = None
    sync_stage: str | None = None
    rdma: Json | None = None
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ScheduleProducer:
    producer_name: str
    block_signing_key: str  # Antelope's PUB_K1_ base58 text
    block_signing_key_hex: str
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Schedule:
    version: int
    producers: tuple[ScheduleProducer, ...]
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ActionJson:
    """A native action in a transaction: its name and data (amounts as the node shows them)."""

    action: str
    data: Json
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class PackedTrx:
    """Antelope's ``trx`` of a block's transaction receipt: the packed transaction and its
    signatures as SIG_K1_ text."""

    id: str
    signatures: tuple[str, ...]
    compression: str
    packed_context_free_data: str
    context_free_data: tuple[Any, ...]
    packed_trx: str
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class TransactionJson:
    id: str
    expiration: int
    ref_block_num: int
    ref_block_prefix: int
    actions: tuple[ActionJson, ...]
    signatures: tuple[str, ...]
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class BlockTransaction:
    """A transaction in a block: BoR's fields and Antelope's receipt (``status``, neutral
    CPU, NET in 8-byte words, ``trx``)."""

    id: str
    expiration: int
    ref_block_num: int
    ref_block_prefix: int
    actions: tuple[ActionJson, ...]
    signatures: tuple[str, ...]
    status: str
    cpu_usage_us: int
    net_usage_words: int
    trx: PackedTrx
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class QcClaim:
    block_num: int
    strong: bool
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Qc:
    block_id: str
    block_num: int
    strong: bool
    strong_votes: tuple[int, ...]
    weak_votes: tuple[int, ...]
    signatures: tuple[str, ...]
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Block:
    """get_block: a block's header, signature, QC and transactions."""

    id: str
    block_num: int
    previous: str
    timestamp: str
    slot: int
    producer: str
    schedule_version: int
    transaction_mroot: str
    state_root: str
    new_producers: Schedule | None
    producer_signature: str  # Antelope's SIG_K1_ text
    producer_signature_hex: str
    irreversible: bool
    transactions: tuple[BlockTransaction, ...]
    qc_claim: QcClaim | None
    confirmed: int
    action_mroot: str
    ref_block_prefix: int
    qc: Qc | None
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Unbonding:
    amount: int
    release_time: int
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class VoterInfo:
    producers: tuple[str, ...]
    weight: int
    owner: str
    proxy: str
    staked: int
    last_vote_weight: float
    proxied_vote_weight: float
    is_proxy: bool
    reserved2: int
    reserved3: str
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    owner: str
    producer_key: str
    url: str
    approved: bool
    is_active: bool
    total_votes: int
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Limit:
    used: int
    available: int
    max: int
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class KeyWeight:
    key: str
    weight: int
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Authority:
    threshold: int
    keys: tuple[KeyWeight, ...]
    accounts: tuple[Any, ...]
    waits: tuple[Any, ...]
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Permission:
    perm_name: str
    parent: str
    required_auth: Authority
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Account:
    """get_account: balance, stake, key and votes (base units), and Antelope's fields."""

    account_name: str
    key: str
    balance: int
    staked: int
    unbonding: tuple[Unbonding, ...]
    voter_info: VoterInfo
    producer: ProducerInfo | None
    head_block_num: int
    head_block_time: str
    privileged: bool
    last_code_update: str
    created: str
    core_liquid_balance: str
    ram_quota: int
    ram_usage: int
    net_weight: int
    cpu_weight: int
    net_limit: Limit
    cpu_limit: Limit
    permissions: tuple[Permission, ...]
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ProducerRow:
    """A candidate in Antelope's fields (total_votes as decimal text, is_active 1/0,
    producer_key in base58) and BoR's beside (voted_stake, key as hex, approved, ...)."""

    owner: str
    total_votes: str
    producer_key: str
    is_active: int
    url: str
    unpaid_blocks: int
    last_claim_time: str
    location: int
    producer_authority: tuple[Any, ...]
    approved: bool
    in_schedule: bool
    registered: bool
    voted_stake: int
    key: str
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Producers:
    """get_producers: candidates with their votes, and the active and pending schedules."""

    rows: tuple[ProducerRow | str, ...]  # str: the row's hex, asked with json=false
    total_producer_vote_weight: str
    total_voted_stake: int
    more: str  # the next page's lower_bound; empty on the last page
    active: Schedule | None
    pending: Schedule | None
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class TxStatus:
    """get_transaction: pending, refused (an async push: error and reason), or executed or
    irreversible in ``block_num`` (then the transaction's fields too)."""

    id: str
    status: str
    expiration: int | None = None
    ref_block_num: int | None = None
    ref_block_prefix: int | None = None
    actions: tuple[ActionJson, ...] | None = None
    signatures: tuple[str, ...] | None = None
    block_num: int | None = None
    error: str | None = None
    reason: str | None = None
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class PushResult:
    """push_transaction: the id and how far it went (submitted, accepted, pending,
    included in ``block_num``); ``trace``: what its contract actions did."""

    transaction_id: str
    status: str
    block_num: int | None = None
    trace: Json | None = None
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Vote:
    block_num: int
    block_id: str
    strong: bool | None = None
    age_ms: int | None = None
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Finalizer:
    index: int
    name: str
    key: str
    weight: int
    votes: int
    last_vote: Vote | None
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Policy:
    generation: int
    threshold: int
    total_weight: int
    finalizers: tuple[Finalizer, ...]
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class LocalFinalizer:
    key: str
    lock: Vote | None
    last_vote: Vote | None
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class FinalizerInfo:
    """get_finalizer_info: the finality rule, the policy and votes, this node's finalizers."""

    finality: str
    head_block_num: int
    last_irreversible_block_num: int
    qc_claim: QcClaim | None
    policy: Policy | None
    local_finalizers: tuple[LocalFinalizer, ...]
    production_paused: bool
    double_votes: tuple[Json, ...]
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Evidence:
    """get_evidence: blocks kept as proof of double signing."""

    blocks: tuple[Block, ...]
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Health:
    status: str
    head_block_num: int
    head_age_s: float
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Snapshots:
    snapshots: tuple[Any, ...]
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Code:
    """get_code: the contract's code hash and size, and its ABI (None without one)."""

    account: str
    account_name: str
    code_hash: str
    code_bytes: int
    wast: str
    wasm: str  # hex of the module
    abi: Json | None
    bor_abi: Json | None
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class AbiResult:
    """get_abi: the contract's ABI in Antelope's form (``abi``) and as deployed (``bor_abi``,
    what BoR's tools encode with), each None if it was deployed without one."""

    account: str
    account_name: str
    abi: Json | None
    bor_abi: Json | None
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class TableRows:
    """get_table_rows: a page of rows (objects when decoded, hex when not, or
    ``{"data", "payer"}`` with show_payer); ``next_key`` is the next page's lower bound."""

    rows: tuple[Any, ...]
    more: bool
    next_key: str
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Event:
    contract: str
    name: str
    data: Any = None
    hex: str | None = None
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class CallResult:
    """call: a read-only run's return value (decoded when the ABI types it), console,
    events, fuel, and the head block it ran on."""

    return_value: Any
    return_value_hex: str
    console: str
    events: tuple[Event, ...]
    fuel: int
    block_num: int
    extra: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class CurrencyStats:
    supply: str
    max_supply: str
    issuer: str
    extra: Json = field(default_factory=dict, repr=False, compare=False)
