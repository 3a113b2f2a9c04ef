"""The BPS contract's end-to-end key wraps on the node's runtime: only a tenant's owner wraps
a topic's key, only for itself or a member with an enckey, within 128 bytes, with a version
that never goes back; rows live in the topic id's scope."""

from __future__ import annotations

from typing import Any

import pytest

from chain.core.execution.contracts import name_to_u64
from chain.core.primitives.errors import ContractError, ContractMissingAuthority
from tests.contracts.conftest import NOW_US, Bps

ENCKEY = "02" + "ab" * 32


def wrap(
    account: str, version: int = 1, wrapped: bytes = b"\x07" * 93, **over: Any
) -> dict[str, Any]:
    return {"tenant": "acme", "topic": "orders", "account": account, "version": version,
            "wrapped": wrapped.hex(), **over}  # fmt: skip


def setup(bps: Bps) -> int:
    """Topic acme/orders (id 1), bob a member with an enckey, carol a member without."""
    args = {"tenant": "acme", "topic": "orders", "partitions": 1, "replicas": 3, "retention_s": 0}
    bps.push("createtopic", args, "alice")
    bps.push("addmember", {"tenant": "acme", "account": "bob", "enckey": ENCKEY}, "alice")
    bps.push("addmember", {"tenant": "acme", "account": "carol", "enckey": ""}, "alice")
    return int(bps.row("acme", "topics", name_to_u64("orders"))["id"])


def test_the_owner_wraps_for_members_with_an_enckey_and_itself(bps: Bps) -> None:
    """Wraps for bob and alice are stored in the topic id's scope with the event; a later
    version replaces bob's row."""
    topic_id = setup(bps)
    result = bps.push("wrapkey", wrap("bob"), "alice")
    assert result.events == [
        ("keywrapped", {"tenant": "acme", "topic": "orders", "id": topic_id, "account": "bob",
                        "version": 1})
    ]  # fmt: skip
    bps.push("wrapkey", wrap("alice", wrapped=b"\x01"), "alice")
    assert bps.row(topic_id, "wraps", name_to_u64("bob")) == {
        "account": "bob", "version": 1, "wrapped": "07" * 93, "since": NOW_US,
    }  # fmt: skip
    bps.push("wrapkey", wrap("bob", 2, b"\x09" * 128), "alice")
    rows = {r["account"]: (r["version"], r["wrapped"]) for r in bps.rows(topic_id, "wraps")}
    assert rows == {"alice": (1, "01"), "bob": (2, "09" * 128)}


def test_wrapkey_refusals(bps: Bps) -> None:
    """Not the owner, an unknown tenant or topic, a non-member, a member without an enckey,
    version 0, an empty or oversized wrap, and a version going back are each refused."""
    setup(bps)
    bps.push("wrapkey", wrap("bob", 3), "alice")
    with pytest.raises(ContractMissingAuthority, match="alice"):
        bps.push("wrapkey", wrap("bob", 4), "bob")
    cases: list[tuple[dict[str, Any], str]] = [
        (wrap("bob", tenant="nope"), "no such tenant"),
        (wrap("bob", topic="clicks"), "no such topic in the tenant"),
        (wrap("dave"), "not a member"),
        (wrap("carol"), "the member has no enckey"),
        (wrap("bob", 0), "version must be at least 1"),
        (wrap("bob", 4, b""), "1 to 128 bytes"),
        (wrap("bob", 4, b"\x00" * 129), "1 to 128 bytes"),
        (wrap("bob", 2), "never goes back"),
    ]
    for args, why in cases:
        with pytest.raises(ContractError, match=why):
            bps.push("wrapkey", args, "alice")
    bps.push("setenckey", {"tenant": "acme", "account": "carol", "enckey": ENCKEY}, "carol")
    assert bps.push("wrapkey", wrap("carol", 3), "alice").events[0][0] == "keywrapped"
