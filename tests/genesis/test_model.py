"""Genesis validation names the bad field; the chain id ignores formatting, not values."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from chain.core.execution.sizes import min_block_bytes
from chain.core.primitives.crypto import PrivateKey, public_key_to_text, sha256
from chain.core.primitives.encoding import pack
from chain.core.primitives.params import DEFAULT_MAX_BLOCK_BYTES, MAX_BLOCK_BYTES
from genesis.devnet import make_dev_genesis, write_dev_genesis
from genesis.errors import GenesisError
from genesis.model import load_genesis, parse_genesis


@pytest.fixture
def doc() -> dict[str, Any]:
    """A generated dpos genesis (the rule a file without chain_params.finality gets)."""
    genesis, _ = make_dev_genesis(3, params={"finality": "dpos"})
    return genesis.to_json()


def test_chain_id_ignores_formatting_and_follows_values(doc: dict[str, Any]) -> None:
    """The chain id ignores JSON formatting (indentation) but changes when a balance and the supply
    change."""
    genesis = parse_genesis(doc)
    assert parse_genesis(json.loads(json.dumps(doc, indent=7))).chain_id == genesis.chain_id
    changed = copy.deepcopy(doc)
    changed["accounts"][1]["balance"] += 1
    changed["token"]["supply"] += 1
    assert parse_genesis(changed).chain_id != genesis.chain_id


def _break(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    broken = copy.deepcopy(doc)
    node: Any = broken
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    last = parts[-1]
    if value is KeyError:
        del node[last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return broken


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("initial_timestamp", "yesterday", "initial_timestamp"),
        ("initial_timestamp", KeyError, "initial_timestamp"),
        ("token.symbol", "bor", "token.symbol"),
        ("token.supply", 5, "token.supply"),
        ("accounts.0.name", "Not-A-Name", "accounts[0].name"),
        ("accounts.1.name", "bor.gov", "accounts[1].name"),
        ("accounts.0.key", "PUB_K1_00", "accounts[0].key"),
        ("accounts.0.balance", -1, "accounts[0].balance"),
        ("governance", ["nobody"], "governance[0]"),
        ("governance", [], "governance"),
        ("initial_producers", [], "initial_producers"),
        ("initial_producers.0.name", "nobody", "initial_producers[0].name"),
        ("chain_params.schedule_size", 0, "chain_params.schedule_size"),
        ("chain_params.max_tx_lifetime_s", 7200, "chain_params.max_tx_lifetime_s"),
        ("chain_params.bogus", 1, "chain_params.bogus"),
        ("chain_params.finality", "pow", "chain_params.finality"),
        ("finalizers", [{"name": "alice", "key": "PUB_K1_00"}], "finalizers"),
    ],
)
def test_each_bad_field_is_named(doc: dict[str, Any], path: str, value: Any, field: str) -> None:
    """Each broken or missing genesis field raises GenesisError naming that field's path."""
    with pytest.raises(GenesisError) as info:
        parse_genesis(_break(doc, path, value))
    assert info.value.field == field


def test_more_producers_than_the_schedule_holds(doc: dict[str, Any]) -> None:
    """More initial producers than schedule_size is refused, naming schedule_size."""
    doc["chain_params"]["schedule_size"] = 2
    with pytest.raises(GenesisError, match="schedule_size"):
        parse_genesis(doc)


def test_files(tmp_path: Path) -> None:
    """A written dev genesis loads and its key file is owner-only; bad JSON or a missing file raise
    GenesisError."""
    genesis_path, keys_path = write_dev_genesis(tmp_path, 2)
    assert load_genesis(genesis_path).initial_producers[1].name == "producerb"
    assert keys_path.stat().st_mode & 0o777 == 0o600
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(GenesisError, match="not valid JSON"):
        load_genesis(tmp_path / "bad.json")
    with pytest.raises(GenesisError, match="cannot read"):
        load_genesis(tmp_path / "missing.json")


def test_a_dpos_chain_keeps_the_id_it_had_before_finality_by_votes(doc: dict[str, Any]) -> None:
    """A dpos genesis hashes exactly as before finality existed, with or without the field;
    the same genesis with finality = votes is another chain."""
    doc["chain_params"].pop("finality", None)
    genesis = parse_genesis(doc)
    assert genesis.params.finality == "dpos"
    p = genesis.params
    old_params = [
        p.token_symbol, p.token_precision, list(p.governance), p.schedule_size, p.blocks_per_turn,
        p.max_tx_lifetime_s, p.max_tx_bytes, p.max_block_txs, p.unbond_delay_s,
        p.election_interval_blocks,
    ]  # fmt: skip
    old = [
        "bor-genesis-v1",
        int(genesis.initial_timestamp.timestamp() * 1000),
        old_params,
        genesis.token_supply,
        [[a.name, a.key, a.balance] for a in genesis.accounts],
        [[x.name, x.key] for x in genesis.initial_producers],
    ]
    assert genesis.chain_id == sha256(pack(old))
    doc["chain_params"]["finality"] = "dpos"
    assert parse_genesis(doc).chain_id == genesis.chain_id
    doc["chain_params"]["finality"] = "votes"
    assert parse_genesis(doc).chain_id != genesis.chain_id


def test_named_finalizers_need_finality_by_votes_and_distinct_keys(doc: dict[str, Any]) -> None:
    """Finalizers in genesis come with weights; they belong to votes chains and may not share
    a key."""
    key = public_key_to_text(PrivateKey.generate().public_key)
    doc["finalizers"] = [{"name": "fina", "key": key, "weight": 3}]
    with pytest.raises(GenesisError, match="finality = votes"):
        parse_genesis(doc)
    doc["chain_params"]["finality"] = "votes"
    genesis = parse_genesis(doc)
    assert genesis.params.finalizers[0][0] == "fina" and genesis.params.finalizers[0][2] == 3
    assert parse_genesis(genesis.to_json()).chain_id == genesis.chain_id
    doc["finalizers"].append({"name": "finb", "key": key})
    with pytest.raises(GenesisError) as info:
        parse_genesis(doc)
    assert info.value.field == "finalizers[1].key"


def test_block_size_limit_absent_is_the_default_and_keeps_the_chain_id(
    doc: dict[str, Any],
) -> None:
    """A genesis without chain_params.max_block_bytes gets DEFAULT_MAX_BLOCK_BYTES and the id
    it had before the limit existed (the same as with the default written out); another limit
    is another chain, and it survives a round trip through to_json."""
    doc["chain_params"].pop("max_block_bytes", None)
    genesis = parse_genesis(doc)
    assert genesis.params.max_block_bytes == DEFAULT_MAX_BLOCK_BYTES
    doc["chain_params"]["max_block_bytes"] = DEFAULT_MAX_BLOCK_BYTES
    assert parse_genesis(doc).chain_id == genesis.chain_id
    doc["chain_params"]["max_block_bytes"] = 1 << 20
    other = parse_genesis(doc)
    assert other.chain_id != genesis.chain_id
    assert parse_genesis(other.to_json()).chain_id == other.chain_id
    assert other.to_json()["chain_params"]["max_block_bytes"] == 1 << 20


@pytest.mark.parametrize(
    ("max_tx_bytes", "max_block_bytes"),
    [
        (8192, min_block_bytes(8192) - 1),  # the largest transaction would never fit
        (1 << 20, 1 << 20),
        (8192, MAX_BLOCK_BYTES + 1),  # no peer could receive such a block
    ],
)
def test_a_block_size_limit_outside_its_range_is_refused(
    doc: dict[str, Any], max_tx_bytes: int, max_block_bytes: int
) -> None:
    """max_block_bytes must hold the largest admissible transaction and stay within
    MAX_BLOCK_BYTES (what a peer frame carries); otherwise genesis names the field."""
    doc["chain_params"] |= {"max_tx_bytes": max_tx_bytes, "max_block_bytes": max_block_bytes}
    with pytest.raises(GenesisError) as info:
        parse_genesis(doc)
    assert info.value.field == "chain_params.max_block_bytes"
    doc["chain_params"]["max_block_bytes"] = min_block_bytes(max_tx_bytes)
    assert parse_genesis(doc).params.max_block_bytes == min_block_bytes(max_tx_bytes)
