"""The contract parameters in genesis: bounded, written only when not default, and a chain
that keeps every default keeps the chain id it had before contracts existed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from chain.core.primitives.params import ChainParams
from genesis.errors import GenesisError
from genesis.model import parse_genesis


def _key(n: int) -> str:
    return public_key_to_text(PrivateKey(bytes([n]) * 32).public_key)


# A fixed genesis, so that its chain id can be pinned.
DOC: dict[str, Any] = {
    "initial_timestamp": "2025-01-01T00:00:00.000Z",
    "token": {"symbol": "BOR", "precision": 4, "supply": 3_000_000},
    "governance": ["gov"],
    "chain_params": {"schedule_size": 21},
    "accounts": [
        {"name": "gov", "key": _key(1), "balance": 1_000_000},
        {"name": "alice", "key": _key(2), "balance": 1_000_000},
        {"name": "prod1", "key": _key(3), "balance": 1_000_000},
    ],
    "initial_producers": [{"name": "prod1", "key": _key(3)}],
}
# DOC's chain ids as the code before contracts computed them (dpos, and finality by votes).
DPOS_ID = "b6068a9e77c5c96ef77ead5ca73ea97bd713850ea0c2726df6610b7c8aae758e"
VOTES_ID = "75264b493d4588ea360163f00f7dcab06c11b859caa956ff188c45c860a722f9"


@pytest.fixture
def doc() -> dict[str, Any]:
    return copy.deepcopy(DOC)


def test_default_contract_params_keep_the_chain_id_of_before_contracts(
    doc: dict[str, Any],
) -> None:
    """A genesis without contract parameters, or with each at its default, has the chain id
    the code before contracts gave it, and writes none of them back."""
    assert parse_genesis(doc).chain_id.hex() == DPOS_ID
    defaults = ChainParams()
    doc["chain_params"] |= {"max_tx_fuel": defaults.max_tx_fuel, "contract_deploy": "open"}
    genesis = parse_genesis(doc)
    assert genesis.chain_id.hex() == DPOS_ID
    assert "max_tx_fuel" not in genesis.to_json()["chain_params"]
    doc["chain_params"]["finality"] = "votes"
    assert parse_genesis(doc).chain_id.hex() == VOTES_ID


def test_other_contract_params_are_another_chain_and_survive_a_round_trip(
    doc: dict[str, Any],
) -> None:
    """Contract parameters that differ from their defaults are kept, written to JSON (only
    they), and change the chain id; parsing the written JSON gives the same chain."""
    changed = {"contract_deploy": "approved", "max_code_bytes": 65536, "max_block_fuel": 10**9}
    doc["chain_params"] |= changed
    genesis = parse_genesis(doc)
    assert genesis.params.contract_deploy == "approved"
    assert genesis.params.max_code_bytes == 65536
    assert genesis.chain_id.hex() != DPOS_ID
    written = genesis.to_json()["chain_params"]
    assert {k: written[k] for k in changed} == changed
    assert "max_tx_fuel" not in written
    assert parse_genesis(genesis.to_json()).chain_id == genesis.chain_id


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("contract_deploy", "anyone"),
        ("max_code_bytes", 0),
        ("max_code_bytes", (1 << 20) + 1),
        ("max_memory_pages", 0),
        ("max_tx_fuel", "many"),
        ("max_block_fuel", ChainParams().max_tx_fuel - 1),  # a full transaction would fit no block
        ("max_inline_depth", 17),
        ("max_ram_bytes", -1),
    ],
)
def test_contract_params_out_of_range_are_named(
    doc: dict[str, Any], field: str, value: Any
) -> None:
    """An unknown deploy rule and each limit outside its range is refused, naming the field."""
    doc["chain_params"][field] = value
    with pytest.raises(GenesisError) as info:
        parse_genesis(doc)
    assert info.value.field == f"chain_params.{field}"
