"""The SDK's Table, built with the pinned asc and run by the node's runtime: keys from
availablePrimaryKey, reverse walks, upper bounds and four secondary indexes of the CDT's
key types kept in step with the rows."""

from __future__ import annotations

import struct

import pytest

from chain.core.execution import ram
from chain.core.execution.contracts import name_to_u64
from contract_tools.build import Built
from tests.contract_tools.test_examples_run import Deployed

POSTS = [  # owner, score, hash byte, big -> ids 0, 1, 2, 3
    ("alice", 2.5, 3, 2**100),
    ("bob", -1.0, 1, 5),
    ("bob", 7.25, 2, 2**64),
    ("carol", 0.0, 4, 0),
]


@pytest.fixture
def kit(tablekit: Built) -> Deployed:
    kit = Deployed(tablekit, "kit", ["alice"])
    for owner, score, byte, big in POSTS:
        args = {"owner": owner, "score": score, "hash": bytes([byte]).hex() * 32, "big": str(big)}
        kit.push("add", args, "kit")
    return kit


def listed(kit: Deployed, which: int, arg: int = 0) -> list[int]:
    ids: list[int] = kit.read("list", {"which": which, "arg": arg})
    return ids


def test_rows_and_every_index_walk_in_their_order(kit: Deployed) -> None:
    """Primary keys come from availablePrimaryKey; rows walk backwards from end(); the double
    index backwards, the checksum256 and u128 indexes forwards, each in its key's order; an
    upper bound is the first key past it, on rows and on an index."""
    assert listed(kit, 0) == [3, 2, 1, 0]
    assert listed(kit, 1) == [2, 0, 3, 1]  # scores 7.25, 2.5, 0.0, -1.0
    assert listed(kit, 2) == [1, 2, 0, 3]  # hash bytes 1, 2, 3, 4
    assert listed(kit, 3) == [3, 1, 2, 0]  # big 0, 5, 2**64, 2**100
    assert listed(kit, 4, 1) == [2, 3]
    assert listed(kit, 5, name_to_u64("bob")) == [1, 2]
    assert listed(kit, 6, struct.unpack("<Q", struct.pack("<d", 2.5))[0]) == [2]
    assert kit.row("kit", "posts", 1)["big"] == "5"


def test_update_and_erase_keep_every_index_in_step(kit: Deployed) -> None:
    """A changed key moves the row in its index; an erased row leaves every index, its
    storage is refunded, and its key is not reused while a larger one exists."""
    kit.push("setscore", {"id": 1, "score": 100.0}, "kit")
    assert listed(kit, 1) == [1, 2, 0, 3]
    before = ram.used(kit.view, "kit")
    kit.push("rm", {"id": 0}, "kit")
    assert listed(kit, 0) == [3, 2, 1]
    assert listed(kit, 3) == [3, 1, 2]
    assert listed(kit, 2) == [1, 2, 3]
    assert ram.used(kit.view, "kit") < before
    added = {"owner": "alice", "score": 1.0, "hash": "00" * 32, "big": "1"}
    trace = kit.push("add", added, "kit").trace
    assert trace.actions[0].return_value == (4).to_bytes(8, "little")
