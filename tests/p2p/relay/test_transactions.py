"""Transaction relay: the first hop carries the transaction, later hops its id, and a peer
that lacks an announced transaction asks for it once and gets it from what we hold."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import cast

import pytest

from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.errors import TransactionError
from chain.core.primitives.types import AccountName, TxId
from p2p.relay import transactions as tx_relay
from p2p.relay.transactions import TxRelay
from p2p.service import ChainService
from p2p.transport.peer import Peer
from p2p.wire.messages import Message, TransactionMessage, TxAnnounce, TxRequest
from tests.p2p.fakes import FakePeer, FakeSwitch

KEY = PrivateKey(b"\x01" * 32)


def tx(amount: int) -> SignedTransaction:
    transfer = Transfer(AccountName("alice"), AccountName("bob"), amount)
    return SignedTransaction.sign(Transaction(100, 1, 2, (transfer,)), b"c" * 32, [KEY])


class Admits:
    """A chain service that admits every transaction but those it is told to refuse."""

    def __init__(self, refuse: Sequence[TxId] = ()) -> None:
        self.refuse = set(refuse)

    async def admit_transactions(
        self, txs: Sequence[SignedTransaction]
    ) -> list[TransactionError | None]:
        return [TransactionError("no") if t.id in self.refuse else None for t in txs]


def relay_with(names: Sequence[str], chain: Admits | None = None) -> tuple[TxRelay, list[FakePeer]]:
    relay = TxRelay(cast(ChainService, chain or Admits()))
    peers = [FakePeer(name) for name in names]
    relay.bind(FakeSwitch(peers))
    for peer in peers:
        relay.add_peer(cast(Peer, peer))
    return relay, peers


def receive(relay: TxRelay, peer: FakePeer, message: Message) -> None:
    asyncio.run(relay.receive(cast(Peer, peer), message))


def admit_queued(relay: TxRelay) -> None:
    """Run the relay's admission loop until it has taken the queued transactions."""

    async def go() -> None:
        task = asyncio.create_task(relay.run())
        for _ in range(20):
            await asyncio.sleep(0)
        task.cancel()

    asyncio.run(go())


def whole(peer: FakePeer) -> list[TxId]:
    return [m.tx.id for m in peer.offered if isinstance(m, TransactionMessage)]


def announced(peer: FakePeer) -> list[TxId]:
    return [i for m in peer.offered if isinstance(m, TxAnnounce) for i in m.ids]


def asked(peer: FakePeer) -> list[TxId]:
    return [i for m in peer.offered if isinstance(m, TxRequest) for i in m.ids]


def test_our_rpcs_transaction_goes_whole_to_every_peer_once() -> None:
    """A transaction our RPC admitted is sent whole to every peer, and only once."""
    relay, (a, b) = relay_with(["a", "b"])
    t = tx(1)
    relay.relay_local(t)
    relay.relay_local(t)
    assert whole(a) == whole(b) == [t.id]


def test_a_peers_transaction_is_announced_to_the_others_in_one_message() -> None:
    """Transactions a peer sent, once admitted, go to every other peer as ids, in one
    announcement, and not back to the sender; a refused one goes nowhere."""
    t1, t2, bad = tx(1), tx(2), tx(3)
    relay, (a, b, c) = relay_with(["a", "b", "c"], Admits([bad.id]))
    for t in (t1, t2, bad):
        receive(relay, a, TransactionMessage.of(t))
    admit_queued(relay)
    assert a.offered == []
    for peer in (b, c):
        assert whole(peer) == []
        assert [m for m in peer.offered if isinstance(m, TxAnnounce)] == [
            TxAnnounce((t1.id, t2.id))
        ]


def test_an_announced_transaction_we_lack_is_asked_for_once() -> None:
    """An id announced by two peers is asked of the first only; one we hold already, or one
    that arrived whole meanwhile, is not asked for."""
    relay, (a, b) = relay_with(["a", "b"])
    have, lack = tx(1), tx(2)
    receive(relay, a, TransactionMessage.of(have))
    receive(relay, a, TxAnnounce((have.id, lack.id)))
    receive(relay, b, TxAnnounce((lack.id,)))
    assert asked(a) == [lack.id]
    assert asked(b) == []
    receive(relay, a, TransactionMessage.of(lack))
    receive(relay, b, TxAnnounce((lack.id,)))
    assert asked(b) == []


def test_an_id_not_delivered_in_time_is_asked_of_the_next_peer_announcing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past ASK_AGAIN_S without the transaction, the next announcement of its id is
    followed: the first peer may no longer hold it."""
    monkeypatch.setattr(tx_relay, "ASK_AGAIN_S", 0.0)
    relay, (a, b) = relay_with(["a", "b"])
    lack = tx(2)
    receive(relay, a, TxAnnounce((lack.id,)))
    receive(relay, b, TxAnnounce((lack.id,)))
    assert asked(a) == asked(b) == [lack.id]


def test_requests_are_answered_from_what_we_hold_only() -> None:
    """A request gets the transactions we announced or sent (as encoded once), and nothing
    for ids we do not hold."""
    relay, (a, b) = relay_with(["a", "b"])
    t = tx(1)
    receive(relay, a, TransactionMessage.of(t))
    admit_queued(relay)
    receive(relay, b, TxRequest((TxId(b"\x09" * 32), t.id)))
    assert whole(b) == [t.id]


def test_asks_in_flight_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Announcements past MAX_ASKED ids in flight are not followed: a peer announcing junk
    cannot make us keep more."""
    monkeypatch.setattr(tx_relay, "MAX_ASKED", 3)
    relay, (a,) = relay_with(["a"])
    ids = tuple(TxId(bytes([i]) * 32) for i in range(1, 6))
    receive(relay, a, TxAnnounce(ids))
    assert asked(a) == list(ids[:3])
