"""The stream's messages without a socket: the subscribe message read, and which actions an
``accounts``/``actions`` filter selects in a block."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from chain.core.execution.actions import ACTION_TYPES, Stake, Transfer, VoteProducer
from chain.core.primitives.types import AccountName, BlockId
from chain.testing import now_ms
from genesis.testing import DevNet
from node.api.stream.frames import (
    ACCOUNT_FIELDS,
    ACCOUNT_LIST_FIELDS,
    BlockIndex,
    Cursor,
    Refused,
    Subscription,
    action_accounts,
    parse_subscribe,
)

A, B, C = AccountName("alice"), AccountName("bob"), AccountName("carol")
# Fields of native actions that are not account names.
OTHER_FIELDS = {"amount", "key", "memo", "url", "code", "abi", "action_name", "data", "allowed"}


def test_a_minimal_subscribe_takes_the_defaults() -> None:
    """Only type and stream given: no filters, reversible, from the head."""
    assert parse_subscribe('{"type": "subscribe", "stream": "blocks"}') == Subscription("blocks")


def test_a_full_subscribe_is_read_whole() -> None:
    """Every field given is read, the cursor's id as bytes."""
    block_id = "0000002a" + "cd" * 28
    sub = parse_subscribe(
        json.dumps(
            {
                "type": "subscribe",
                "stream": "actions",
                "accounts": ["alice", "bob"],
                "actions": ["transfer"],
                "irreversible_only": True,
                "cursor": {"num": 42, "id": block_id},
            }
        )
    )
    cursor = Cursor(42, BlockId(bytes.fromhex(block_id)))
    assert sub == Subscription("actions", frozenset({A, B}), frozenset({"transfer"}), True, cursor)


def test_a_blocks_subscription_may_ask_for_transactions() -> None:
    """ "transactions": true on the blocks stream is read; left out, it is false."""
    message = '{"type": "subscribe", "stream": "blocks", "transactions": true}'
    assert parse_subscribe(message) == Subscription("blocks", transactions=True)
    assert not parse_subscribe('{"type": "subscribe", "stream": "blocks"}').transactions


@pytest.mark.parametrize(
    ("message", "why"),
    [
        ({"type": "subscribe", "stream": "blocks", "actions": ["Mint"]}, "not an action name"),
        ({"type": "subscribe", "stream": "blocks", "transactions": 1}, "true or false"),
        ({"type": "subscribe", "stream": "blocks", "transactions": "yes"}, "true or false"),
        (
            {"type": "subscribe", "stream": "actions", "transactions": True},
            "'transactions' is for the blocks stream",
        ),
        (
            {"type": "subscribe", "stream": "transactions", "transactions": False},
            "'transactions' is for the blocks stream",
        ),
        ({"type": "subscribe", "stream": "blocks", "irreversible_only": 1}, "true or false"),
        ({"type": "subscribe", "stream": "blocks", "accounts": "alice"}, "list of names"),
        ({"type": "unsubscribe", "stream": "blocks"}, '"type": "subscribe"'),
        ({"type": "subscribe", "stream": "blocks", "cursor": {"num": -1, "id": "00"}}, "cursor"),
        (
            {"type": "subscribe", "stream": "blocks", "cursor": {"num": 7, "id": "00" * 32}},
            "not the id of a block 7",
        ),
    ],
)
def test_a_bad_subscribe_is_refused_with_its_reason(message: object, why: str) -> None:
    """Each malformed subscribe is refused with a reason naming what is wrong, code 1008."""
    with pytest.raises(Refused, match=why) as refused:
        parse_subscribe(json.dumps(message))
    assert refused.value.code == 1008


def test_every_action_field_is_known_to_the_accounts_filter() -> None:
    """Each field of each native action is an account, a list of accounts or a known other
    kind: a new action with an account field cannot escape the accounts filter unnoticed."""
    for action_type in ACTION_TYPES:
        for f in fields(action_type):
            assert f.name in ACCOUNT_FIELDS | ACCOUNT_LIST_FIELDS | OTHER_FIELDS, (
                action_type.NAME,
                f.name,
            )


def test_an_action_names_its_actors_and_the_accounts_in_its_data() -> None:
    """A transfer names sender and recipient; a vote names the voter and every producer."""
    assert action_accounts(Transfer(A, B, 1)) == {"alice", "bob"}
    assert action_accounts(VoteProducer(A, (B, C))) == {"alice", "bob", "carol"}


def test_filters_select_by_account_and_action_name_together(tmp_path: Path) -> None:
    """In a block of a transfer alice->bob, a transfer bob->carol and a stake by carol: bob
    selects both transfers, carol the second transfer and the stake, carol with actions
    [stake] only the stake; no filter selects all three; dave selects nothing (no frame)."""
    net = DevNet.create(1)
    chain = net.open(tmp_path)
    for action in (Transfer(A, B, 1), Transfer(B, C, 1), Stake(C, 1)):
        chain.admit_transaction(net.tx(chain, action), now_ms())
    block = net.produce(chain)
    index = BlockIndex(block, params=chain.params)

    def selected(sub: Subscription) -> list[int]:
        return [i for i, _, _ in index.matching(sub)]

    assert selected(Subscription("actions", frozenset({"bob"}))) == [0, 1]
    assert selected(Subscription("actions", frozenset({"carol"}))) == [1, 2]
    assert selected(Subscription("actions", frozenset({"carol"}), frozenset({"stake"}))) == [2]
    assert selected(Subscription("actions")) == [0, 1, 2]
    assert index.frame(Subscription("transactions", frozenset({"dave"})), False) is None
    frame = json.loads(index.frame(Subscription("transactions", frozenset({"bob"})), True) or "")
    assert frame["irreversible"] is True
    assert [t["id"] for t in frame["transactions"]] == [t.id.hex() for t in block.transactions[:2]]
    chain.store.close()


def test_a_block_frame_carries_its_transactions_when_asked(tmp_path: Path) -> None:
    """With "transactions": true each block frame's block carries every transaction in the
    transactions stream's shape (amounts as assets); without it, only the count; the two
    frames are kept apart and the transactions encoded once for both streams."""
    net = DevNet.create(1)
    chain = net.open(tmp_path)
    for action in (Transfer(A, B, 20_000, "rent"), Stake(C, 1)):
        chain.admit_transaction(net.tx(chain, action), now_ms())
    block = net.produce(chain)
    index = BlockIndex(block, params=chain.params)
    plain = json.loads(index.frame(Subscription("blocks"), False) or "")
    full = json.loads(index.frame(Subscription("blocks", transactions=True), False) or "")
    txs = json.loads(index.frame(Subscription("transactions"), False) or "")["transactions"]
    assert "transactions" not in plain["block"] and plain["block"]["transaction_count"] == 2
    assert full["block"] == plain["block"] | {"transactions": txs}
    assert [t["actions"][0]["data"]["amount"] for t in txs] == ["2.0000 BOR", "0.0001 BOR"]
    assert [t["id"] for t in txs] == [t.id.hex() for t in block.transactions]
    chain.store.close()
