"""contract_tools.testing, the harness a contract's tests use: deploy by directory, push by
name with JSON, rows as JSON, events, fuel, errors and read-only calls."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from chain.abi_check import check_abi
from chain.core.primitives.errors import ContractError, ContractMissingAuthority
from contract_tools.build import CONTRACTS_DIR
from contract_tools.testing import LocalChain, contract_chain
from tests.contract_tools.conftest import require_toolchain

__all__ = ["contract_chain"]  # the fixture, as the installed plugin gives it


def test_the_fixture_deploys_a_contract_directory_and_runs_it(
    contract_chain: LocalChain, tmp_path: Path
) -> None:
    """deploy builds a contract directory and setcodes it; push takes JSON arguments and
    names its authorizers, a failed push raises the contract's error and changes nothing,
    rows come back as JSON in key order, events decoded, fuel counted."""
    require_toolchain()
    shutil.copytree(CONTRACTS_DIR / "examples" / "token", tmp_path / "token")
    built = contract_chain.deploy("token", tmp_path / "token")
    check_abi(built.abi.read_text())
    contract_chain.push(
        "token", "create", {"issuer": "alice", "maximum_supply": "9.00 AB"}, "token"
    )
    contract_chain.push(
        "token", "issue", {"to": "alice", "quantity": "5.00 AB", "memo": ""}, "alice"
    )
    args = {"from": "alice", "to": "bob", "quantity": "2.00 AB", "memo": "m"}
    result = contract_chain.push("token", "transfer", args, "alice")
    assert result.events == [("transfer", args)]
    assert 0 < result.fuel < 1_000_000 and result.console == "" and result.return_value is None
    assert contract_chain.rows("token", "bob", "accounts") == [{"balance": "2.00 AB"}]
    with pytest.raises(ContractError, match="overdrawn balance"):
        contract_chain.push("token", "transfer", args | {"quantity": "9.00 AB"}, "alice")
    with pytest.raises(ContractMissingAuthority):
        contract_chain.push("token", "transfer", args, "bob")
    assert contract_chain.rows("token", "alice", "accounts") == [{"balance": "3.00 AB"}]


def test_read_only_calls_answer_the_result(tmp_path: Path) -> None:
    """call runs a read-only action on the state and decodes its result; a missing row is the
    contract's error."""
    require_toolchain()
    chain = LocalChain()
    chain.create_accounts("admin", "rega", "alice")
    shutil.copytree(CONTRACTS_DIR / "examples" / "registry", tmp_path / "registry")
    chain.deploy("registry", tmp_path / "registry")
    chain.push("registry", "init", {"admin": "admin"}, "registry")
    chain.push("registry", "addregistrar", {"account": "rega"}, "admin")
    asset = {"registrar": "rega", "id": 4, "owner": "alice", "uri": "u", "hash": "11" * 32}
    chain.push("registry", "register", asset, "rega")
    assert chain.call("registry", "ownerof", {"id": 4}) == "alice"
    assert chain.call("registry", "assetsof", {"owner": "alice"}) == [4]
    with pytest.raises(ContractError, match="no such asset"):
        chain.call("registry", "ownerof", {"id": 5})
