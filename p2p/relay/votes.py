"""Vote relay: finalizer votes reach every node, each once, and only valid ones travel on.

Votes are small and latency-critical (a block's QC is due before the next slot), so the
relay passes on a vote as soon as the chain has counted it — the chain checks the block, the
finalizer and the signature — and never a vote it could not count. Our own finalizers'
votes go to every peer at once (``relay_local``). Bounds: a vote is handled once
(``seen``), offered to a peer once (``KnownIds``), queued up to ``QUEUE`` (beyond, shed:
the sender still has it), and a vote on a block we do not hold yet (it may be on its way)
waits among at most ``WAITING`` others, ``WAITING_PER_PEER`` per peer, until the chain moves
or it falls below the LIB. A peer that sends a vote whose signature does not match is
punished: honest relays check every vote before passing it on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable

from chain.core.consensus.qc import Vote, VoteResult
from chain.core.consensus.votes import VoteOutcome
from chain.core.primitives.crypto import sha256
from p2p.service import ChainService
from p2p.transport.peer import KnownIds, Peer, RecentSet
from p2p.transport.reactor import Reactor
from p2p.wire.messages import GoAwayReason, Message, VoteMessage

BATCH = 256  # votes per trip to the chain thread
QUEUE = 4096  # 21 finalizers x 2 blocks/s: minutes of votes
SEEN = 50_000
KNOWN_VOTES = 10_000  # per peer
WAITING = 512  # votes on blocks not yet known
WAITING_PER_PEER = 64

# (vote, what became of it, whether it came from a peer rather than our own finalizers)
OnCounted = Callable[[Vote, VoteOutcome, bool], None]


def vote_key(vote: Vote) -> bytes:
    """What makes two votes the same message (the signature too: a forgery under a real
    vote's identity must not shadow it)."""
    return sha256(vote.block_id + vote.key + bytes([vote.strong]) + vote.signature)


class VoteRelay(Reactor):
    accepts = (VoteMessage,)

    def __init__(
        self,
        chain: ChainService,
        on_counted: OnCounted = lambda v, o, p: None,
        on_peer: Callable[[], None] = lambda: None,
    ) -> None:
        """``on_peer``: a peer joined, maybe the other half of a partition just healed."""
        self.chain = chain
        self.on_counted = on_counted
        self.on_peer = on_peer
        self._seen = RecentSet(SEEN)
        self._known = KnownIds(KNOWN_VOTES)
        self._queue: asyncio.Queue[tuple[str | None, Vote]] = asyncio.Queue(QUEUE)
        self._waiting: OrderedDict[bytes, tuple[str | None, Vote]] = OrderedDict()

    def add_peer(self, peer: Peer) -> None:
        self._known.add_peer(peer.id)
        self.on_peer()

    def remove_peer(self, peer: Peer) -> None:
        self._known.remove_peer(peer.id)

    async def receive(self, peer: Peer, message: Message) -> None:
        assert isinstance(message, VoteMessage)
        vote = message.vote
        key = vote_key(vote)
        self._known.learn(peer.id, key)
        if self._seen.add(key):
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait((peer.id, vote))

    def relay_local(self, vote: Vote) -> None:
        """A finalizer of this node voted: send it to every peer now, and count it here."""
        key = vote_key(vote)
        self._seen.add(key)
        self._offer(vote, key, exclude=None)
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait((None, vote))

    def chain_advanced(self, lib: int) -> None:
        """The chain changed: retry the votes that waited for their block (dropping those at
        or below the LIB, which can never count)."""
        waiting, self._waiting = self._waiting, OrderedDict()
        for origin, vote in waiting.values():
            if vote.block_num > lib:
                with contextlib.suppress(asyncio.QueueFull):
                    self._queue.put_nowait((origin, vote))

    def _offer(self, vote: Vote, key: bytes, exclude: str | None) -> None:
        message: VoteMessage | None = None
        for peer in self.switch.peers():
            if peer.id != exclude and self._known.learn(peer.id, key):
                message = message or VoteMessage(vote)
                peer.offer(message)

    def _wait(self, origin: str | None, vote: Vote) -> None:
        if sum(1 for o, _ in self._waiting.values() if o == origin) >= WAITING_PER_PEER:
            return
        self._waiting[vote_key(vote)] = (origin, vote)
        while len(self._waiting) > WAITING:
            self._waiting.popitem(last=False)

    async def run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            outcomes = await self.chain.add_votes([vote for _, vote in batch])
            for (origin, vote), outcome in zip(batch, outcomes, strict=True):
                self._handle(origin, vote, outcome)

    def _handle(self, origin: str | None, vote: Vote, outcome: VoteOutcome) -> None:
        result = outcome.result
        if result.relay:
            self._offer(vote, vote_key(vote), exclude=origin)
        elif result is VoteResult.UNKNOWN_BLOCK:
            self._wait(origin, vote)
        elif result is VoteResult.INVALID_SIGNATURE and origin is not None:
            self.switch.punish(origin, GoAwayReason.VALIDATION, "vote with a forged signature")
        self.on_counted(vote, outcome, origin is not None)
