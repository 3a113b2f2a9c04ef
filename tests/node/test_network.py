"""Nodes' networks (transport, switch, reactors as the node wires them) in one process, over
real TCP on loopback, each on a real chain (LevelDB) owned by its chain thread."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest

import p2p.transport.switch
from chain.core.primitives.crypto import PrivateKey
from chain.view import ChainView
from genesis.testing import DevNet
from node.admission import Admitter
from node.config.builders import net_config
from node.config.model import P2pConfig
from node.metrics import NodeMetrics
from node.network import NetConfig, Network, NodeChainService
from node.runner import ChainRunner
from p2p.blocksync.reactor import MAX_BAD_REQUESTS
from p2p.errors import ChannelClosed
from p2p.rdma.device import RdmaDevice
from p2p.service import Outcome
from p2p.transport.tcp import TcpChannel
from p2p.transport.tls import TlsIdentity
from p2p.wire.handshake import AuthPolicy, ChainPosition, make_handshake
from p2p.wire.messages import (
    PROTOCOL_VERSION,
    GoAway,
    GoAwayReason,
    Hello,
    RawBlock,
    SyncRequest,
    Time,
)
from scripts.peers import dial
from tests.p2p.configs import transport_config
from tests.support.wait import SLOWDOWN, pace, until


class Member:
    """One node's chain and network (no RPC, no producer loop)."""

    def __init__(
        self,
        devnet: DevNet,
        path: Path,
        config: NetConfig,
        key: PrivateKey,
        rdma: RdmaDevice | None = None,
    ) -> None:
        self.devnet = devnet
        self.runner = ChainRunner(devnet.open(path))
        self.metrics = NodeMetrics()
        self.admitter = Admitter(self.runner, self.metrics)
        self.net = Network(self.runner, self.admitter, config, key, rdma=rdma)
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> Member:
        await self.net.listen()
        self.tasks = [
            asyncio.create_task(self.net.run()),
            asyncio.create_task(self.admitter.run()),
        ]
        await self.net.ready.wait()
        return self

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.runner.close()

    @property
    def view(self) -> ChainView:
        return self.runner.view

    @property
    def address(self) -> tuple[str, int]:
        assert self.net.listen_port is not None
        return ("127.0.0.1", self.net.listen_port)

    async def produce(self, count: int) -> None:
        for _ in range(count):  # the produced block reaches block relay as a chain update
            await self.runner.call(self.devnet.produce)


class Members:
    """Members made in one test, all stopped at its end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.made: list[Member] = []

    def __call__(
        self,
        name: str,
        devnet: DevNet,
        policy: AuthPolicy | None = None,
        key: PrivateKey | None = None,
        rdma: RdmaDevice | None = None,
    ) -> Member:
        config = replace(
            net_config(P2pConfig(tls=False)),
            transport=transport_config(policy=policy or AuthPolicy(), tls=TlsIdentity.generate()),
        )
        member = Member(devnet, self.tmp / name, config, key or PrivateKey.generate(), rdma)
        self.made.append(member)
        return member

    async def stop(self) -> None:
        for member in self.made:
            await member.stop()


def run(tmp: Path, body: Callable[[Members], Awaitable[None]]) -> None:
    async def main() -> None:
        members = Members(tmp)
        try:
            async with asyncio.timeout(60 * SLOWDOWN):
                await body(members)
        finally:
            await members.stop()

    asyncio.run(main())


def test_the_chain_service_tells_of_each_block_it_is_done_with(tmp_path: Path) -> None:
    """push_blocks calls ``taken`` on the event loop with each block's number in order,
    applied or not, before the call returns (readers of peers pace themselves by it)."""
    devnet = DevNet.create()
    source = devnet.open(tmp_path / "source")
    made = [devnet.produce(source) for _ in range(3)]
    source.store.close()
    chain = devnet.open(tmp_path / "fresh")
    runner = ChainRunner(chain)
    service = NodeChainService(runner, Admitter(runner, NodeMetrics()))

    async def push() -> tuple[list[tuple[int, bool]], list[Outcome]]:
        told: list[tuple[int, bool]] = []
        loop = asyncio.get_running_loop()
        results = await service.push_blocks(
            [made[0], made[2], made[1]],  # 3 cannot link before 2 has come
            0,
            taken=lambda num: told.append((num, asyncio.get_running_loop() is loop)),
        )
        return told, [r.outcome for r in results]

    try:
        told, outcomes = asyncio.run(push())
    finally:
        runner.close()
    assert told == [(1, True), (3, True), (2, True)]
    assert outcomes[0] == Outcome.APPLIED and outcomes[2] == Outcome.APPLIED
    assert outcomes[1] != Outcome.APPLIED


def test_a_dialled_peer_receives_produced_blocks(tmp_path: Path) -> None:
    """A node that dials a producer syncs the blocks it missed, then receives new blocks as they are
    produced."""

    async def body(members: Members) -> None:
        devnet = DevNet.create()
        a = await members("a", devnet).start()
        b = await members("b", devnet).start()
        await a.produce(3)
        b.net.connect(a.address)
        await until(lambda: b.view.head.num == 3, "block 3 synced", 10)  # synced what it missed
        await a.produce(2)
        await until(lambda: b.view.head.num == 5, "block 5 relayed", 10)  # and those relayed
        assert b.view.head.id == a.view.head.id
        assert [p["direction"] for p in a.net.status()["peers"]] == ["inbound"]

    run(tmp_path, body)


def test_a_peer_on_another_chain_is_refused_and_not_redialled(tmp_path: Path) -> None:
    """A dial to a node on another chain is refused with WRONG_CHAIN and given up, not redialled."""

    async def body(members: Members) -> None:
        a = await members("a", DevNet.create()).start()
        b = await members("b", DevNet.create()).start()  # another genesis: another chain id
        b.net.connect(a.address)
        given_up = {
            "address": f"127.0.0.1:{a.address[1]}",
            "state": "given_up",
            "error": "refused: WRONG_CHAIN",
        }
        await until(lambda: b.net.status()["dialing"] == [given_up], "the dial given up", 10)
        assert len(a.net.switch) == 0 and len(b.net.switch) == 0

    run(tmp_path, body)


def test_only_specified_keys_may_connect(tmp_path: Path) -> None:
    """With only listed peer keys allowed, a stranger's dial fails authentication and a listed key
    connects."""

    async def body(members: Members) -> None:
        devnet = DevNet.create()
        known = PrivateKey.generate()
        a = await members(
            "a",
            devnet,
            policy=AuthPolicy(allow_any=False, peer_keys=frozenset({known.public_key})),
        ).start()
        stranger = await members("stranger", devnet).start()
        stranger.net.connect(a.address)
        await until(
            lambda: "AUTHENTICATION" in str(stranger.net.status()["dialing"]),
            "the stranger refused",
            10,
        )
        assert len(a.net.switch) == 0
        friend = await members("friend", devnet, key=known).start()
        friend.net.connect(a.address)
        await until(lambda: len(a.net.switch) == 1, "the friend connected", 10)
        assert [p["direction"] for p in friend.net.status()["peers"]] == ["outbound"]

    run(tmp_path, body)


def test_disconnect_sends_the_peer_away_and_stops_redialling(tmp_path: Path) -> None:
    """Disconnecting a peer ends the session on both sides and stops redialling; disconnecting again
    returns False."""

    async def body(members: Members) -> None:
        devnet = DevNet.create()
        a = await members("a", devnet).start()
        b = await members("b", devnet).start()
        b.net.connect(a.address)
        await until(lambda: len(b.net.switch) == 1, "connected", 10)
        (peer_id,) = [p.id for p in b.net.switch.peers()]
        assert await b.net.disconnect(peer_id)
        await until(
            lambda: len(a.net.switch) == 0 and len(b.net.switch) == 0, "both sessions ended", 10
        )
        await until(lambda: b.net.status()["dialing"] == [], "the redialling stopped", 10)
        assert len(a.net.switch) == 0
        assert not await b.net.disconnect(peer_id), "no longer connected"

    run(tmp_path, body)


async def ranges_beyond_the_head_get_the_asker_sent_away(
    members: Members, rdma: RdmaDevice | None = None
) -> str:
    """A peer that keeps asking for blocks we do not have is sent away (benign: it may come
    back). Returns the transport the offending session used."""
    devnet = DevNet.create()
    a = await members("a", devnet, rdma=rdma).start()
    b = await members("b", devnet, rdma=rdma).start()
    await a.produce(2)
    b.net.connect(a.address)
    await until(lambda: b.view.head.num == 2, "block 2 synced", 10)
    (peer,) = b.net.switch.peers()
    transport = peer.channel.transport

    async def ask_beyond(k: int) -> None:
        """Ask for the k-th range beyond a's head; one at a time, since a new request replaces
        one not yet served: wait until a has counted it (the last one, sending us away, takes
        the count with the session)."""
        peer.offer(SyncRequest(1_000 + k, 1_005 + k))
        if k < MAX_BAD_REQUESTS:
            await until(lambda: sum(a.net.blocks._bad_requests.values()) > k, "counted", 10)

    for i in range(MAX_BAD_REQUESTS + 1):
        await ask_beyond(i)
    where = f"127.0.0.1:{a.address[1]}"
    refused = {"address": where, "state": "dialing", "error": "refused: BENIGN_OTHER"}
    await until(lambda: refused in b.net.status()["dialing"], "sent away", 30)
    return transport


def test_ranges_beyond_our_head_get_the_peer_sent_away(tmp_path: Path) -> None:
    """Over TCP, a peer that keeps asking for ranges beyond our head is sent away (BENIGN_OTHER)."""

    async def body(members: Members) -> None:
        assert await ranges_beyond_the_head_get_the_asker_sent_away(members) == "tcp"

    run(tmp_path, body)


def test_two_nodes_dialling_each_other_at_once_keep_one_session(tmp_path: Path) -> None:
    """Both sides dial at the same moment: one session survives, the same one on both sides
    (outbound on one, inbound on the other), and it stays up."""

    async def body(members: Members) -> None:
        devnet = DevNet.create()
        a = await members("a", devnet).start()
        b = await members("b", devnet).start()
        a.net.connect(b.address)
        b.net.connect(a.address)
        await until(lambda: len(a.net.switch) == 1 and len(b.net.switch) == 1, "connected", 10)
        # The redials of the duplicate come and go (refused); the session stands.
        await until(
            lambda: (
                "refused: DUPLICATE" in str(a.net.status()["dialing"])
                or "refused: DUPLICATE" in str(b.net.status()["dialing"])
            ),
            "a redial refused",
            10,
        )
        assert len(a.net.switch) == 1 and len(b.net.switch) == 1
        (pa,) = a.net.status()["peers"]
        (pb,) = b.net.status()["peers"]
        assert {pa["direction"], pb["direction"]} == {"inbound", "outbound"}
        await a.produce(2)
        await until(lambda: b.view.head.num == 2, "block 2 relayed", 10)

    run(tmp_path, body)


def test_a_punished_peer_is_refused_while_banned_and_welcome_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A peer the switch punishes is sent away and its redials are refused with BANNED until
    the ban runs out; then it connects again."""
    monkeypatch.setattr(p2p.transport.switch, "BAN_SECONDS", 1.5)

    async def body(members: Members) -> None:
        devnet = DevNet.create()
        a = await members("a", devnet).start()
        b = await members("b", devnet).start()
        b.net.connect(a.address)
        await until(lambda: len(a.net.switch) == 1, "connected", 10)
        (peer,) = a.net.switch.peers()
        a.net.switch.punish(peer.id, GoAwayReason.BENIGN_OTHER, "test offence")
        await until(lambda: "refused: BANNED" in str(b.net.status()["dialing"]), "banned", 10)
        assert len(a.net.switch) == 0
        await until(lambda: len(a.net.switch) == 1, "back after the ban", 15)

    run(tmp_path, body)


class ScriptedPeer:
    """A peer written with our p2p classes: it dials a node (preamble and TLS, as the node's
    default p2p-tls = on asks), claims ``position`` in a handshake signed by a fresh key,
    answers pings, and serves each range asked of it from ``blocks`` (encoded, block 1 first)
    at one block per ``delay`` seconds."""

    def __init__(
        self, chain_id: bytes, position: ChainPosition, blocks: list[bytes], delay: float
    ) -> None:
        self.chain_id = chain_id
        self.position = position
        self.blocks = blocks
        self.delay = delay
        self.requests: list[SyncRequest] = []
        self.served = 0
        self.sent_away: GoAway | None = None

    async def run(self, address: tuple[str, int]) -> None:
        channel, binding = await dial(*address)
        node_id = os.urandom(32)
        await channel.send(Hello(PROTOCOL_VERSION, self.chain_id, node_id, os.urandom(32)))
        hello = await channel.recv()
        assert isinstance(hello, Hello), hello
        await channel.send(
            make_handshake(
                chain_id=self.chain_id,
                node_id=node_id,
                node_key=PrivateKey.generate(),
                peer_nonce=hello.nonce,
                position=self.position,
                p2p_address="",
                tls_binding=binding,
            )
        )
        serving: asyncio.Task[None] | None = None
        try:
            while True:
                message = await channel.recv()
                if isinstance(message, GoAway):
                    self.sent_away = message
                    return
                if isinstance(message, Time) and message.xmt and not message.org:
                    await channel.send(Time(message.xmt, 0, 1, 0))
                elif isinstance(message, SyncRequest):
                    self.requests.append(message)
                    if serving is not None:
                        serving.cancel()  # a new request replaces the old one
                    serving = asyncio.create_task(self._serve(channel, message))
        except ChannelClosed:
            return
        finally:
            if serving is not None:
                serving.cancel()
            await channel.close()

    async def _serve(self, channel: TcpChannel, request: SyncRequest) -> None:
        for num in range(request.start, min(request.end, len(self.blocks)) + 1):
            await pace(self.delay)
            await channel.send(RawBlock(self.blocks[num - 1]))
            self.served += 1


def test_a_slow_peer_does_not_stall_a_sync_another_peer_can_serve(tmp_path: Path) -> None:
    """A peer serving 1 block/s holds the range of the next blocks a fresh node needs; once a
    peer that can serve them connects, the range moves there and the node syncs in seconds
    (it would take the slow peer 300 s)."""

    async def body(members: Members) -> None:
        devnet = DevNet.create()
        full = await members("full", devnet).start()
        await full.produce(300)
        joiner = await members("joiner", devnet).start()
        service = full.net.blocks.chain
        blocks = await service.encoded_blocks(1, 300)
        slow = ScriptedPeer(full.view.chain_id, service.position(), blocks, delay=1.0)
        slow_task = asyncio.create_task(slow.run(joiner.address))
        await until(lambda: bool(slow.requests), "the slow peer asked", 10)
        assert slow.requests[0].start == 1
        started = asyncio.get_running_loop().time()
        joiner.net.connect(full.address)
        await until(lambda: joiner.view.head.num == 300, "synced", 20)
        took = asyncio.get_running_loop().time() - started
        print(f"synced 300 blocks in {took:.1f} s beside a peer serving 1 block/s")
        assert took < 10 * SLOWDOWN
        assert joiner.view.head.id == full.view.head.id
        assert slow.served < 20 and slow.sent_away is None, "demoted, not sent away"
        slow_task.cancel()

    run(tmp_path, body)


def _split_branches(devnet: DevNet, x_path: Path, y_path: Path) -> None:
    """Chains for x and y as after a 2/2 partition of four producers (one block a turn): x's
    half built two blocks on the common head, which made it irreversible; y's half built six,
    which did not (two producers of four). So x's branch has the higher LIB, y's the higher
    head by more than a couple of blocks."""
    x, y = devnet.open(x_path), devnet.open(y_path)
    for _ in range(8):
        y.push_block(devnet.produce(x), int(time.time() * 1000))
    base = x.head.slot
    for step in (1, 2):  # the two producers after the common head's
        devnet.produce(x, base + step)
    for step in (3, 4, 7, 8, 11, 12):  # the other two, over three rounds
        devnet.produce(y, base + step)
    assert x.lib > y.lib and y.head.num > x.head.num + 2
    x.store.close()
    y.store.close()


def test_after_a_partition_the_shorter_branch_with_the_higher_lib_wins_on_both(
    tmp_path: Path,
) -> None:
    """Two nodes meet on branches like those of a healed 2/2 partition (tests/netns): the one
    with the longer branch fetches the other's, though that one's head is lower, since its
    LIB outranks; both end on it, in step, so neither holds its producer back."""

    async def body(members: Members) -> None:
        devnet = DevNet.create(4, blocks_per_turn=1)
        _split_branches(devnet, tmp_path / "x", tmp_path / "y")
        x = await members("x", devnet).start()
        y = await members("y", devnet).start()
        x_head, x_lib = x.view.head.id, x.view.lib_num
        y.net.connect(x.address)
        await until(
            lambda: y.view.head.id == x_head and x.net.in_sync and y.net.in_sync, "in sync", 10
        )
        assert x.view.head.id == x_head and y.view.lib_num == x_lib

    run(tmp_path, body)
