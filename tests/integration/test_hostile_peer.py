"""A hostile peer against a real producing ``bor-node``: claims are not facts.

The liar is written with our own p2p classes: a real TCP connection, the preamble and TLS 1.3
that the node's default ``p2p-tls = on`` asks for (a stranger can run TLS as well as anyone), a
valid handshake signed by a fresh random key and bound to that TLS session (the default
``allowed-connection = any`` lets it in), a claimed head and LIB of 10⁹, answers to every
keepalive, and never a block.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

from chain.crypto import PrivateKey
from chain.types import BlockId
from node.devnet import DevNode, prepare
from p2p.errors import ChannelClosed
from p2p.handshake import ChainPosition, make_handshake
from p2p.messages import PROTOCOL_VERSION, GoAway, GoAwayReason, Hello, SyncRequest, Time
from p2p.tcp import TcpChannel
from p2p.testing import dial
from tests.integration.conftest import SLOWDOWN, Nodes, free_port, wait_for

CLAIM = 10**9


def _claimed_id(num: int) -> BlockId:
    return BlockId(num.to_bytes(4, "big") + os.urandom(28))


class LyingPeer:
    """Claims head and LIB of ``CLAIM``, answers pings, serves nothing; one identity (node id
    and key) across its connections, so that a ban of it shows on its next dial."""

    def __init__(self, chain_id: bytes, address: tuple[str, int]) -> None:
        self.chain_id = chain_id
        self.address = address
        self.node_id = os.urandom(32)
        self.key = PrivateKey.generate()
        self.connected = threading.Event()
        self.sent_away: GoAway | None = None
        self.session_ended = threading.Event()
        self.sync_requests = 0

    async def _handshake(self, channel: TcpChannel, binding: bytes) -> GoAway | None:
        await channel.send(Hello(PROTOCOL_VERSION, self.chain_id, self.node_id, os.urandom(32)))
        hello = await channel.recv()
        if isinstance(hello, GoAway):
            return hello
        assert isinstance(hello, Hello), hello
        claim = ChainPosition(CLAIM, _claimed_id(CLAIM), CLAIM, _claimed_id(CLAIM))
        handshake = make_handshake(
            chain_id=self.chain_id,
            node_id=self.node_id,
            node_key=self.key,
            peer_nonce=hello.nonce,
            position=claim,
            p2p_address="",
            tls_binding=binding,
        )
        await channel.send(handshake)
        answer = await channel.recv()
        return answer if isinstance(answer, GoAway) else None

    async def session(self) -> None:
        """One connection: handshake, then answer pings until sent away or closed."""
        channel, binding = await dial(*self.address)
        assert channel.tls is not None, "the node runs TLS by default"
        try:
            refused = await self._handshake(channel, binding)
            if refused is not None:
                self.sent_away = refused
                return
            self.connected.set()
            while True:
                message = await channel.recv()
                if isinstance(message, GoAway):
                    self.sent_away = message
                    return
                if isinstance(message, Time) and message.xmt and not message.org:
                    now = time.time_ns()
                    await channel.send(Time(message.xmt, now, time.time_ns(), 0))
                elif isinstance(message, SyncRequest):
                    self.sync_requests += 1
        except ChannelClosed:
            return
        finally:
            await channel.close()
            self.session_ended.set()

    def start(self) -> threading.Thread:
        self.connected.clear()
        self.session_ended.clear()
        thread = threading.Thread(target=asyncio.run, args=(self.session(),), daemon=True)
        thread.start()
        return thread


def test_a_lying_peer_neither_stops_production_nor_stays(nodes: Nodes, tmp_path: Path) -> None:
    """A stranger claiming head and LIB 10⁹ that never serves a block: the producer's head
    keeps advancing while it is connected, the liar is sent away for the ranges it never
    delivered, and its next dial is refused as banned."""
    plan = [DevNode("node1", "producera", ("127.0.0.1", free_port()), ("127.0.0.1", free_port()))]
    prepare(tmp_path, plan)
    producer = nodes.run(tmp_path / "node1", rpc_port=plan[0].rpc[1]).start(wait_head=2)
    info = producer.info()
    liar = LyingPeer(bytes.fromhex(info["chain_id"]), plan[0].p2p)
    liar.start()
    assert liar.connected.wait(10 * SLOWDOWN), producer.tail()
    wait_for(lambda: producer.info()["peer_count"] == 1, 5, "the liar to be a peer")
    head_before = producer.info()["head_block_num"]
    time.sleep(4)
    assert not liar.session_ended.is_set(), "measured while the liar is connected"
    advance = producer.info()["head_block_num"] - head_before
    print(f"head advanced by {advance} blocks in 4 s with the liar connected")
    assert advance >= 5, f"the head advanced by {advance} blocks in 4 s:\n{producer.tail()}"
    assert liar.session_ended.wait(20 * SLOWDOWN), "the liar is still connected"
    assert liar.sync_requests >= 1, "the liar was asked for blocks before it was sent away"
    assert liar.sent_away is not None
    assert producer.info()["peer_count"] == 0
    liar.start().join(10 * SLOWDOWN)
    assert liar.sent_away is not None and liar.sent_away.reason == GoAwayReason.BANNED
    log = producer.log.read_text()
    assert '"event": "peer_banned"' in log
    assert "production_paused_while_syncing" not in log
