"""Transaction relay: transactions from peers are admitted in batches and passed on.

A transaction a peer sends is admitted to our mempool (through the chain service, in
batches of up to ``BATCH``: the node puts them in the admission queue its RPC uses, which
refuses what does not fit rather than waiting) and, if accepted, announced by id to every
other peer that has not seen it (``TxAnnounce``, Ethereum's eth/68 scheme); a peer that
lacks it asks for it (``TxRequest``) and gets it from the transactions we hold
(``HELD``). Transactions our own RPC accepted go whole to every peer (``relay_local``), and
so do those a fork switch put back into our mempool (``chain_updated``): the first hop
carries the transaction, the next ones its id. In a full mesh of n nodes every node then
receives each transaction once, not from each of its n - 1 peers: measured on 7 producers,
each copy cost its receiver a TLS read and a full decode before it was found a duplicate.
Every transaction id is handled once (``seen``), whichever way it came first.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict

from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.types import TxId
from chain.events import ChainUpdate
from p2p.service import ChainService
from p2p.transport.peer import KnownIds, Peer, RecentSet
from p2p.transport.reactor import Reactor
from p2p.wire.messages import MAX_TX_IDS, Message, TransactionMessage, TxAnnounce, TxRequest

BATCH = 256  # transactions per trip to the chain thread
QUEUE = 20_000  # transactions from peers waiting for admission; beyond it they are shed
SEEN = 100_000
KNOWN_TXS = 20_000  # transaction ids remembered per peer
# Transactions kept to answer requests for what we announced: 20 s at 1,000 tx/s, far longer
# than an announcement takes to be answered.
HELD = 20_000
# An id asked of one peer may be asked of another that announces it once this long has
# passed without the transaction (the first peer no longer held it, or went away).
ASK_AGAIN_S = 1.0
# Ids asked for and not yet delivered, at most; announcements beyond it are not followed
# until the oldest asks expire (bounds what a peer announcing junk ids can make us keep).
MAX_ASKED = 20_000


class TxRelay(Reactor):
    accepts = (TransactionMessage, TxAnnounce, TxRequest)

    def __init__(self, chain: ChainService) -> None:
        self.chain = chain
        self._seen = RecentSet(SEEN)
        # Each with the peer it came from, as it came (its bytes are what we pass on).
        self._queue: asyncio.Queue[tuple[str, TransactionMessage]] = asyncio.Queue(QUEUE)
        self._known = KnownIds(KNOWN_TXS)
        # What we can send a peer that asks: the transactions we admitted, as encoded once.
        self._held: OrderedDict[TxId, TransactionMessage] = OrderedDict()
        # Ids asked for and when they may be asked for again, oldest first.
        self._asked: OrderedDict[TxId, float] = OrderedDict()

    def add_peer(self, peer: Peer) -> None:
        self._known.add_peer(peer.id)

    def remove_peer(self, peer: Peer) -> None:
        self._known.remove_peer(peer.id)

    async def receive(self, peer: Peer, message: Message) -> None:
        if isinstance(message, TransactionMessage):
            tx = message.tx
            self._known.learn(peer.id, tx.id)
            self._asked.pop(tx.id, None)
            if self._seen.add(tx.id):
                # A full queue sheds load: the sender's own node still has the transaction.
                with contextlib.suppress(asyncio.QueueFull):
                    self._queue.put_nowait((peer.id, message))
        elif isinstance(message, TxAnnounce):
            self._announced(peer, message.ids)
        elif isinstance(message, TxRequest):
            self._requested(peer, message.ids)

    def _announced(self, peer: Peer, ids: tuple[TxId, ...]) -> None:
        """``peer`` holds ``ids``: ask it for those we have not seen nor asked another for."""
        now = time.monotonic()
        while self._asked and next(iter(self._asked.values())) <= now:
            self._asked.popitem(last=False)
        wanted: list[TxId] = []
        for tx_id in ids:
            self._known.learn(peer.id, tx_id)
            if tx_id in self._seen or tx_id in self._asked or len(self._asked) >= MAX_ASKED:
                continue
            self._asked[tx_id] = now + ASK_AGAIN_S
            wanted.append(tx_id)
        if wanted:
            peer.offer(TxRequest(tuple(wanted)))

    def _requested(self, peer: Peer, ids: tuple[TxId, ...]) -> None:
        """Send ``peer`` those of ``ids`` we hold (what we announced, unless it aged out)."""
        for tx_id in ids:
            message = self._held.get(tx_id)
            if message is not None and peer.offer(message):
                self._known.learn(peer.id, tx_id)

    def relay_local(self, tx: SignedTransaction) -> None:
        """Our RPC admitted ``tx``: send it to every peer."""
        self._seen.add(tx.id)
        self._send(TransactionMessage.of(tx))

    def chain_updated(self, update: ChainUpdate) -> None:
        """A subscriber of the chain's updates: transactions a fork switch put back into our
        mempool are sent again to every peer not known to hold them. The branch they
        were on may have been ours alone (made while cut off), and our mempool alone does
        not survive a restart of this node."""
        for tx in update.events.requeued:
            self._seen.add(tx.id)
            self._send(TransactionMessage.of(tx))

    def _hold(self, message: TransactionMessage) -> None:
        self._held[message.tx.id] = message
        if len(self._held) > HELD:
            self._held.popitem(last=False)

    def _send(self, message: TransactionMessage) -> None:
        """The whole transaction to every peer not known to hold it."""
        self._hold(message)
        for peer in self.switch.peers():
            if self._known.learn(peer.id, message.tx.id):
                peer.offer(message)

    def _announce(self, messages: list[tuple[str, TransactionMessage]]) -> None:
        """The ids of ``messages``' transactions (each with the peer it came from) to every
        other peer not known to hold them, in one announcement per peer."""
        for _, message in messages:
            self._hold(message)
        for peer in self.switch.peers():
            ids = [
                m.tx.id
                for origin, m in messages
                if origin != peer.id and self._known.learn(peer.id, m.tx.id)
            ]
            for at in range(0, len(ids), MAX_TX_IDS):
                peer.offer(TxAnnounce(tuple(ids[at : at + MAX_TX_IDS])))

    async def run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            errors = await self.chain.admit_transactions([m.tx for _, m in batch])
            self._announce(
                [entry for entry, error in zip(batch, errors, strict=True) if error is None]
            )
