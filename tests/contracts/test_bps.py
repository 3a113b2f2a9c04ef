"""The BPS contract's registry side on the node's runtime: brokers, tenants, members, topics
and ACLs, every refusal, tenant isolation and what canaccess answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chain.core.execution.contracts import name_to_u64
from chain.core.primitives.errors import ContractError, ContractMissingAuthority
from contract_tools.build import Built
from contract_tools.testing import LocalChain
from tests.contracts.conftest import BROKER_KEYS, NOW_US, Bps, packed_key

PRODUCE, CONSUME, ADMIN = 1, 2, 4


def topic(bps: Bps, name: str = "orders", tenant: str = "acme", owner: str = "alice") -> int:
    args = {"tenant": tenant, "topic": name, "partitions": 3, "replicas": 3, "retention_s": 3600}
    bps.push("createtopic", args, owner)
    return int(bps.row(tenant, "topics", name_u64(name))["id"])


def name_u64(text: str) -> int:
    return name_to_u64(text)


def grant(bps: Bps, principal: str, pattern: str, rights: int, expires: int = 0) -> int:
    args = {
        "tenant": "acme",
        "principal": principal,
        "pattern": pattern,
        "rights": rights,
        "expires": expires,
    }
    events = bps.push("grant", args, "alice").events
    assert events == [("granted", {**args, "id": events[0][1]["id"]})]
    return int(events[0][1]["id"])


def test_init_and_brokers_are_the_admins(bps: Bps) -> None:
    """init runs once; only the admin registers, updates and removes brokers, whose key must
    be a packed K1 key and whose url is bounded."""
    with pytest.raises(ContractError, match="already initialized"):
        bps.push("init", {"admin": "bob"}, "bps")
    key = packed_key(BROKER_KEYS["brk.a"]).hex()
    new = {"broker": "brk.a", "url": "nats://10.0.0.1:4222", "key": key}
    with pytest.raises(ContractMissingAuthority, match=r"bor\.gov"):
        bps.push("regbroker", new, "brk.a")
    assert bps.push("regbroker", new, "bor.gov").events == [("registered", new)]
    row = bps.row("bps", "brokers", name_u64("brk.a"))
    assert (row["url"], row["since"]) == ("nats://10.0.0.1:4222", NOW_US)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"key": key[:-2]}, "34 bytes, type 0"),
        ({"key": "01" + key[2:]}, "34 bytes, type 0"),
        ({"url": "x" * 257}, "1 to 256 bytes"),
        ({"broker": "nobody"}, "broker account does not exist"),
    ]
    for bad, why in cases:
        with pytest.raises(ContractError, match=why):
            bps.push("regbroker", {**new, **bad}, "bor.gov")
    assert bps.push("rmbroker", {"broker": "brk.a"}, "bor.gov").events == [
        ("unregistered", {"broker": "brk.a"})
    ]
    with pytest.raises(ContractError, match="not a registered broker"):
        bps.push("rmbroker", {"broker": "brk.a"}, "bor.gov")
    assert [b["account"] for b in bps.rows("bps", "brokers")] == ["brk.b"]


def test_tenants_and_members(bps: Bps) -> None:
    """The admin adds tenants; the tenant's owner adds members (existing accounts, an enckey
    of 0 or 33 bytes); a member sets its own enckey."""
    with pytest.raises(ContractMissingAuthority):
        bps.push("addtenant", {"tenant": "other", "owner": "bob"}, "bob")
    with pytest.raises(ContractError, match="tenant already exists"):
        bps.push("addtenant", {"tenant": "acme", "owner": "bob"}, "bor.gov")
    with pytest.raises(ContractError, match="owner account does not exist"):
        bps.push("addtenant", {"tenant": "other", "owner": "nobody"}, "bor.gov")
    assert bps.push("addtenant", {"tenant": "other", "owner": "bob"}, "bor.gov").events == [
        ("tenantadded", {"tenant": "other", "owner": "bob"})
    ]
    enckey = "02" + "ab" * 32
    member = {"tenant": "acme", "account": "carol", "enckey": enckey}
    with pytest.raises(ContractMissingAuthority, match="alice"):
        bps.push("addmember", member, "bob")
    with pytest.raises(ContractError, match="no such tenant"):
        bps.push("addmember", {**member, "tenant": "nope"}, "alice")
    with pytest.raises(ContractError, match="33 bytes"):
        bps.push("addmember", {**member, "enckey": "02ab"}, "alice")
    with pytest.raises(ContractError, match="member account does not exist"):
        bps.push("addmember", {**member, "account": "nobody"}, "alice")
    assert bps.push("addmember", member, "alice").events == [("memberadded", member)]
    with pytest.raises(ContractError, match="already a member"):
        bps.push("addmember", member, "alice")
    cleared = {**member, "enckey": ""}
    with pytest.raises(ContractMissingAuthority, match="carol"):
        bps.push("setenckey", cleared, "alice")
    with pytest.raises(ContractError, match="not a member"):
        bps.push("setenckey", {**cleared, "account": "dave"}, "dave")
    assert bps.push("setenckey", cleared, "carol").events == [("enckeyset", cleared)]
    assert bps.row("acme", "members", name_u64("carol")) == {
        "account": "carol",
        "enckey": "",
        "since": NOW_US,
    }


def test_topics_take_ids_and_round_robin_brokers(bps: Bps) -> None:
    """createtopic (owner only) numbers topics from 1 and spreads partitions over the brokers
    in key order; bad sizes, a duplicate, an unknown tenant or no broker are refused."""
    args = {"tenant": "acme", "topic": "orders", "partitions": 3, "replicas": 3, "retention_s": 60}
    with pytest.raises(ContractMissingAuthority):
        bps.push("createtopic", args, "bob")
    result = bps.push("createtopic", args, "alice")
    assert result.events == [("topiccreated", {**args, "id": 1})]
    assert [(p["partition"], p["broker"], p["last"]) for p in bps.rows(1, "parts")] == [
        (0, "brk.a", 0), (1, "brk.b", 0), (2, "brk.a", 0),
    ]  # fmt: skip
    assert topic(bps, "clicks") == 2
    assert bps.row("bps", "config", 0)["next_topic"] == 3
    cases: list[tuple[dict[str, Any], str]] = [
        ({"partitions": 0}, "partitions must be 1 to 64"),
        ({"partitions": 65}, "partitions must be 1 to 64"),
        ({"replicas": 6}, "replicas must be 1 to 5"),
        ({"topic": "clicks"}, "topic already exists"),
        ({"tenant": "nope"}, "no such tenant"),
    ]
    for bad, why in cases:
        with pytest.raises(ContractError, match=why):
            bps.push("createtopic", {**args, "topic": "new", **bad}, "alice")
    for broker in BROKER_KEYS:
        bps.push("rmbroker", {"broker": broker}, "bor.gov")
    with pytest.raises(ContractError, match="no broker is registered"):
        bps.push("createtopic", {**args, "topic": "new"}, "alice")


def test_grant_checks_its_arguments_and_tenant(bps: Bps) -> None:
    """grant takes an account, rights 1..7, a name, prefix* or * pattern; tenant A's owner
    cannot grant or revoke in tenant B, whose ACLs live in B's scope."""
    bps.push("addtenant", {"tenant": "beta", "owner": "bob"}, "bor.gov")
    ok = {"tenant": "acme", "principal": "carol", "pattern": "orders", "rights": 3, "expires": 0}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"principal": "nobody"}, "principal account does not exist"),
        ({"rights": 0}, "rights must be 1 to 7"),
        ({"rights": 8}, "rights must be 1 to 7"),
        ({"pattern": ""}, "1 to 13 bytes"),
        ({"pattern": "Orders"}, "only a-z, 1-5"),
        ({"pattern": "or*ders"}, "only a-z, 1-5"),
        ({"pattern": "orders6"}, "only a-z, 1-5"),
        ({"pattern": "abcdefghijklmn"}, "1 to 13 bytes"),
        ({"pattern": "orders."}, "not a topic name"),
        ({"expires": -1}, "expires must be 0"),
        ({"tenant": "nope"}, "no such tenant"),
    ]
    for bad, why in cases:
        with pytest.raises(ContractError, match=why):
            bps.push("grant", {**ok, **bad}, "alice")
    with pytest.raises(ContractMissingAuthority, match="bob"):
        bps.push("grant", {**ok, "tenant": "beta"}, "alice")
    assert [grant(bps, "carol", p, 1) for p in ("orders", "ord*", "*", "abcdefghijkl*")] == [
        0,
        1,
        2,
        3,
    ]
    assert [a["id"] for a in bps.rows("acme", "acls")] == [0, 1, 2, 3]
    assert bps.rows("beta", "acls") == []
    with pytest.raises(ContractMissingAuthority, match="bob"):
        bps.push("revoke", {"tenant": "beta", "id": 0}, "alice")
    with pytest.raises(ContractError, match="no such acl in the tenant"):
        bps.push("revoke", {"tenant": "beta", "id": 0}, "bob")
    with pytest.raises(ContractMissingAuthority, match="alice"):
        bps.push("revoke", {"tenant": "acme", "id": 0}, "bob")
    assert bps.push("revoke", {"tenant": "acme", "id": 1}, "alice").events == [
        ("revoked", {"tenant": "acme", "id": 1, "principal": "carol", "pattern": "ord*"})
    ]
    assert [a["id"] for a in bps.rows("acme", "acls")] == [0, 2, 3]


def test_canaccess_follows_members_grants_revocations_and_expiry(
    bps: Bps, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner may do anything on its topics; a member has the union of its live ACLs that
    match the topic (exact, prefix, *); a revoked or expired ACL, a non-member, another
    tenant's topic or an unknown one give nothing."""
    topic(bps, "orders")
    topic(bps, "clicks")
    bps.push("addtenant", {"tenant": "beta", "owner": "bob"}, "bor.gov")
    topic(bps, "orders", tenant="beta", owner="bob")
    assert all(bps.can(t, "alice", ADMIN | CONSUME | PRODUCE) for t in ("orders", "clicks"))
    assert not bps.can("orders", "bob", PRODUCE)  # owner of beta, nobody in acme
    assert not bps.can("orders", "alice", PRODUCE, tenant="beta")
    assert not bps.can("nosuch", "alice", PRODUCE) and not bps.can("orders", "alice", 1, "nope")
    exact = grant(bps, "carol", "orders", PRODUCE)
    assert not bps.can("orders", "carol", PRODUCE), "an ACL gives nothing to a non-member"
    bps.push("addmember", {"tenant": "acme", "account": "carol", "enckey": ""}, "alice")
    assert bps.can("orders", "carol", PRODUCE) and not bps.can("orders", "carol", CONSUME)
    assert not bps.can("clicks", "carol", PRODUCE)
    grant(bps, "carol", "cl*", CONSUME, expires=NOW_US + 1_000_000)
    grant(bps, "carol", "*", ADMIN, expires=NOW_US)  # expired as it is granted
    assert bps.can("clicks", "carol", CONSUME) and not bps.can("clicks", "carol", ADMIN)
    assert not bps.can("clicks", "carol", CONSUME | PRODUCE)
    bps.push("revoke", {"tenant": "acme", "id": exact}, "alice")
    assert not bps.can("orders", "carol", PRODUCE)
    grant(bps, "carol", "orders", PRODUCE | CONSUME)
    monkeypatch.setattr("contract_tools.testing.BLOCK_TIME_S", NOW_US // 1_000_000 + 2)
    assert not bps.can("clicks", "carol", CONSUME), "the cl* grant has expired"
    assert bps.can("orders", "carol", PRODUCE | CONSUME), "expires 0 never expires"
    with pytest.raises(ContractError, match="right must be 1 to 7"):
        bps.can("orders", "carol", 0)


def test_rmmember_drops_the_members_acls(bps: Bps) -> None:
    """rmmember (owner only) erases the member and every ACL naming it in that tenant, and
    leaves the other principals' and other tenants' ACLs."""
    topic(bps, "orders")
    bps.push("addtenant", {"tenant": "beta", "owner": "bob"}, "bor.gov")
    for account in ("carol", "dave"):
        bps.push("addmember", {"tenant": "acme", "account": account, "enckey": ""}, "alice")
    bps.push(
        "grant",
        {"tenant": "beta", "principal": "carol", "pattern": "*", "rights": 1, "expires": 0},
        "bob",
    )
    kept = grant(bps, "dave", "*", PRODUCE)
    grant(bps, "carol", "orders", PRODUCE)
    grant(bps, "carol", "ord*", CONSUME)
    with pytest.raises(ContractMissingAuthority, match="alice"):
        bps.push("rmmember", {"tenant": "acme", "account": "carol"}, "carol")
    assert bps.push("rmmember", {"tenant": "acme", "account": "carol"}, "alice").events == [
        ("removed", {"tenant": "acme", "account": "carol", "acls": 2})
    ]
    assert [a["id"] for a in bps.rows("acme", "acls")] == [kept]
    assert [a["principal"] for a in bps.rows("beta", "acls")] == ["carol"]
    assert bps.row("acme", "members", name_u64("carol")) is None
    assert not bps.can("orders", "carol", PRODUCE) and bps.can("orders", "dave", PRODUCE)
    with pytest.raises(ContractError, match="not a member"):
        bps.push("rmmember", {"tenant": "acme", "account": "carol"}, "alice")


# What the broker's sidecar and the bps client read and send: the names are their contract.
TABLES = {
    "config": ["admin", "next_topic", "next_anchor", "next_acl"],
    "brokers": ["account", "url", "key", "since"],
    "tenants": ["tenant", "owner", "since"],
    "members": ["account", "enckey", "since"],
    "topics": ["topic", "id", "partitions", "replicas", "retention_s", "since"],
    "parts": ["partition", "broker", "anchors", "last", "head"],
    "acls": ["id", "principal", "pattern", "rights", "expires"],
    "anchors": [
        "id", "topic", "place", "partition", "first", "last", "root", "prev", "broker", "signature",
        "block", "time",
    ],
    "wraps": ["account", "version", "wrapped", "since"],
}  # fmt: skip
ACTIONS = {
    "init": ["admin"],
    "regbroker": ["broker", "url", "key"],
    "rmbroker": ["broker"],
    "addtenant": ["tenant", "owner"],
    "addmember": ["tenant", "account", "enckey"],
    "rmmember": ["tenant", "account"],
    "setenckey": ["tenant", "account", "enckey"],
    "createtopic": ["tenant", "topic", "partitions", "replicas", "retention_s"],
    "assign": ["tenant", "topic", "partition", "broker"],
    "grant": ["tenant", "principal", "pattern", "rights", "expires"],
    "revoke": ["tenant", "id"],
    "anchor": ["tenant", "topic", "partition", "first", "last", "root", "prev", "signature"],
    "wrapkey": ["tenant", "topic", "account", "version", "wrapped"],
    "canaccess": ["tenant", "topic", "principal", "right"],
}


def test_the_abi_is_the_one_bps_clients_are_written_against(bps_built: Built) -> None:
    """The generated ABI has exactly the tables, fields, actions, indexes and read-only
    action the sidecar and client use."""
    abi = json.loads(bps_built.abi.read_text())
    structs = {s["name"]: [f["name"] for f in s["fields"]] for s in abi["structs"]}
    assert {t["name"]: structs[t["type"]] for t in abi["tables"]} == TABLES
    assert {a["name"]: structs[a["type"]] for a in abi["actions"]} == ACTIONS
    assert [a["name"] for a in abi["actions"] if a.get("read_only")] == ["canaccess"]
    indexes = {t["name"]: [(i["name"], i["field"]) for i in t["secondary"]] for t in abi["tables"]}
    assert (indexes["acls"], indexes["anchors"]) == (
        [("byprincipal", "principal")],
        [("bytopic", "place")],
    )


def test_nothing_runs_before_init(contract_chain: LocalChain, bps_built: Built) -> None:
    """Before init there is no admin, so the admin's actions are refused by name; init needs
    the contract's own authority."""
    contract_chain.deploy("bps", bps_built)
    with pytest.raises(ContractError, match="bps is not initialized"):
        contract_chain.push("bps", "addtenant", {"tenant": "acme", "owner": "alice"}, "alice")
    with pytest.raises(ContractMissingAuthority, match="bps"):
        contract_chain.push("bps", "init", {"admin": "alice"}, "alice")
    with pytest.raises(ContractError, match="admin account does not exist"):
        contract_chain.push("bps", "init", {"admin": "nobody"}, "bps")
