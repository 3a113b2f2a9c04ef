"""Block relay: every new block of ours reaches every peer that does not have it yet.

Blocks we produce and blocks from peers that joined our chain while in sync are sent to each
connected peer once; the reactor learns both from the chain's updates, and remembers, per
peer, the recent blocks the peer sent us or we sent it, so nothing is sent back where it came
from. It owns no inbound message type: blocks arriving from peers belong to block sync
(``p2p.blocksync.reactor``), which tells it who sent what (``seen``).
"""

from __future__ import annotations

from collections.abc import Callable

from chain.core.consensus.block import SignedBlock
from chain.core.primitives.types import BlockId
from chain.events import ChainUpdate
from p2p.transport.peer import KnownIds, Peer
from p2p.transport.reactor import Reactor
from p2p.wire.messages import BlockMessage

KNOWN_BLOCKS = 20_000  # block ids remembered per peer (hours of blocks at 0.5 s)


class BlockRelay(Reactor):
    def __init__(self, in_sync: Callable[[], bool] = lambda: True) -> None:
        """``in_sync``: whether we follow the network (while catching up, peers' blocks are
        old news to every peer, which fetches ranges of its own)."""
        self._known = KnownIds(KNOWN_BLOCKS)
        self._in_sync = in_sync

    def add_peer(self, peer: Peer) -> None:
        self._known.add_peer(peer.id)

    def remove_peer(self, peer: Peer) -> None:
        self._known.remove_peer(peer.id)

    def seen(self, peer_id: str, block_id: BlockId) -> None:
        """``peer_id`` sent us this block: it has it."""
        self._known.learn(peer_id, block_id)

    def chain_updated(self, update: ChainUpdate) -> None:
        """A subscriber of the chain's updates: the block we produced goes out at once;
        blocks from peers that joined our chain, while in sync."""
        events = update.events
        if events.produced is not None:
            self.relay(events.produced)
        elif events.steps and self._in_sync():
            for block in events.applied:
                self.relay(block)

    def relay(self, block: SignedBlock) -> int:
        """Offer ``block`` to every peer that does not have it; returns how many."""
        message: BlockMessage | None = None
        sent = 0
        for peer in self.switch.peers():
            if self._known.learn(peer.id, block.id):
                message = message or BlockMessage.of(block)
                sent += peer.offer(message)
        return sent
