"""What Antelope's clients (WharfKit, eosjs) read that BoR's own answers lack: the fields
added to get_info, get_block and get_account, Antelope's text form of a key, and the native
token's and token contracts' balances and supplies (get_currency_balance/_stats).

Each added field carries BoR's value where BoR has the concept, else Antelope's neutral one
(README, "Antelope's clients"). BoR's own fields keep their shapes: these are added beside
them, never in their place.
"""

from __future__ import annotations

import json
from collections.abc import Set as AbstractSet
from typing import Any

from chain.abi import Abi, parse_abi, symbol_code_value
from chain.core.execution.contracts import name_to_u64
from chain.core.execution.state import Account, KVReader, Producer, StateView, decode_account
from chain.core.execution.transaction import SignedTransaction
from chain.core.execution.transition import settle, token_amount
from chain.core.primitives import schema
from chain.core.primitives.crypto import public_key_to_text
from chain.core.primitives.errors import EncodingError, NotFound
from chain.core.primitives.keytext import public_key_text, signature_text
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName
from node.api.contracts.reads import RowQuery, RowReader, table_rows

# The account Antelope's wallets ask for the core token's balance: BoR answers from its native
# balances under this name (no contract runs there).
NATIVE_TOKEN_CODE = "eosio.token"
# Antelope's "never" (a time_point of 0) and its "unlimited" resource.
EPOCH = "1970-01-01T00:00:00.000"
UNLIMITED = -1
_ZERO_ROOT = "0" * 64
# A token contract's tables by eosio.token's convention: accounts (scope: the owner) holds
# {balance}, stat (scope: the symbol code) holds {supply, max_supply, issuer}.
_ROWS = 100  # symbols read per account or per stat scope; a token holds a handful


def info_fields(params: ChainParams, head_num: int, head_id: str, version: str) -> dict[str, Any]:
    """get_info's Antelope fields. BoR has no elastic limits: the virtual limits are the
    actual ones; CPU is counted in wasmtime fuel (max_block_fuel), NET in block bytes."""
    return {
        "virtual_block_cpu_limit": params.max_block_fuel,
        "virtual_block_net_limit": params.max_block_bytes,
        "block_cpu_limit": params.max_block_fuel,
        "block_net_limit": params.max_block_bytes,
        "server_version_string": version,
        "fork_db_head_block_num": head_num,
        "fork_db_head_block_id": head_id,
    }


def block_fields(block_id: bytes) -> dict[str, Any]:
    """get_block's Antelope fields: no producer confirmations and no action receipts' root
    (neutral values); the id's bytes 8-11 as TaPoS' reference prefix."""
    return {
        "confirmed": 0,
        "action_mroot": _ZERO_ROOT,
        "ref_block_prefix": int.from_bytes(block_id[8:12], "little"),
    }


def block_signature_fields(signature: bytes) -> dict[str, str]:
    """The producer's signature in Antelope's SIG_K1_ text (what WharfKit decodes), and in
    BoR's hex (r, s, recovery id) under its own name."""
    return {
        "producer_signature": signature_text(signature),
        "producer_signature_hex": signature.hex(),
    }


def transaction_receipt(stx: SignedTransaction) -> dict[str, Any]:
    """What Antelope's block lists for a transaction, added beside BoR's own fields: a block
    holds only transactions that ran (executed); BoR meters no CPU time per transaction (0);
    NET is the packed size in 8-byte words, as Antelope counts it. ``trx`` carries the packed
    form with Antelope's SIG_K1_ signatures; no ``transaction`` object, since BoR's actions
    are the entry's own ``actions`` (Antelope's clients decode ``packed_trx`` lazily)."""
    return {
        "status": "executed",
        "cpu_usage_us": 0,
        "net_usage_words": (len(stx.packed) + 7) // 8,
        "trx": {
            "id": stx.id.hex(),
            "signatures": [signature_text(s) for s in stx.signatures],
            "compression": "none",
            "packed_context_free_data": "",
            "context_free_data": [],
            "packed_trx": stx.packed.hex(),
        },
    }


def _limit() -> dict[str, int]:
    return {"used": 0, "available": UNLIMITED, "max": UNLIMITED}


def account_fields(
    account: Account,
    params: ChainParams,
    head: tuple[int, str],
    ram_used: int,
) -> dict[str, Any]:
    """get_account's Antelope fields for ``account`` at ``head`` (number, time). BoR meters
    no CPU or NET per account: weights and limits are Antelope's unlimited (-1). Its one key
    is both the owner and the active permission."""
    key = public_key_text(account.key)
    auth = {"threshold": 1, "keys": [{"key": key, "weight": 1}], "accounts": [], "waits": []}
    return {
        "head_block_num": head[0],
        "head_block_time": head[1],
        "privileged": False,
        "last_code_update": EPOCH,
        "created": EPOCH,
        "core_liquid_balance": token_amount(account.balance, params),
        "ram_quota": params.max_ram_bytes,
        "ram_usage": ram_used,
        "net_weight": UNLIMITED,
        "cpu_weight": UNLIMITED,
        "net_limit": _limit(),
        "cpu_limit": _limit(),
        "permissions": [
            {"perm_name": "owner", "parent": "", "required_auth": auth},
            {"perm_name": "active", "parent": "owner", "required_auth": auth},
        ],
    }


def voter_info_fields(account: Account) -> dict[str, Any]:
    """What Antelope's voter_info has beside BoR's producers and weight: no proxies."""
    return {
        "owner": account.name,
        "proxy": "",
        "staked": account.staked,
        "last_vote_weight": float(account.staked),
        "proxied_vote_weight": 0.0,
        "is_proxy": False,
        "reserved2": 0,
        "reserved3": "",
    }


# --- get_producers ---------------------------------------------------------------------------

MAX_PRODUCER_ROWS = 1000
# Antelope writes vote weights as doubles in decimal text; BoR's are integers, written whole.
_DECIMALS = ".00000000000000000"


def producer_row(p: Producer, in_schedule: bool) -> dict[str, Any]:
    """A get_producers row: Antelope's fields (eosio.system's producer_info; no pay, no
    location in BoR: 0 and the epoch), then BoR's own, those whose form differs from
    Antelope's under their own names (registered, voted_stake, key)."""
    key = public_key_text(p.key)
    return {
        "owner": p.name,
        "total_votes": f"{p.total_votes}{_DECIMALS}",
        "producer_key": key,
        "is_active": 1 if p.registered else 0,
        "url": p.url,
        "unpaid_blocks": 0,
        "last_claim_time": EPOCH,
        "location": 0,
        "producer_authority": [
            "block_signing_authority_v0",
            {"threshold": 1, "keys": [{"key": key, "weight": 1}]},
        ],
        "approved": p.approved,
        "in_schedule": in_schedule,
        "registered": p.registered,
        "voted_stake": p.total_votes,
        "key": public_key_to_text(p.key),
    }


def producers_page(
    producers: list[Producer],
    active: AbstractSet[str],
    lower_bound: str,
    limit: int,
    json_rows: bool,
) -> dict[str, Any]:
    """Antelope's page of producers: by votes, most first (then by name), from the producer
    named ``lower_bound`` (none if there is no such producer, as nodeos answers), at most
    ``limit``; ``more`` names the next one. ``json_rows`` false: each row as the hex of BoR's
    record."""
    ranked = sorted(producers, key=lambda p: (-p.total_votes, p.name))
    start = 0
    if lower_bound:
        start = next((i for i, p in enumerate(ranked) if p.name == lower_bound), len(ranked))
    page = ranked[start : start + limit]
    more = ranked[start + limit].name if start + limit < len(ranked) else ""
    total = sum(p.total_votes for p in producers)
    return {
        "rows": [
            producer_row(p, p.name in active) if json_rows else p.encode().hex() for p in page
        ],
        "total_producer_vote_weight": f"{total}{_DECIMALS}",
        "total_voted_stake": total,
        "more": more,
    }


# --- get_abi and get_code ----------------------------------------------------------------------

ANTELOPE_ABI_VERSION = "eosio::abi/1.2"  # the first with action_results
# BoR's integer types under Antelope's names; the other built-in types have the same names.
_TYPE_NAMES = {
    f"{s}{bits}": f"{a}{bits}" for s, a in (("u", "uint"), ("i", "int")) for bits in (8, 16, 32, 64)
}


def antelope_type(type_: str) -> str:
    """A BoR ABI type under Antelope's name (``u64[]`` is ``uint64[]``; ``?`` and ``[]``
    mean the same in both, and so does the binary form of every type)."""
    suffix = ""
    while type_.endswith(("[]", "?")):
        cut = 2 if type_.endswith("[]") else 1
        type_, suffix = type_[:-cut], type_[-cut:] + suffix
    return _TYPE_NAMES.get(type_, type_) + suffix


def antelope_abi(abi: Abi) -> dict[str, Any]:
    """``abi`` as Antelope's ABI JSON, which WharfKit and eosjs read: the same structs,
    actions, tables and action results under Antelope's type names. Antelope's ABI has no
    events and no secondary indexes: those stay in BoR's own ABI (``bor_abi``)."""
    return {
        "version": ANTELOPE_ABI_VERSION,
        "types": [],
        "structs": [
            {
                "name": name,
                "base": "",
                "fields": [{"name": f.name, "type": antelope_type(f.type)} for f in fields],
            }
            for name, fields in abi.structs.items()
        ],
        "actions": [
            {"name": name, "type": antelope_type(type_), "ricardian_contract": ""}
            for name, type_ in abi.actions.items()
        ],
        "tables": [
            {
                "name": t.name,
                "index_type": t.index_type,
                "key_names": [],
                "key_types": [],
                "type": antelope_type(t.type),
            }
            for t in abi.tables.values()
        ],
        "ricardian_clauses": [],
        "error_messages": [],
        "abi_extensions": [],
        "variants": [],
        "action_results": [
            {"name": name, "result_type": antelope_type(type_)}
            for name, type_ in abi.results.items()
        ],
    }


def abi_fields(abi_text: str) -> dict[str, Any]:
    """get_abi's and get_code's ABI: Antelope's form under ``abi`` (null if the contract has
    no ABI, or one BoR cannot read: setcode stores the text unchecked) and BoR's own, as
    setcode stored it, under ``bor_abi``."""
    bor = _abi_json(abi_text)
    try:
        antelope = antelope_abi(parse_abi(abi_text)) if bor is not None else None
    except EncodingError:
        antelope = None
    return {"abi": antelope, "bor_abi": bor}


def _abi_json(text: str) -> Any:
    """A contract's ABI text as JSON, or None (it may be anything, nested past the
    parser's depth included)."""
    if not text:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


# --- get_currency_balance and get_currency_stats ----------------------------------------------


def native_balance(
    reader: KVReader, account: str, symbol: str | None, params: ChainParams, now_s: int
) -> list[str]:
    """The native token's liquid balance of ``account`` (stake matured by ``now_s`` included),
    as Antelope lists it: one asset, or none if ``symbol`` names another token."""
    found = StateView(reader).account(account)
    if found is None:
        raise NotFound(f"no account {account!r}")
    if symbol is not None and symbol != params.token_symbol:
        return []
    return [token_amount(settle(found, now_s).balance, params)]


def native_supply(reader: KVReader) -> int:
    """The native token's supply: every account's balance, stake and unbonding stake. BoR
    issues and burns nothing after genesis, so this never changes: the caller computes it once
    (it reads every account)."""
    supply = 0
    for _key, value in reader.iterate(schema.ACCOUNT, schema.prefix_end(schema.ACCOUNT)):
        a = decode_account(value)
        supply += a.balance + a.staked + sum(amount for _t, amount in a.unbonding)
    return supply


def native_stats(supply: int, symbol: str, params: ChainParams) -> dict[str, Any]:
    """Antelope's stats of the native token: its supply is also its maximum, and no account
    issues it."""
    if symbol != params.token_symbol:
        raise NotFound(f"the native token is {params.token_symbol}, not {symbol}")
    text = token_amount(supply, params)
    return {symbol: {"supply": text, "max_supply": text, "issuer": ""}}


def token_balance(
    reader: RowReader, abi: Abi, code: str, account: str, symbol: str | None
) -> list[str]:
    """Balances of ``account`` in the token contract ``code`` (its accounts table)."""
    if "accounts" not in abi.tables:
        raise EncodingError("code", f"{code}'s ABI has no accounts table: not a token contract")
    scope = _name_scope(account)
    lower, upper = _symbol_range(symbol)
    page = table_rows(reader, RowQuery(code, scope, "accounts", lower, upper, _ROWS, None, abi))
    return [row["balance"] for row in page["rows"] if _has(row, "balance")]


def token_stats(reader: RowReader, abi: Abi, code: str, symbol: str) -> dict[str, Any]:
    """The stat row of ``symbol`` in the token contract ``code``."""
    if "stat" not in abi.tables:
        raise EncodingError("code", f"{code}'s ABI has no stat table: not a token contract")
    lower, upper = _symbol_range(symbol)
    page = table_rows(reader, RowQuery(code, lower, "stat", lower, upper, 1, None, abi))
    rows = [r for r in page["rows"] if _has(r, "supply", "max_supply", "issuer")]
    if not rows:
        raise NotFound(f"{code} has no token {symbol}")
    return {symbol: {k: rows[0][k] for k in ("supply", "max_supply", "issuer")}}


def _has(row: Any, *names: str) -> bool:
    """Whether a decoded row has these fields (a row the ABI does not describe is hex)."""
    return isinstance(row, dict) and all(n in row for n in names)


def _name_scope(account: str) -> int:
    return name_to_u64(AccountName(account))


def _symbol_range(symbol: str | None) -> tuple[int, int]:
    if symbol is None:
        return 0, 2**64 - 1
    value = symbol_code_value(symbol)
    if value is None:
        raise EncodingError("symbol", f"{symbol!r} is not a symbol code")
    return value, value
