"""A table declared by annotations alone (tests/contract_tools/contracts/indexkit): every
`@secondary` of every key type kept in step without `Table.index`, and the ABI's u128, i128,
f64 and time types as fields, through the generated ABI and serializers."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from contract_tools.build import Built, build
from tests.contract_tools.conftest import TEST_CONTRACTS_DIR, require_toolchain
from tests.contract_tools.test_examples_run import Deployed

ITEMS = [  # owner, big, hash byte, score -> ids 0, 1, 2, 3
    ("carol", 2**100, 3, 2.5),
    ("alice", 5, 1, -1.0),
    ("bob", 2**64, 4, 7.25),
    ("alice", 0, 2, 0.0),
]
TIMES = {
    "at": "2024-05-01T12:00:00.250",
    "day": "2024-05-01T12:00:01",
    "slot": "2024-05-01T12:00:00.500",
}


@pytest.fixture(scope="module")
def indexkit(tmp_path_factory: pytest.TempPathFactory) -> Built:
    require_toolchain()
    directory = tmp_path_factory.mktemp("contracts") / "indexkit"
    shutil.copytree(TEST_CONTRACTS_DIR / "indexkit", directory)
    return build(directory)


def item(i: int) -> dict[str, Any]:
    owner, big, byte, score = ITEMS[i]
    hash_ = bytes([byte]).hex() * 32
    return {"id": i, "owner": owner, "big": str(big), "hash": hash_, "score": score,
            "delta": str(-(2**70) - i), **TIMES}  # fmt: skip


@pytest.fixture
def kit(indexkit: Built) -> Deployed:
    kit = Deployed(indexkit, "kit", [])
    for i in range(len(ITEMS)):
        kit.push("add", {"item": item(i)}, "kit")
    return kit


def walk(kit: Deployed, which: int) -> list[int]:
    ids: list[int] = kit.read("walk", {"which": which})
    return ids


def test_the_abi_types_of_the_fields_and_indexes(indexkit: Built) -> None:
    """U128, I128, f64, TimePoint, TimePointSec and BlockTimestamp fields get the ABI's
    built-in types, and each @secondary its key type, field and index table, in order."""
    kit = Deployed(indexkit, "kit", [])
    types = {f.name: f.type for f in kit.abi.structs["item"]}
    assert types == {
        "id": "u64", "owner": "name", "big": "u128", "hash": "checksum256", "score": "f64",
        "delta": "i128", "at": "time_point", "day": "time_point_sec",
        "slot": "block_timestamp_type",
    }  # fmt: skip
    tables = json.loads(indexkit.abi.read_text())["tables"]
    raw = [s for t in tables for s in t["secondary"]]
    assert [(s["table"], s["type"], s["field"]) for s in raw] == [
        ("byowner", "u64", "owner"), ("bybig", "u128", "big"),
        ("byhash", "checksum256", "hash"), ("byscore", "double", "score"),
    ]  # fmt: skip


def test_every_index_walks_in_its_keys_order(kit: Deployed) -> None:
    """Rows stored through an action land in all four indexes, with no Table.index call:
    each walks in its key's order (ties by primary key)."""
    assert walk(kit, 0) == [1, 3, 2, 0]  # alice, alice, bob, carol
    assert walk(kit, 1) == [3, 1, 2, 0]  # 0, 5, 2**64, 2**100
    assert walk(kit, 2) == [1, 3, 0, 2]  # hash bytes 1, 2, 3, 4
    assert walk(kit, 3) == [1, 3, 0, 2]  # -1.0, 0.0, 2.5, 7.25


def test_update_and_erase_keep_the_declared_indexes_in_step(kit: Deployed) -> None:
    """A changed double key moves its row in that index; an erased row leaves every index."""
    kit.push("setscore", {"id": 1, "score": 100.0}, "kit")
    assert walk(kit, 3) == [3, 0, 2, 1]
    kit.push("rm", {"id": 3}, "kit")
    assert [walk(kit, i) for i in range(4)] == [[1, 2, 0], [1, 2, 0], [1, 0, 2], [0, 2, 1]]


def test_time_f64_and_128_bit_fields_round_trip_through_json(kit: Deployed) -> None:
    """The JSON of a row, stored from JSON by the contract, comes back the same from the
    table and from a read-only action returning the row."""
    for i in range(len(ITEMS)):
        assert kit.row("kit", "items", i) == item(i)
        assert kit.read("get", {"id": i}) == item(i)
