"""Transaction relay: transactions from peers are admitted in batches and passed on.

A transaction a peer sends is admitted to our mempool (through the chain service, in
batches of up to ``BATCH``: the node puts them in the admission queue its RPC uses, which
refuses what does not fit rather than waiting) and, if accepted, offered to every other peer
that has not seen it; transactions our own RPC accepted are offered the same way
(``relay_local``), and so are those a fork switch put back into our mempool
(``chain_updated``). Every transaction id is handled once (``seen``), whichever way it came
first.
"""

from __future__ import annotations

import asyncio
import contextlib

from chain.core.transaction import SignedTransaction
from chain.events import ChainUpdate
from p2p.messages import Message, TransactionMessage
from p2p.peer import KnownIds, Peer, RecentSet
from p2p.reactor import Reactor
from p2p.service import ChainService

BATCH = 256  # transactions per trip to the chain thread
QUEUE = 20_000  # transactions from peers waiting for admission; beyond it they are shed
SEEN = 100_000
KNOWN_TXS = 20_000  # transaction ids remembered per peer


class TxRelay(Reactor):
    accepts = (TransactionMessage,)

    def __init__(self, chain: ChainService) -> None:
        self.chain = chain
        self._seen = RecentSet(SEEN)
        self._queue: asyncio.Queue[tuple[str | None, SignedTransaction]] = asyncio.Queue(QUEUE)
        self._known = KnownIds(KNOWN_TXS)

    def add_peer(self, peer: Peer) -> None:
        self._known.add_peer(peer.id)

    def remove_peer(self, peer: Peer) -> None:
        self._known.remove_peer(peer.id)

    async def receive(self, peer: Peer, message: Message) -> None:
        assert isinstance(message, TransactionMessage)
        tx = message.tx
        self._known.learn(peer.id, tx.id)
        if self._seen.add(tx.id):
            # A full queue sheds load: the sender's own node still has the transaction.
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait((peer.id, tx))

    def relay_local(self, tx: SignedTransaction) -> None:
        """Our RPC admitted ``tx``: offer it to every peer."""
        self._seen.add(tx.id)
        self._offer(tx, exclude=None)

    def chain_updated(self, update: ChainUpdate) -> None:
        """A subscriber of the chain's updates: transactions a fork switch put back into our
        mempool are offered again to every peer not known to hold them. The branch they
        were on may have been ours alone (made while cut off), and our mempool alone does
        not survive a restart of this node."""
        for tx in update.events.requeued:
            self._seen.add(tx.id)
            self._offer(tx, exclude=None)

    def _offer(self, tx: SignedTransaction, exclude: str | None) -> None:
        message: TransactionMessage | None = None
        for peer in self.switch.peers():
            if peer.id != exclude and self._known.learn(peer.id, tx.id):
                message = message or TransactionMessage.of(tx)
                peer.offer(message)

    async def run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            errors = await self.chain.admit_transactions([tx for _, tx in batch])
            for (origin, tx), error in zip(batch, errors, strict=True):
                if error is None:
                    self._offer(tx, exclude=origin)
