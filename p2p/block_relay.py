"""Block relay: every new block of ours reaches every peer that does not have it yet.

Blocks we produce and blocks from peers that joined our chain while in sync are sent to each
connected peer once; the reactor remembers, per peer, the recent blocks the peer sent us or
we sent it, so nothing is sent back where it came from. It owns no inbound message type:
blocks arriving from peers belong to block sync (``p2p.blocksync``), which tells it.
"""

from __future__ import annotations

from chain.block import SignedBlock
from chain.types import BlockId
from p2p.messages import BlockMessage
from p2p.peer import KnownIds, Peer
from p2p.reactor import Reactor

KNOWN_BLOCKS = 20_000  # block ids remembered per peer (hours of blocks at 0.5 s)


class BlockRelay(Reactor):
    def __init__(self) -> None:
        self._known = KnownIds(KNOWN_BLOCKS)

    def add_peer(self, peer: Peer) -> None:
        self._known.add_peer(peer.id)

    def remove_peer(self, peer: Peer) -> None:
        self._known.remove_peer(peer.id)

    def seen(self, peer_id: str, block_id: BlockId) -> None:
        """``peer_id`` sent us this block: it has it."""
        self._known.learn(peer_id, block_id)

    def relay(self, block: SignedBlock) -> int:
        """Offer ``block`` to every peer that does not have it; returns how many."""
        message: BlockMessage | None = None
        sent = 0
        for peer in self.switch.peers():
            if self._known.learn(peer.id, block.id):
                message = message or BlockMessage.of(block)
                sent += peer.offer(message)
        return sent
