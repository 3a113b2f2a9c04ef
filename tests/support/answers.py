"""Whole answers of a node's get_info and get_account, for fake nodes in tests (the SDK reads
every field its result class requires, as a real node sends them)."""

from __future__ import annotations

from typing import Any

ZERO_ID = "00" * 32


def info_json(**changes: Any) -> dict[str, Any]:
    """get_info as a one-producer devnet answers it at block 7, with ``changes``."""
    head_id = "00000007" + "ef" * 28
    return {
        "server_version": "bor-0.1.0",
        "chain_id": "cd" * 32,
        "head_block_num": 7,
        "head_block_id": head_id,
        "head_block_time": "2026-01-01T00:00:00.000",
        "head_block_producer": "producera",
        "last_irreversible_block_num": 7,
        "last_irreversible_block_id": head_id,
        "last_irreversible_block_time": "2026-01-01T00:00:00.000",
        "schedule_version": 0,
        "token_symbol": "BOR",
        "token_precision": 4,
        "mempool_size": 0,
        "fork_db_size": 1,
        "virtual_block_cpu_limit": 1,
        "virtual_block_net_limit": 1,
        "block_cpu_limit": 1,
        "block_net_limit": 1,
        "server_version_string": "bor-0.1.0",
        "fork_db_head_block_num": 7,
        "fork_db_head_block_id": head_id,
    } | changes


def account_json(name: str, key: str, **changes: Any) -> dict[str, Any]:
    """get_account of ``name`` whose key is ``key`` (BoR's text), with ``changes``."""
    limit = {"used": 0, "available": -1, "max": -1}
    auth = {"threshold": 1, "keys": [{"key": key, "weight": 1}], "accounts": [], "waits": []}
    return {
        "account_name": name,
        "key": key,
        "balance": 10**9,
        "staked": 0,
        "unbonding": [],
        "voter_info": {
            "producers": [],
            "weight": 0,
            "owner": name,
            "proxy": "",
            "staked": 0,
            "last_vote_weight": 0.0,
            "proxied_vote_weight": 0.0,
            "is_proxy": False,
            "reserved2": 0,
            "reserved3": "",
        },
        "producer": None,
        "head_block_num": 7,
        "head_block_time": "2026-01-01T00:00:00.000",
        "privileged": False,
        "last_code_update": "1970-01-01T00:00:00.000",
        "created": "1970-01-01T00:00:00.000",
        "core_liquid_balance": "100000.0000 BOR",
        "ram_quota": 1,
        "ram_usage": 0,
        "net_weight": -1,
        "cpu_weight": -1,
        "net_limit": limit,
        "cpu_limit": limit,
        "permissions": [
            {"perm_name": "owner", "parent": "", "required_auth": auth},
            {"perm_name": "active", "parent": "owner", "required_auth": auth},
        ],
    } | changes
