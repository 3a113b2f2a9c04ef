"""The vote relay: votes go on once counted, each once per peer, within bounds."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Sequence
from typing import cast

from chain.core.consensus.qc import Vote, VoteResult
from chain.core.consensus.votes import VoteOutcome
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import BlockId
from p2p.relay.votes import WAITING_PER_PEER, VoteRelay
from p2p.service import ChainService
from p2p.transport.peer import Peer
from p2p.wire.messages import GoAwayReason, Message, VoteMessage

CHAIN = b"c" * 32
KEY = PrivateKey.generate()


def block_id(num: int) -> BlockId:
    return BlockId(num.to_bytes(4, "big") + os.urandom(28))


class FakePeer:
    def __init__(self, peer_id: str) -> None:
        self.id = peer_id
        self.offered: list[Message] = []

    def offer(self, message: Message) -> bool:
        self.offered.append(message)
        return True


class FakeSwitch:
    def __init__(self, peers: list[FakePeer]) -> None:
        self._peers = {p.id: p for p in peers}
        self.punished: list[tuple[str, GoAwayReason]] = []

    def peers(self) -> Iterable[Peer]:
        return cast(Iterable[Peer], list(self._peers.values()))

    def get(self, peer_id: str) -> Peer | None:
        return cast(Peer | None, self._peers.get(peer_id))

    def punish(self, peer_id: str, reason: GoAwayReason, detail: str) -> None:
        self.punished.append((peer_id, reason))

    def send_away(self, peer_id: str, reason: GoAwayReason, detail: str) -> None:
        raise AssertionError("votes never send a peer away without a ban")


class FakeChain:
    """Counts a vote once if its block is known; what happens is set per block."""

    def __init__(self) -> None:
        self.results: dict[BlockId, VoteResult] = {}
        self.received: list[Vote] = []

    async def add_votes(self, votes: Sequence[Vote]) -> list[VoteOutcome]:
        self.received.extend(votes)
        return [VoteOutcome(self.results.get(v.block_id, VoteResult.UNKNOWN_BLOCK)) for v in votes]


def rig() -> tuple[VoteRelay, FakeChain, FakeSwitch, list[FakePeer]]:
    chain = FakeChain()
    counted: list[tuple[Vote, VoteOutcome, bool]] = []
    relay = VoteRelay(cast(ChainService, chain), lambda v, o, p: counted.append((v, o, p)))
    peers = [FakePeer(n) for n in ("a", "b", "c")]
    switch = FakeSwitch(peers)
    relay.bind(switch)
    for peer in peers:
        relay.add_peer(cast(Peer, peer))
    return relay, chain, switch, peers


async def settle(relay: VoteRelay) -> None:
    """Let the relay's run loop drain its queue."""
    task = asyncio.create_task(relay.run())
    for _ in range(20):
        await asyncio.sleep(0)
    task.cancel()


def test_a_counted_vote_goes_to_every_other_peer_once() -> None:
    """A vote the chain counted is offered to the peers that did not send it, and the same
    vote arriving again from another peer is neither counted again nor re-offered."""

    async def main() -> None:
        relay, chain, _, (a, b, c) = rig()
        vote = Vote.sign(CHAIN, block_id(5), True, KEY)
        chain.results[vote.block_id] = VoteResult.ADDED
        await relay.receive(cast(Peer, a), VoteMessage(vote))
        await relay.receive(cast(Peer, b), VoteMessage(vote))
        await settle(relay)
        assert chain.received == [vote]
        assert a.offered == [] and b.offered == []
        assert c.offered == [VoteMessage(vote)]

    asyncio.run(main())


def test_a_vote_that_is_not_news_is_not_passed_on() -> None:
    """Duplicates, stale votes and votes by non-finalizers stop here."""

    async def main() -> None:
        relay, chain, _, (a, b, c) = rig()
        for result in (VoteResult.DUPLICATE, VoteResult.STALE, VoteResult.UNKNOWN_KEY):
            vote = Vote.sign(CHAIN, block_id(5), True, KEY)
            chain.results[vote.block_id] = result
            await relay.receive(cast(Peer, a), VoteMessage(vote))
        await settle(relay)
        assert len(chain.received) == 3
        assert b.offered == [] and c.offered == []

    asyncio.run(main())


def test_a_vote_on_an_unknown_block_waits_for_the_block() -> None:
    """A vote that arrives before its block is retried once the chain moves, then relayed;
    one whose block fell below the LIB is dropped."""

    async def main() -> None:
        relay, chain, _, (a, b, _) = rig()
        early = Vote.sign(CHAIN, block_id(9), True, KEY)
        late = Vote.sign(CHAIN, block_id(3), True, KEY)
        for vote in (early, late):
            await relay.receive(cast(Peer, a), VoteMessage(vote))
        await settle(relay)
        assert b.offered == []
        chain.results[early.block_id] = VoteResult.ADDED
        chain.results[late.block_id] = VoteResult.ADDED
        relay.chain_advanced(lib=5)
        await settle(relay)
        assert b.offered == [VoteMessage(early)]
        assert chain.received.count(late) == 1, "below the LIB: never retried"

    asyncio.run(main())


def test_votes_waiting_for_blocks_are_bounded_per_peer() -> None:
    """A peer sending votes on blocks nobody has cannot hold more than its share."""

    async def main() -> None:
        relay, chain, _, (a, _, _) = rig()
        for _ in range(WAITING_PER_PEER + 20):
            vote = Vote.sign(CHAIN, block_id(9), True, KEY)
            await relay.receive(cast(Peer, a), VoteMessage(vote))
        await settle(relay)
        chain.received.clear()
        relay.chain_advanced(lib=0)
        await settle(relay)
        assert len(chain.received) == WAITING_PER_PEER

    asyncio.run(main())


def test_a_forged_vote_gets_its_sender_banned() -> None:
    """Honest relays pass on only checked votes: a bad signature is the sender's fault."""

    async def main() -> None:
        relay, chain, switch, (a, b, _) = rig()
        vote = Vote.sign(CHAIN, block_id(5), True, KEY)
        chain.results[vote.block_id] = VoteResult.INVALID_SIGNATURE
        await relay.receive(cast(Peer, a), VoteMessage(vote))
        await settle(relay)
        assert switch.punished == [("a", GoAwayReason.VALIDATION)]
        assert b.offered == []

    asyncio.run(main())


def test_our_own_vote_goes_out_at_once_and_is_counted() -> None:
    """A vote of this node's finalizer reaches every peer before the chain counts it, and
    counting it does not send it twice."""

    async def main() -> None:
        relay, chain, _, peers = rig()
        vote = Vote.sign(CHAIN, block_id(5), True, KEY)
        chain.results[vote.block_id] = VoteResult.ADDED
        relay.relay_local(vote)
        assert all(p.offered == [VoteMessage(vote)] for p in peers)
        await settle(relay)
        assert chain.received == [vote]
        assert all(len(p.offered) == 1 for p in peers)

    asyncio.run(main())
