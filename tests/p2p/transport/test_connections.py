"""The transport's limits before trust, over real sockets on loopback: caps on inbound
connections in their handshake and per source address, the handshake's frame limit and time
limit, and the normal frame limit once a peer has authenticated."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from typing import Any

from chain.core.consensus.qc import Vote
from chain.core.consensus.votes import VoteOutcome
from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.errors import TransactionError
from chain.core.primitives.types import AccountName, BlockId
from p2p.errors import ChannelClosed
from p2p.service import BlockResult
from p2p.transport.connections import Transport, TransportConfig
from p2p.transport.switch import Connection, SessionEnd
from p2p.transport.tcp import TcpChannel
from p2p.transport.tls import TlsIdentity, preamble
from p2p.wire.codec import HANDSHAKE_MAX_FRAME, encode_frame
from p2p.wire.handshake import ChainPosition
from p2p.wire.messages import Message, TransactionMessage
from scripts.peers import dial, until_closed
from tests.p2p.configs import transport_config
from tests.support.wait import pace, until

CHAIN_ID = b"c" * 32
GENESIS = BlockId(b"\x00" * 32)
# TLS on, as an operator's node runs by default (p2p-tls = on): the limits must hold there.
TLS = TlsIdentity.generate()


class Chain:
    """The little of a chain the handshake asks about: a chain id and a position at genesis."""

    chain_id = CHAIN_ID

    def position(self) -> ChainPosition:
        return ChainPosition(0, GENESIS, 0, GENESIS)

    def producer_keys(self) -> Collection[bytes]:
        return ()

    async def id_at(self, num: int) -> BlockId | None:
        return GENESIS if num == 0 else None

    async def encoded_blocks(self, start: int, end: int) -> list[bytes]:
        raise NotImplementedError

    async def push_blocks(
        self,
        blocks: Sequence[object],
        light_upto: int,
        ahead: Sequence[object] = (),
        taken: Callable[[int], None] | None = None,
    ) -> list[BlockResult]:
        raise NotImplementedError

    async def admit_transactions(
        self, txs: Sequence[SignedTransaction]
    ) -> list[TransactionError | None]:
        raise NotImplementedError

    async def add_votes(self, votes: Sequence[Vote]) -> list[VoteOutcome]:
        raise NotImplementedError


class Gate:
    """Admits everyone; a session sends ``outgoing`` and records what arrives until the
    channel closes."""

    def __init__(self, outgoing: Sequence[TransactionMessage] = ()) -> None:
        self.outgoing = outgoing
        self.received: asyncio.Queue[Message] = asyncio.Queue()

    def check_hello(self, node_id: bytes, dialed: bool) -> None:
        pass

    async def admit(self, node_id: bytes, dialed: bool) -> None:
        pass

    async def serve(self, conn: Connection) -> SessionEnd:
        for message in self.outgoing:
            await conn.channel.send(message)
        with contextlib.suppress(ChannelClosed):
            while True:
                await self.received.put(await conn.channel.recv())
        return SessionEnd(None, False, False)


@asynccontextmanager
async def running(
    config: TransportConfig, gate: Gate, peers: Sequence[tuple[str, int]] = ()
) -> AsyncIterator[Transport]:
    transport = Transport(config, os.urandom(32), PrivateKey.generate(), Chain(), gate)
    task = asyncio.create_task(transport.run(list(peers)))
    await transport.started.wait()
    try:
        yield transport
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def listening(**changes: Any) -> TransportConfig:
    """The declared transport config with TLS on, but for ``changes``."""
    return transport_config(**({"tls": TLS} | changes))


async def stranger(port: int, source: str = "127.0.0.2") -> TcpChannel | None:
    """Connect from ``source``, exchange preambles and run TLS as any dialler does, then say
    nothing: our end if the node took the connection, None if it closed it at once (without
    answering our preamble)."""
    try:
        async with asyncio.timeout(2):
            channel, _ = await dial("127.0.0.1", port, source=source)
    except ChannelClosed:
        return None
    return channel


def test_inbound_connections_beyond_the_per_address_cap_are_closed_unanswered() -> None:
    """With max-per-address 2, a third connection from the same address is closed once its
    preamble is read, before the node says anything; another address is still welcome, and
    the address gets its slot back once one of its connections ends."""

    async def main() -> None:
        async with running(listening(max_per_address=2), Gate()) as node:
            assert node.listen_port is not None
            port = node.listen_port
            held = [await stranger(port) for _ in range(2)]
            assert held[0] is not None and held[1] is not None
            assert await stranger(port) is None
            assert await stranger(port, "127.0.0.3") is not None
            await held[0].close()
            await until(
                lambda: node.inbound.per_address.get("127.0.0.2", 0) < 2, "a slot given back"
            )
            assert await stranger(port) is not None

    asyncio.run(main())


def test_connections_in_their_handshake_are_capped_over_all_addresses() -> None:
    """With max-unauthenticated 2, two silent strangers from different addresses fill the
    handshake slots; a third, from yet another address, is closed at once."""

    async def main() -> None:
        async with running(listening(max_unauthenticated=2), Gate()) as node:
            assert node.listen_port is not None
            port = node.listen_port
            held = [await stranger(port, f"127.0.0.{i}") for i in (2, 3, 4)]
            assert [channel is not None for channel in held] == [True, True, False]
            assert node.inbound.unauthenticated == 2

    asyncio.run(main())


async def raw_connection(port: int, source: str) -> TcpChannel:
    """A bare TCP connection from ``source`` that has sent nothing (not even the preamble)."""
    return TcpChannel(*await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)))


def test_a_full_waiting_room_gives_up_its_oldest_connection_still_owing_its_preamble() -> None:
    """With room for 2 connections per address waiting for their preamble, both taken by
    connections that sent nothing, an honest dialler from the same address still gets through
    its preamble and TLS, and the oldest silent connection is closed for it."""

    async def main() -> None:
        config = listening()
        config.max_waiting_per_address = 2
        async with running(config, Gate()) as node:
            assert node.listen_port is not None
            port = node.listen_port
            first, second = [await raw_connection(port, "127.0.0.2") for _ in range(2)]
            await until(lambda: node.inbound.waiting == 2, "both in the waiting room")
            assert await stranger(port) is not None  # the preamble, then TLS
            async with asyncio.timeout(1):
                await until_closed(first)
            assert node.inbound.waiting == 1 and node.inbound.unauthenticated == 1
            await second.close()

    asyncio.run(main())


def test_one_address_holds_its_share_of_handshake_slots_and_no_more() -> None:
    """With one handshake slot per address, a second stranger from an address whose first is
    in its handshake is closed after its preamble, unanswered; another address gets a slot."""

    async def main() -> None:
        config = listening()
        config.max_unauthenticated_per_address = 1
        async with running(config, Gate()) as node:
            assert node.listen_port is not None
            port = node.listen_port
            held = [await stranger(port)]
            assert held[0] is not None
            assert await stranger(port) is None
            held.append(await stranger(port, "127.0.0.3"))
            assert held[1] is not None
            assert node.inbound.unauthenticated == 2

    asyncio.run(main())


def test_a_stranger_that_drips_its_preamble_is_cut_at_the_preamble_timeout() -> None:
    """The 8-byte preamble must come within preamble_timeout, well before the handshake
    timeout: a byte every 0.2 s is cut at 0.3 s, and its slot is free again."""

    async def main() -> None:
        config = listening(handshake_timeout_ms=5000)
        config.preamble_timeout = 0.3
        async with running(config, Gate()) as node:
            assert node.listen_port is not None
            channel = await raw_connection(node.listen_port, "127.0.0.2")
            start = time.monotonic()

            async def drip() -> None:
                with contextlib.suppress(ChannelClosed):
                    for byte in preamble(True):
                        await channel.send_raw(bytes([byte]))
                        await pace(0.2)

            dripping = asyncio.ensure_future(drip())
            async with asyncio.timeout(2):
                await until_closed(channel)
            dripping.cancel()
            assert 0.3 <= time.monotonic() - start < 1.0
            await until(
                lambda: node.inbound.unauthenticated == 0 and not node.inbound.per_address,
                "the slot given back",
            )

    asyncio.run(main())


def test_a_stranger_announcing_more_than_a_handshake_frame_is_dropped_at_once() -> None:
    """Before the handshake a frame may not exceed HANDSHAKE_MAX_FRAME: a stranger that gets
    through the preamble and TLS (as anyone can) and announces an 8 MiB hello is dropped as
    soon as its header is read, long before the handshake timeout and without the node
    buffering its body."""

    async def main() -> None:
        async with running(listening(handshake_timeout_ms=5000), Gate()) as node:
            assert node.listen_port is not None
            channel, _ = await dial("127.0.0.1", node.listen_port)
            assert channel.tls is not None
            start = time.monotonic()
            with contextlib.suppress(ChannelClosed):  # the node may close before we are done
                await channel.send_raw(
                    (8 << 20).to_bytes(4, "big") + b"\x00" + bytes(HANDSHAKE_MAX_FRAME)
                )
            async with asyncio.timeout(2):
                await until_closed(channel)
            assert time.monotonic() - start < 1.0

    asyncio.run(main())


def test_a_silent_stranger_is_dropped_at_the_handshake_timeout() -> None:
    """A connection that gets through the preamble and TLS but never sends its hello is closed
    once the handshake time (counted from its arrival) is up, and no longer counts as in its
    handshake."""

    async def main() -> None:
        async with running(listening(handshake_timeout_ms=300), Gate()) as node:
            assert node.listen_port is not None
            start = time.monotonic()
            channel, _ = await dial("127.0.0.1", node.listen_port)
            async with asyncio.timeout(2):
                await until_closed(channel)
            assert 0.3 <= time.monotonic() - start < 1.0
            await until(
                lambda: node.inbound.unauthenticated == 0 and not node.inbound.per_address,
                "the slot given back",
            )

    asyncio.run(main())


def big_transaction() -> TransactionMessage:
    """A valid transaction larger than a handshake frame (16 transfers, 1 KiB memos)."""
    memo = "\U0001f600" * 256
    actions = tuple(Transfer(AccountName("alice"), AccountName("bob"), 1, memo) for _ in range(16))
    tx = SignedTransaction.sign(Transaction(9, 1, 2, actions), CHAIN_ID, [PrivateKey.generate()])
    message = TransactionMessage.of(tx)
    assert len(encode_frame(message)) > HANDSHAKE_MAX_FRAME
    return message


def test_an_authenticated_peer_may_send_frames_beyond_the_handshake_limit() -> None:
    """Once the handshake is done, the normal frame limit applies on both sides: a dialling
    peer's first message, larger than a handshake frame, arrives."""

    async def main() -> None:
        message = big_transaction()
        listener_gate = Gate()
        async with running(listening(), listener_gate) as listener:
            assert listener.listen_port is not None
            address = ("127.0.0.1", listener.listen_port)
            async with running(transport_config(tls=TLS), Gate([message]), [address]):
                async with asyncio.timeout(5):
                    arrived = await listener_gate.received.get()
                assert arrived == message
                assert listener.inbound.unauthenticated == 0

    asyncio.run(main())
