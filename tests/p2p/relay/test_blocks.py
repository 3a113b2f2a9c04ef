"""Block and transaction relay follow the chain's updates: our block goes out at once, peers'
blocks while in sync, requeued transactions again, each only to peers that lack them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import cast

from chain.core.execution.actions import Transfer
from chain.core.primitives.types import AccountName, BlockNum
from chain.events import BlockStep, ChainEvents, ChainUpdate
from chain.testing import now_ms
from genesis.testing import DevNet
from p2p.relay.blocks import BlockRelay
from p2p.relay.transactions import TxRelay
from p2p.service import ChainService
from p2p.transport.peer import Peer
from p2p.wire.messages import BlockMessage, Message, TransactionMessage

A, B = AccountName("alice"), AccountName("bob")


class FakePeer:
    def __init__(self, peer_id: str) -> None:
        self.id = peer_id
        self.offered: list[Message] = []

    def offer(self, message: Message) -> bool:
        self.offered.append(message)
        return True


class FakeSwitch:
    def __init__(self, peers: list[FakePeer]) -> None:
        self._peers = peers

    def peers(self) -> Iterable[Peer]:
        return cast(Iterable[Peer], self._peers)


def _blocks_offered(peer: FakePeer) -> list[bytes]:
    return [m.block.id for m in peer.offered if isinstance(m, BlockMessage)]


def _peers(reactor: BlockRelay | TxRelay) -> list[FakePeer]:
    peers = [FakePeer(name) for name in ("a", "b")]
    reactor.bind(FakeSwitch(peers))  # type: ignore[arg-type]
    for peer in peers:
        reactor.add_peer(cast(Peer, peer))
    return peers


def test_our_block_goes_out_at_once_and_peers_blocks_only_in_sync(tmp_path: Path) -> None:
    """The block we produced is offered to every peer even while catching up; a peer's
    block that joined our chain is offered, while in sync, to the peers that did not send it."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path / "chain")
    chain.take_events()  # records from here on, as on the chain thread
    ours = net.produce(chain)
    produced = ChainUpdate(chain.view(), chain.take_events(), BlockNum(0))
    theirs = net.produce(chain)
    view = chain.view()
    chain.store.close()
    from_peer = ChainUpdate(view, ChainEvents((BlockStep(theirs),)), BlockNum(0))
    in_sync = [False]
    relay = BlockRelay(lambda: in_sync[0])
    a, b = _peers(relay)
    relay.chain_updated(produced)
    assert _blocks_offered(a) == _blocks_offered(b) == [ours.id]
    relay.seen("a", theirs.id)
    relay.chain_updated(from_peer)
    assert _blocks_offered(b) == [ours.id], "catching up: a peer's block is not relayed"
    in_sync[0] = True
    relay.chain_updated(from_peer)
    assert _blocks_offered(a) == [ours.id], "a sent it"
    assert _blocks_offered(b) == [ours.id, theirs.id]


def test_requeued_transactions_are_offered_again(tmp_path: Path) -> None:
    """Transactions a fork switch put back into the mempool are offered to every peer not
    known to hold them."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = net.open(tmp_path / "chain")
    tx = net.tx(chain, Transfer(A, B, 1))
    chain.admit_transaction(tx, now_ms())
    view = chain.view()
    chain.store.close()
    relay = TxRelay(cast(ChainService, None))
    a, b = _peers(relay)
    relay.chain_updated(ChainUpdate(view, ChainEvents(requeued=(tx,)), BlockNum(0)))
    for peer in (a, b):
        assert len(peer.offered) == 1
        message = peer.offered[0]
        assert isinstance(message, TransactionMessage) and message.tx.id == tx.id
    relay.chain_updated(ChainUpdate(view, ChainEvents(requeued=(tx,)), BlockNum(0)))
    assert len(a.offered) == len(b.offered) == 1, "each peer hears of it once"
