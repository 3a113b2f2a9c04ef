"""The host API's one table: what it registers, and the copies made from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.vm import host, host_crypto, host_tables
from chain.vm.hostapi import I32, I64, Category, HostApi, env_ts, merge, parse_signature
from chain.vm.validate import HOST_API, HOST_SIGNATURES
from scripts import host_api

ENV_TS = Path(__file__).resolve().parents[3] / "contracts" / "sdk" / "assembly" / "env.ts"


def test_committed_env_ts_is_the_generated_one() -> None:
    """contracts/sdk/assembly/env.ts is exactly what the node's table generates."""
    assert ENV_TS.read_text(encoding="utf-8") == env_ts(HOST_API.values())
    assert host_api.main(["--check"]) == 0


def test_every_declared_import_is_linked_with_its_table_signature() -> None:
    """Each env.ts declaration names a host function of the table, and the allow-list's
    wasm types are the table's."""
    declared = [
        line.split('"')[3] for line in ENV_TS.read_text().splitlines() if "@external" in line
    ]
    assert declared == list(HOST_API)
    assert HOST_SIGNATURES["db_store_i64"] == ((I64, I64, I64, I64, I32, I32), (I32,))
    assert HOST_SIGNATURES["db_idx256_lowerbound"] == ((I64, I64, I64, I32, I32, I32), (I32,))
    assert HOST_SIGNATURES["recover_key"] == ((I32, I32, I32, I32, I32), (I32,))


def test_table_holds_antelopes_groups_in_order() -> None:
    """Functions come grouped by category, every database family complete."""
    categories = [fn.category for fn in HOST_API.values()]
    assert categories == sorted(categories, key=list(Category).index)
    for family in ("idx64", "idx128", "idx256", "idx_double"):
        names = {n for n in HOST_API if n.startswith(f"db_{family}_")}
        ops = {n.removeprefix(f"db_{family}_") for n in names}
        assert ops == {
            "store",
            "update",
            "remove",
            "find_secondary",
            "find_primary",
            "lowerbound",
            "upperbound",
            "next",
            "previous",
            "end",
        }
    for name in ("db_previous_i64", "db_upperbound_i64", "db_end_i64", "sha512", "ripemd160"):
        assert name in HOST_API
    assert HOST_API["sha1"].body is host_crypto.sha1
    assert HOST_API["db_end_i64"].body is host_tables.db_end_i64
    assert HOST_API["require_auth"].body is host.require_auth


def test_registration_refuses_a_body_that_does_not_match_its_signature() -> None:
    """A body taking a different number of arguments than its signature is our bug, caught
    at import; so is a name registered twice."""
    api = HostApi()
    with pytest.raises(AssertionError, match="signature"):

        @api.function(Category.SYSTEM, "a: i32 -> void")
        def two(act: object, a: int, b: int) -> None: ...

    @api.function(Category.SYSTEM, "a: i32 -> i32")
    def one(act: object, a: int) -> int:
        return a

    with pytest.raises(AssertionError, match="twice"):
        api.function(Category.SYSTEM, "a: i32 -> i32", name="one")(one)
    other = HostApi()
    other.function(Category.SYSTEM, "a: i32 -> i32", name="one")(one)
    with pytest.raises(AssertionError, match="twice"):
        merge(api, other)
    with pytest.raises(AssertionError, match="unknown type"):
        parse_signature("a: i8 -> void")


def test_the_contracts_doc_names_every_host_function() -> None:
    """docs/contracts.md's table of the host API names each function of the node's table."""
    doc = (ENV_TS.parents[3] / "docs" / "contracts.md").read_text(encoding="utf-8")
    assert [name for name in HOST_API if f"`{name}`" not in doc] == []
