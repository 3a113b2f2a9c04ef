"""The sidecars' ACL rule (``bps.directory.allowed``) and the contract's ``canaccess`` give the
same answer for random members, ACL entries, expiries, topics and rights, with the sidecar
side reading the contract's own rows, as a sidecar does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bps.directory import Acl, Tenant, Topic, allowed
from contract_tools.build import Built
from contract_tools.testing import LocalChain
from tests.contracts.conftest import NOW_US, Bps

PEOPLE = ["bob", "carol", "dave"]
TOPICS = ["orders", "orders2", "other"]
PATTERNS = ["*", "orders", "ord*", "o*", "orders2", "x*", "other"]
EXPIRES = [0, NOW_US - 1, NOW_US, NOW_US + 1, NOW_US + 10**9]

entries = st.lists(
    st.tuples(
        st.sampled_from(PEOPLE),
        st.sampled_from(PATTERNS),
        st.integers(1, 7),
        st.sampled_from(EXPIRES),
    ),
    max_size=6,
)


def sidecar_view(bps: Bps) -> Tenant:
    """Tenant acme as a sidecar's Directory reads it from the contract's rows."""
    tenant = Tenant("acme", "alice")
    for row in bps.rows("acme", "members"):
        tenant.members[row["account"]] = bytes.fromhex(row["enckey"])
    for row in bps.rows("acme", "acls"):
        acl = Acl(int(row["id"]), row["principal"], row["pattern"], int(row["rights"]),
                  int(row["expires"]))  # fmt: skip
        tenant.acls[acl.id] = acl
    for row in bps.rows("acme", "topics"):
        tenant.topics[row["topic"]] = Topic("acme", row["topic"], int(row["id"]), 1, 1, 0)
    return tenant


@settings(max_examples=25, deadline=None)
@given(
    members=st.sets(st.sampled_from(PEOPLE)),
    acls=entries,
    topics=st.sets(st.sampled_from(TOPICS), min_size=1),
)
def test_sidecar_and_contract_agree(
    bps_built: Built, members: set[str], acls: list[tuple[str, str, int, int]], topics: set[str]
) -> None:
    chain = LocalChain()
    chain.create_accounts("alice", "bob", "carol")
    bps = Bps(chain, bps_built)
    for person in sorted(members):
        bps.push("addmember", {"tenant": "acme", "account": person, "enckey": ""}, "alice")
    for topic in sorted(topics):
        bps.push("createtopic", {"tenant": "acme", "topic": topic, "partitions": 1,
                                 "replicas": 1, "retention_s": 0}, "alice")  # fmt: skip
    for principal, pattern, rights, expires in acls:
        bps.push("grant", {"tenant": "acme", "principal": principal, "pattern": pattern,
                           "rights": rights, "expires": expires}, "alice")  # fmt: skip
    tenant = sidecar_view(bps)
    for topic in TOPICS:
        for principal in ["alice", *PEOPLE]:
            for right in range(1, 8):
                on_chain = bps.can(topic, principal, right)
                assert allowed(tenant, principal, topic, right, NOW_US) == on_chain, (
                    topic, principal, right, on_chain,
                )  # fmt: skip
