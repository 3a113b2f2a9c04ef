"""The BPS contract's anchors on the node's runtime: a partition's assigned broker extends its
hash chain with signed offset ranges (head = the digest the sidecar signs), every mismatch is
refused, the per-topic index finds a topic's anchors, and assign moves a partition."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from bps.audit import place
from chain.core.execution.contracts import name_to_u64
from chain.core.primitives import schema
from chain.core.primitives.errors import ContractError, ContractMissingAuthority
from contract_tools.testing import LocalChain
from tests.contracts.conftest import BROKER_KEYS, NOW_US, ZERO, Bps, anchor_digest, packed_signature

TOPIC = {"tenant": "acme", "topic": "orders"}


def make_topics(bps: Bps) -> None:
    for name in ("orders", "clicks"):
        args = {**TOPIC, "topic": name, "partitions": 2, "replicas": 3, "retention_s": 60}
        bps.push("createtopic", args, "alice")


def signed(
    broker: str, topic_id: int, partition: int, first: int, last: int, prev: bytes, **over: Any
) -> tuple[dict[str, Any], bytes]:
    """An anchor action's arguments as the broker's sidecar makes them, and their digest."""
    root = hashlib.sha256(f"{topic_id}/{partition}/{first}-{last}".encode()).digest()
    digest = anchor_digest(topic_id, partition, first, last, root, prev)
    sig = packed_signature(BROKER_KEYS[broker], digest)
    args = {**TOPIC, "partition": partition, "first": first, "last": last,
            "root": root.hex(), "prev": prev.hex(), "signature": sig.hex()}  # fmt: skip
    return {**args, **over}, digest


def test_three_anchors_chain_their_digests(bps: Bps) -> None:
    """Three anchors of partition 0 (served by brk.a) are stored with the broker, block and
    time; the partition's head is each time the signed digest, which the next one's prev
    must name; the anchors index by topic finds only this topic's anchors."""
    make_topics(bps)
    head, first = ZERO, 1
    for n, count in enumerate((10, 1, 500)):
        args, digest = signed("brk.a", 1, 0, first, first + count - 1, head)
        result = bps.push("anchor", args, "brk.a")
        print(f"anchor #{n}: {result.fuel} fuel")
        assert result.events == [("anchored", {
            "topic": 1, "partition": 0, "first": first, "last": first + count - 1,
            "root": args["root"], "id": n,
        })]  # fmt: skip
        assert result.fuel < 1_500_000
        part = bps.row(1, "parts", 0)
        assert (part["anchors"], part["last"], part["head"]) == (
            n + 1,
            first + count - 1,
            digest.hex(),
        )
        stored = bps.row("bps", "anchors", n)
        assert stored == {
            "id": n, "topic": 1, "place": place(1, 0, n), "partition": 0, "first": first,
            "last": first + count - 1, "root": args["root"], "prev": head.hex(), "broker": "brk.a",
            "signature": args["signature"], "block": bps.chain.ctx.block_num, "time": NOW_US,
        }  # fmt: skip
        head, first = digest, first + count
    other, _ = signed("brk.a", 2, 0, 1, 5, ZERO, topic="clicks")
    bps.push("anchor", other, "brk.a")
    assert [a["topic"] for a in bps.rows("bps", "anchors")] == [1, 1, 1, 2]
    assert bps.row("bps", "config", 0)["next_anchor"] == 4
    assert topic_anchor_ids(bps.chain, 1) == [0, 1, 2] and topic_anchor_ids(bps.chain, 2) == [3]


def topic_anchor_ids(chain: LocalChain, topic_id: int) -> list[int]:
    """The anchors' ids under ``topic_id`` in the `bytopic` index (table anchor.topic): one
    key range of the index, as the RPC's secondary read walks it, and no other topic's."""
    bps, table = name_to_u64("bps"), name_to_u64("anchor.topic")
    start = schema.idx64_key(bps, bps, table, place(topic_id, 0, 0), 0)
    stop = schema.idx64_key(bps, bps, table, place(topic_id + 1, 0, 0) - 1, 2**64 - 1) + b"\xff"
    found: list[int] = []
    while (entry := chain.view.next_raw(start, stop)) is not None:
        found.append(int.from_bytes(entry[0][-8:], "big"))
        start = entry[0] + b"\x00"
    return found


def test_anchor_refusals(bps: Bps) -> None:
    """Wrong broker, wrong first, last below first, a too long range, wrong prev, a signature
    by another key, of other data or of the wrong size, an unknown topic, tenant or partition
    are refused, and the partition stays as it was."""
    make_topics(bps)
    good, digest = signed("brk.b", 1, 1, 1, 9, ZERO)
    with pytest.raises(ContractMissingAuthority, match=r"brk\.b"):
        bps.push("anchor", good, "brk.a")
    forged, _ = signed("brk.a", 1, 1, 1, 9, ZERO)
    tampered = {**good, "root": "ff" * 32}
    for args, why in [
        (
            signed("brk.b", 1, 1, 2, 9, ZERO)[0],
            "first must be the partition's last anchored offset",
        ),
        (signed("brk.b", 1, 1, 1, 0, ZERO)[0], "last must not be below first"),
        (signed("brk.b", 1, 1, 1, 1_000_001, ZERO)[0], "at most 1000000 offsets"),
        (signed("brk.b", 1, 1, 1, 9, b"\x01" * 32)[0], "prev is not the partition's head"),
        (forged, "the signature was not made by the given key"),
        (tampered, "the signature was not made by the given key"),
        ({**good, "signature": good["signature"][:-2]}, "66 bytes"),
        ({**good, "topic": "nosuch"}, "no such topic in the tenant"),
        ({**good, "tenant": "nope"}, "no such tenant"),
        ({**good, "partition": 2}, "no such partition"),
    ]:
        with pytest.raises(ContractError, match=why):
            bps.push("anchor", args, "brk.b")
    assert bps.row(1, "parts", 1)["last"] == 0 and bps.rows("bps", "anchors") == []
    good, digest = signed("brk.b", 1, 1, 1, 1_000_000, ZERO)  # the most one anchor covers
    bps.push("anchor", good, "brk.b")
    assert bps.row(1, "parts", 1)["head"] == digest.hex()


def test_assign_hands_a_partition_to_another_broker(bps: Bps) -> None:
    """A registered broker takes a partition over by signing assign itself; from then on it
    anchors the partition, continuing the chain, and the previous broker is refused."""
    make_topics(bps)
    first, digest = signed("brk.a", 1, 0, 1, 4, ZERO)
    bps.push("anchor", first, "brk.a")
    take = {**TOPIC, "partition": 0, "broker": "brk.b"}
    with pytest.raises(ContractMissingAuthority, match=r"brk\.b"):
        bps.push("assign", take, "brk.a")
    with pytest.raises(ContractError, match="not a registered broker"):
        bps.push("assign", {**take, "broker": "dave"}, "dave")
    with pytest.raises(ContractError, match="no such partition"):
        bps.push("assign", {**take, "partition": 7}, "brk.b")
    with pytest.raises(ContractError, match="no such topic in the tenant"):
        bps.push("assign", {**take, "topic": "nosuch"}, "brk.b")
    assert bps.push("assign", take, "brk.b").events == [
        ("assigned", {**take, "id": 1, "previous": "brk.a"})
    ]
    after, _ = signed("brk.a", 1, 0, 5, 8, digest)
    with pytest.raises(ContractMissingAuthority, match=r"brk\.b"):
        bps.push("anchor", after, "brk.a")
    bps.push("anchor", signed("brk.b", 1, 0, 5, 8, digest)[0], "brk.b")
    assert (bps.row(1, "parts", 0)["broker"], bps.row(1, "parts", 0)["anchors"]) == ("brk.b", 2)
    bps.push("rmbroker", {"broker": "brk.b"}, "bor.gov")
    late, _ = signed("brk.b", 1, 0, 9, 9, bytes.fromhex(bps.row(1, "parts", 0)["head"]))
    with pytest.raises(ContractError, match="the partition's broker is not registered"):
        bps.push("anchor", late, "brk.b")
