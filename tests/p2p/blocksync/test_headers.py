"""The header sync reactor with fake peers and a real chain: it serves the signed headers of
the blocks asked for; following, it asks for the headers after its tip, bans a peer whose
header breaks a rule (keeping those before it), and gives a batch that continues no block
held one retry from the LIB before it bans its sender."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from chain.controller import Chain
from chain.core.consensus.block import SignedHeader, decode_signed_header, signed_header_of
from chain.core.execution.actions import Transfer
from chain.core.header_chain import Checkpoint, HeaderChain
from chain.core.primitives.types import AccountName
from chain.testing import now_ms
from genesis.testing import DevNet
from p2p.blocksync.headers import CHECKPOINT_S, HeaderSync
from p2p.service import ChainService
from p2p.transport.peer import Peer
from p2p.wire.codec import MAX_HEADERS
from p2p.wire.messages import HeaderRange, HeaderRangeRequest
from tests.p2p.fakes import FakePeer, FakeSwitch
from tests.support.wait import until


class Served:
    """What ``HeaderSync`` asks of the chain service, from a real chain."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain

    def position(self) -> SimpleNamespace:
        return SimpleNamespace(head_num=self.chain.head.num, first_block=1)

    async def encoded_blocks(self, start: int, end: int) -> list[bytes]:
        top = min(end, self.chain.head.num)
        return [self.chain.block_by_num(n).encode() for n in range(start, top + 1)]


def _grown(net: DevNet, path: Path, blocks: int) -> Chain:
    chain = net.open(path)
    for _ in range(blocks):
        net.produce(chain)
    return chain


def _encoded(chain: Chain, first: int, last: int) -> tuple[bytes, ...]:
    return tuple(signed_header_of(chain.block_by_num(n)).encode() for n in range(first, last + 1))


def _follower(net: DevNet) -> HeaderChain:
    initial = net.genesis.to_initial_state()
    return HeaderChain(initial.header_state(), initial.params, initial.chain_id)


def test_the_signed_headers_asked_for_are_served(tmp_path: Path) -> None:
    """A request for more headers than held is answered with those held, each the signed
    header of the block (its signature and QC, no transactions); one made while another is
    being served is dropped."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = _grown(net, tmp_path, 5)

    async def scenario() -> None:
        peer = FakePeer("a")
        reactor = HeaderSync(cast(ChainService, Served(chain)))
        reactor.bind(FakeSwitch([peer]))
        running = asyncio.get_running_loop().create_task(reactor.run())
        await asyncio.sleep(0)
        await reactor.receive(cast(Peer, peer), HeaderRangeRequest(2, MAX_HEADERS))
        await reactor.receive(cast(Peer, peer), HeaderRangeRequest(1, 1))  # while serving
        answer = await asyncio.wait_for(peer.outbox.get(), 10)
        await until(lambda: not reactor._serving, "the serving done")
        assert peer.outbox.empty(), "the request made while one was served was dropped"
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        assert isinstance(answer, HeaderRange) and answer.start == 2
        got = [decode_signed_header(raw) for raw in answer.headers]
        assert got == [signed_header_of(chain.block_by_num(n)) for n in range(2, 6)]

    asyncio.run(scenario())


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def _rig(net: DevNet) -> tuple[HeaderSync, HeaderChain, FakeSwitch, FakePeer, Clock]:
    peer = FakePeer("a")
    switch = FakeSwitch([peer])
    follow = _follower(net)
    clock = Clock()
    reactor = HeaderSync(cast(ChainService, None), follow, lambda: True, clock=clock)
    reactor.bind(switch)
    return reactor, follow, switch, peer, clock


def _asked(peer: FakePeer) -> HeaderRangeRequest:
    message = peer.offered[-1]
    assert isinstance(message, HeaderRangeRequest)
    return message


def test_a_header_breaking_a_rule_bans_its_sender_and_those_before_it_stay(
    tmp_path: Path,
) -> None:
    """Asked for the headers after the tip, a peer sends a batch whose fourth header carries
    another block's signature: it is banned, and the three before stay followed."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = _grown(net, tmp_path, 6)
    reactor, follow, switch, peer, _ = _rig(net)

    async def scenario() -> None:
        reactor._tick(follow)
        assert _asked(peer) == HeaderRangeRequest(1, MAX_HEADERS)
        headers = list(_encoded(chain, 1, 6))
        genuine = decode_signed_header(headers[3])
        other = decode_signed_header(headers[4])
        headers[3] = SignedHeader(
            genuine.header, genuine.header_bytes, other.signature, genuine.qc
        ).encode()
        await reactor.receive(cast(Peer, peer), HeaderRange(1, tuple(headers)))

    asyncio.run(scenario())
    assert [p for p, _, _ in switch.punished] == ["a"]
    assert follow.tip.num == 3


def test_a_batch_off_the_tip_is_retried_from_the_lib_then_sent_away(tmp_path: Path) -> None:
    """Headers that continue no block held (another branch above the LIB, say) are not
    punished: the next request to the peer starts right above the LIB, and a batch that does
    not continue the LIB either gets the peer sent away (a node on a losing fork can be
    honest), never banned."""
    net = DevNet.create(3, blocks_per_turn=1)
    ours = _grown(net, tmp_path / "a", 8)
    theirs = net.open(tmp_path / "b")  # another branch from genesis: a transfer in block 1
    theirs.admit_transaction(
        net.tx(theirs, Transfer(AccountName("alice"), AccountName("bob"), 1)), now_ms()
    )
    for _ in range(12):
        net.produce(theirs)
    reactor, follow, switch, peer, clock = _rig(net)

    async def scenario() -> None:
        reactor._tick(follow)
        await reactor.receive(cast(Peer, peer), HeaderRange(1, _encoded(ours, 1, 8)))
        assert follow.tip.num == 8 and follow.lib > 0
        clock.now += 2  # the short answer's idle time passed
        reactor._tick(follow)
        assert _asked(peer).start == 9
        await reactor.receive(cast(Peer, peer), HeaderRange(9, _encoded(theirs, 9, 12)))
        assert switch.punished == []
        clock.now += 2
        reactor._tick(follow)
        asked = _asked(peer)
        assert asked.start == follow.lib + 1
        await reactor.receive(
            cast(Peer, peer), HeaderRange(asked.start, _encoded(theirs, asked.start, 12))
        )
        assert switch.sent_away == ["a"] and switch.punished == []

    asyncio.run(scenario())
    assert follow.tip.num == 8


class Kept:
    """Checkpoints handed over, in order."""

    def __init__(self) -> None:
        self.saved: list[bytes] = []

    async def save(self, checkpoint: Checkpoint) -> None:
        self.saved.append(checkpoint.encode())


def test_the_chain_followed_is_checkpointed_when_its_lib_moves_at_most_every_few_seconds(
    tmp_path: Path,
) -> None:
    """A batch after which the peer has no more is checkpointed at once (a checkpoint that
    resumes at the LIB followed); one whose LIB moved waits for CHECKPOINT_S since the last;
    none is taken while the LIB stands."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = _grown(net, tmp_path, 12)
    peer, follow, clock, kept = FakePeer("a"), _follower(net), Clock(), Kept()
    reactor = HeaderSync(
        cast(ChainService, None), follow, lambda: False, checkpoints=kept, clock=clock
    )
    reactor.bind(FakeSwitch([peer]))

    async def scenario() -> None:
        running = asyncio.get_running_loop().create_task(reactor.run())
        await asyncio.sleep(0)
        reactor._tick(follow)
        await reactor.receive(cast(Peer, peer), HeaderRange(1, _encoded(chain, 1, 6)))
        await asyncio.sleep(0)
        assert len(kept.saved) == 1
        assert HeaderChain.resume(kept.saved[0], follow.params, follow.chain_id).lib == follow.lib
        reactor._save(follow, at_once=False)
        await asyncio.sleep(0)
        assert len(kept.saved) == 1, "the LIB stands: nothing new to keep"
        lib = follow.lib
        follow.extend([decode_signed_header(h) for h in _encoded(chain, 7, 12)], now_ms())
        assert follow.lib > lib
        reactor._save(follow, at_once=False)
        await asyncio.sleep(0)
        assert len(kept.saved) == 1, "within CHECKPOINT_S of the last"
        clock.now += CHECKPOINT_S
        reactor._save(follow, at_once=False)
        await asyncio.sleep(0)
        assert len(kept.saved) == 2
        resumed = HeaderChain.resume(kept.saved[1], follow.params, follow.chain_id)
        assert resumed.lib == follow.lib
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running

    asyncio.run(scenario())


def test_a_batch_is_judged_off_the_event_loop(tmp_path: Path) -> None:
    """While a batch of 150 headers is decoded and judged (tens of milliseconds), the event
    loop goes on running other tasks; the batch is then followed whole."""
    net = DevNet.create(3, blocks_per_turn=1)
    chain = _grown(net, tmp_path, 150)
    reactor, follow, _, peer, _ = _rig(net)

    async def scenario() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0)  # a pass of the loop
                ticks += 1

        running = asyncio.get_running_loop().create_task(ticker())
        await asyncio.sleep(0)
        reactor._tick(follow)
        ticks = 0
        await reactor.receive(cast(Peer, peer), HeaderRange(1, _encoded(chain, 1, 150)))
        during = ticks
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        return during

    assert asyncio.run(scenario()) >= 1, "the loop ran while the headers were judged"
    assert follow.tip.num == 150
