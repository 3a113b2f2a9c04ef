"""The switch: admission (bans with back-off, client limit, duplicates), routing by message
type, and a failing reactor ending the switch — over in-memory channels."""

from __future__ import annotations

import asyncio
import os
import time
from typing import ClassVar

import pytest

from chain.core.primitives.types import BlockId
from p2p.errors import ChannelClosed, HandshakeFailed
from p2p.transport import switch as switch_module
from p2p.transport.peer import Peer, peer_id_of
from p2p.transport.reactor import Reactor
from p2p.transport.switch import Connection, SessionEnd, Switch
from p2p.wire.messages import (
    PROTOCOL_VERSION,
    GoAway,
    GoAwayReason,
    Handshake,
    IdListMode,
    Message,
    Notice,
    RawBlock,
    SyncRequest,
    Time,
)
from tests.p2p.configs import switch_config
from tests.support.channels import MemoryChannel
from tests.support.wait import pace, until


def handshake(node_id: bytes) -> Handshake:
    zero = BlockId(bytes(32))
    return Handshake(
        PROTOCOL_VERSION, b"c" * 32, node_id, b"", b"", "", 0, zero, 0, zero, "test", 1
    )


class Recorder(Reactor):
    """Owns Notice and SyncRequest; records what it is told."""

    accepts: ClassVar[tuple[type[Message], ...]] = (Notice, SyncRequest)

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def add_peer(self, peer: Peer) -> None:
        self.events.append(("add", peer.id))

    def remove_peer(self, peer: Peer) -> None:
        self.events.append(("remove", peer.id))

    async def receive(self, peer: Peer, message: Message) -> None:
        self.events.append(("message", message))


async def connect(
    switch: Switch, node_id: bytes, dialed: bool = False
) -> tuple[MemoryChannel, asyncio.Task[SessionEnd]]:
    """A session of ``node_id`` on ``switch``; returns the remote end and the session task."""
    ours, theirs = MemoryChannel.pair()
    conn = Connection(ours, node_id, handshake(node_id), dialed)
    task = asyncio.create_task(switch.serve(conn))
    await in_peer_set(switch, node_id)
    return theirs, task


async def in_peer_set(switch: Switch, node_id: bytes) -> None:
    """Wait until the session of ``node_id`` has joined ``switch``'s peer set."""
    peer = peer_id_of(node_id)
    await until(lambda: peer in [p.id for p in switch.peers()], "the session in the peer set")


def test_bans_double_with_each_offence_up_to_ten_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ban of the same node lasts twice the last one, capped at MAX_BAN_SECONDS, and a
    banned node is refused at hello until its ban runs out."""
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])  # the switch's clock
    switch = Switch(os.urandom(32), switch_config(), [])
    node = os.urandom(32)
    lengths = [switch.ban(node) for _ in range(8)]
    assert lengths == [10, 20, 40, 80, 160, 320, 600, 600]
    with pytest.raises(HandshakeFailed) as refused:
        switch.check_hello(node, dialed=True)
    assert refused.value.reason == GoAwayReason.BANNED
    now[0] += 601
    switch.check_hello(node, dialed=True)  # the ban ran out
    switch.check_hello(os.urandom(32), dialed=False)  # others were never banned


def test_inbound_peers_beyond_max_clients_are_refused_but_dialled_ones_are_not() -> None:
    """``max_clients`` counts inbound sessions only; we may always dial out."""

    async def main() -> None:
        switch = Switch(os.urandom(32), switch_config(max_clients=1), [])
        _, task = await connect(switch, os.urandom(32), dialed=False)
        with pytest.raises(HandshakeFailed) as refused:
            switch.check_hello(os.urandom(32), dialed=False)
        assert refused.value.reason == GoAwayReason.BENIGN_OTHER
        switch.check_hello(os.urandom(32), dialed=True)
        task.cancel()

    asyncio.run(main())


def test_of_two_connections_between_the_same_nodes_the_lower_id_s_dial_wins() -> None:
    """Both nodes dialled each other: the connection dialled by the lower node id is kept —
    the other is refused as DUPLICATE, or replaces the session we had."""

    async def main() -> None:
        low, high = sorted([os.urandom(32), os.urandom(32)])
        # We are ``low``, and ``high`` dialled us.
        switch = Switch(low, switch_config(), [])
        theirs, task = await connect(switch, high, dialed=False)
        # ``high`` dials us again: not dialled by the lower id, so refused.
        with pytest.raises(HandshakeFailed) as refused:
            await switch.admit(high, dialed=False)
        assert refused.value.reason == GoAwayReason.DUPLICATE
        # Our own dial to ``high`` is the one to keep: the old session is sent away.
        await switch.admit(high, dialed=True)
        away = await theirs.recv()
        while isinstance(away, Time):  # our keepalive pings come first
            away = await theirs.recv()
        assert isinstance(away, GoAway) and away.reason == GoAwayReason.DUPLICATE
        end = await asyncio.wait_for(task, 5)
        assert end.reason is None and peer_id_of(high) not in [p.id for p in switch.peers()]

    asyncio.run(main())


def test_messages_go_to_the_reactor_that_owns_their_type() -> None:
    """Notice and SyncRequest reach the recorder; Time is the switch's own (answered with
    our receive time); the recorder hears the peer come and go."""

    async def main() -> None:
        recorder = Recorder()
        switch = Switch(os.urandom(32), switch_config(), [recorder])
        node = os.urandom(32)
        theirs, task = await connect(switch, node)
        await theirs.send(Notice(0, 5))  # type: ignore[arg-type]
        await theirs.send(SyncRequest(1, 2))
        await theirs.send(Time(0, 0, 123, 0))
        reply = await asyncio.wait_for(theirs.recv(), 5)
        while not (isinstance(reply, Time) and reply.org == 123):
            reply = await asyncio.wait_for(theirs.recv(), 5)  # skip our own pings
        await theirs.close()
        await asyncio.wait_for(task, 5)
        pid = peer_id_of(node)
        assert recorder.events[0] == ("add", pid)
        assert [e for _, e in recorder.events[1:3]] == [Notice(0, 5), SyncRequest(1, 2)]  # type: ignore[arg-type]
        assert recorder.events[-1] == ("remove", pid)

    asyncio.run(main())


def test_a_type_with_two_owners_is_a_wiring_error() -> None:
    """Two reactors may not both own a message type."""
    with pytest.raises(AssertionError, match="two owners"):
        Switch(os.urandom(32), switch_config(), [Recorder(), Recorder()])


def test_a_failing_reactor_ends_the_switch_and_its_sessions() -> None:
    """An exception in a reactor's ``run`` propagates out of ``Switch.run`` (nothing dies
    silently), and every peer's channel is closed on the way out."""

    class Crashing(Reactor):
        def __init__(self) -> None:
            self.crash = asyncio.Event()

        async def run(self) -> None:
            await self.crash.wait()
            raise RuntimeError("reactor bug")

    async def main() -> None:
        crashing = Crashing()
        switch = Switch(os.urandom(32), switch_config(), [crashing])
        running = asyncio.create_task(switch.run())
        theirs, session = await connect(switch, os.urandom(32))
        crashing.crash.set()
        with pytest.raises(ExceptionGroup) as failed:
            await asyncio.wait_for(running, 5)
        assert failed.value.subgroup(RuntimeError) is not None
        end = await asyncio.wait_for(session, 5)
        assert end.reason is None and len(switch) == 0
        with pytest.raises(ChannelClosed):
            while True:  # whatever was queued, then the end of the stream
                await asyncio.wait_for(theirs.recv(), 5)

    asyncio.run(main())


class _UnflushedChannel(MemoryChannel):
    """Like a TCP channel closed with unsent bytes into a cut link: ``close`` marks it closed
    but a ``recv`` already waiting is never woken (asyncio waits to flush before it ends)."""

    async def close(self) -> None:
        self._closed = True


def test_a_silent_peer_is_dropped_even_if_closing_does_not_wake_its_reader() -> None:
    """A peer that stops answering keepalives ends its session (and leaves the peer set) after
    3 intervals, even when closing the channel leaves the pending receive hanging."""

    async def main() -> None:
        switch = Switch(os.urandom(32), switch_config(keepalive=0.05), [])
        ours, theirs = _UnflushedChannel.pair()
        node = os.urandom(32)
        task = asyncio.create_task(switch.serve(Connection(ours, node, handshake(node), True)))
        end = await asyncio.wait_for(task, 5)  # ``theirs`` never answers
        assert end.silent and end.reason is None
        assert len(switch) == 0 and ours.closed
        del theirs

    asyncio.run(main())


def test_a_peer_that_reads_nothing_is_dropped_at_the_write_limit_and_its_outbox_freed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A peer whose end takes nothing (its channel's buffer full, a 4 KiB receive window)
    loses its session once a message waits WRITE_SECONDS to leave, though it keeps talking,
    and what was queued for it is dropped with the session."""
    monkeypatch.setattr(switch_module, "WRITE_SECONDS", 0.3)

    async def main() -> None:
        switch = Switch(os.urandom(32), switch_config(keepalive=60), [])
        ours, theirs = MemoryChannel.pair(capacity=2)
        node = os.urandom(32)
        task = asyncio.create_task(switch.serve(Connection(ours, node, handshake(node), False)))
        await in_peer_set(switch, node)
        [peer] = switch.peers()
        for _ in range(10):
            peer.offer(RawBlock(bytes(1000)))

        async def chatter() -> None:  # it talks, so the keepalive would not drop it
            while True:
                await theirs.send(Notice(IdListMode.CATCH_UP, 0))
                await pace(0.05)

        talking = asyncio.ensure_future(chatter())
        started = time.monotonic()
        end = await asyncio.wait_for(task, 5)
        talking.cancel()
        assert 0.3 <= time.monotonic() - started < 2.0
        assert not end.silent and len(switch) == 0
        assert peer.outbox.empty() and peer.outbox.bytes == 0

    asyncio.run(main())
