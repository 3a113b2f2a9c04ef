"""Reading a topic's anchors from the chain and checking them: an audit reads the contract's
``anchors`` table through its ``bytopic`` index bounded to one topic's id, so it reads that
topic's anchors and nothing else, however long the chain; ``verify`` checks one message's
Merkle path against the anchor that covers it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from bor_client import AsyncClient, RowsQuery
from bps import merkle
from bps.directory import CONTRACT, Topic
from bps.errors import BpsError, NotYet, Tampered

ZERO = b"\x00" * 32
PAGE = 500


PLACE_TOPIC_SHIFT = 44
PLACE_PARTITION_SHIFT = 38


def place(topic_id: int, partition: int, anchor_id: int) -> int:
    """An anchor's key in the contract's ``bytopic`` index (unique, so pages follow keys)."""
    return topic_id << PLACE_TOPIC_SHIFT | partition << PLACE_PARTITION_SHIFT | anchor_id


async def anchors_of(
    client: AsyncClient, topic_id: int, partition: int | None = None
) -> AsyncIterator[dict[str, Any]]:
    """The topic's anchors (one partition's, if given) in index order: by partition, then
    oldest first."""
    if partition is None:
        lower, upper = place(topic_id, 0, 0), place(topic_id + 1, 0, 0) - 1
    else:
        lower, upper = place(topic_id, partition, 0), place(topic_id, partition + 1, 0) - 1
    while True:
        query = RowsQuery(
            CONTRACT,
            "anchors",
            CONTRACT,
            lower_bound=lower,
            upper_bound=upper,
            secondary=True,
            limit=PAGE,
        )
        page = await client.get_table_rows(query)
        for row in page.rows:
            if int(row["topic"]) == topic_id:
                yield row
        if not page.more or not page.next_key:
            return
        if int(page.next_key) <= lower:  # a page must move on, or this would never end
            raise BpsError(f"the node's page of anchors did not move past {lower}")
        lower = int(page.next_key)


async def anchor_for(
    client: AsyncClient, topic: Topic, partition: int, offset: int
) -> dict[str, Any] | None:
    async for row in anchors_of(client, topic.id, partition):
        if int(row["first"]) <= offset <= int(row["last"]):
            return row
    return None


async def anchor_by_id(client: AsyncClient, anchor_id: int) -> dict[str, Any] | None:
    page = await client.get_table_rows(
        RowsQuery(
            CONTRACT, "anchors", CONTRACT, lower_bound=anchor_id, upper_bound=anchor_id, limit=1
        )
    )
    return page.rows[0] if page.rows else None


def digest_of(row: dict[str, Any]) -> bytes:
    return merkle.anchor_digest(
        int(row["topic"]),
        int(row["partition"]),
        int(row["first"]),
        int(row["last"]),
        bytes.fromhex(row["root"]),
        bytes.fromhex(row["prev"]),
    )


@dataclass(slots=True)
class Audit:
    """What an audit found: per partition the anchors and the last offset covered, the
    anchors not yet in an irreversible block, and every break in a partition's chain."""

    topic: Topic
    lib: int
    anchors: int = 0
    rows_read: int = 0
    covered: dict[int, int] = field(default_factory=dict)
    pending: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


async def audit(client: AsyncClient, topic: Topic) -> Audit:
    """Every anchor of ``topic``, each checked: offsets contiguous from 1 in each partition,
    ``prev`` the previous anchor's digest, and its block irreversible."""
    report = Audit(topic, (await client.get_info()).last_irreversible_block_num)
    heads: dict[int, bytes] = {}
    async for row in anchors_of(client, topic.id):
        report.rows_read += 1
        p, first, last = int(row["partition"]), int(row["first"]), int(row["last"])
        report.anchors += 1
        if first != report.covered.get(p, 0) + 1:
            report.problems.append(f"anchor {row['id']}: partition {p} starts at {first}")
        if bytes.fromhex(row["prev"]) != heads.get(p, ZERO):
            report.problems.append(f"anchor {row['id']}: prev is not the previous anchor")
        if int(row["block"]) > report.lib:
            report.pending.append(int(row["id"]))
        heads[p] = digest_of(row)
        report.covered[p] = last
    return report


async def verify(
    client: AsyncClient,
    topic: Topic,
    partition: int,
    offset: int,
    payload: bytes,
    proof: dict[str, Any],
) -> dict[str, Any]:
    """``payload`` at ``offset`` is what the anchor in an irreversible block committed to;
    raises Tampered otherwise (NotYet while the anchor's block is reversible). The anchor is
    read from the chain, not taken from the broker."""
    row = await anchor_by_id(client, int(proof["anchor"]))
    if row is None or int(row["topic"]) != topic.id or int(row["partition"]) != partition:
        raise Tampered("the proof names an anchor of another partition")
    first, last = int(row["first"]), int(row["last"])
    if not first <= offset <= last:
        raise Tampered(f"anchor {row['id']} does not cover offset {offset}")
    leaf = merkle.leaf(topic.id, partition, offset, payload)
    try:
        got = merkle.root_from_proof(leaf, offset - first, last - first + 1, list(proof["path"]))
    except ValueError as err:
        raise Tampered(str(err)) from None
    if got != bytes.fromhex(row["root"]):
        raise Tampered(f"offset {offset} does not match anchor {row['id']}'s root")
    lib = (await client.get_info()).last_irreversible_block_num
    if int(row["block"]) > lib:
        raise NotYet(f"anchor {row['id']} is in block {row['block']}, not irreversible yet")
    return {"anchor": int(row["id"]), "block": int(row["block"]), "first": first, "last": last}
