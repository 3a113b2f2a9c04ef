"""TLS between nodes: the preamble, TLS 1.3 over real loopback sockets, and the binding of
the signed handshake to the listener's certificate (a relay with its own is refused)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

import p2p.transport.tcp
from chain.core.primitives.crypto import PrivateKey, sha256
from chain.core.primitives.types import BlockId
from p2p.errors import ChannelBroken, ChannelClosed, HandshakeFailed, OversizedFrame
from p2p.transport.tcp import TcpChannel
from p2p.transport.tls import (
    PREAMBLE_SIZE,
    TlsIdentity,
    check_agree,
    negotiate,
    parse_preamble,
    preamble,
)
from p2p.wire.codec import encode_frame
from p2p.wire.handshake import AuthPolicy, ChainPosition, check_handshake, make_handshake
from p2p.wire.messages import PROTOCOL_VERSION, GoAwayReason, Handshake, Hello, Time
from tests.support.wait import until

CHAIN = b"c" * 32
PEER = b"p" * 32
NONCE = b"\x01" * 32
KEY = PrivateKey(b"\x11" * 32)
ID = BlockId(b"\x00" * 32)
LISTENER = TlsIdentity.generate()
DIALLER = TlsIdentity.generate()
RELAY = TlsIdentity.generate()


def signed(binding: bytes) -> Handshake:
    """A peer's handshake bound to ``binding``."""
    return make_handshake(
        chain_id=CHAIN,
        node_id=PEER,
        node_key=KEY,
        peer_nonce=NONCE,
        position=ChainPosition(0, ID, 0, ID),
        p2p_address="",
        tls_binding=binding,
    )


def check(hs: Handshake, ours: bytes) -> None:
    check_handshake(
        hs,
        hello=Hello(PROTOCOL_VERSION, CHAIN, PEER, b"\x02" * 32),
        my_nonce=NONCE,
        chain_id=CHAIN,
        policy=AuthPolicy(),
        producer_keys=(),
        our_lib=0,
        our_id_at=lambda num: ID,
        tls_binding=ours,
    )


def refusal(hs: Handshake, ours: bytes) -> HandshakeFailed:
    with pytest.raises(HandshakeFailed) as caught:
        check(hs, ours)
    return caught.value


# --- the binding, as pure checks --------------------------------------------------------


def test_a_handshake_bound_to_our_certificate_is_accepted() -> None:
    """Both ends saw the listener's certificate: the handshake passes."""
    check(signed(LISTENER.binding), LISTENER.binding)


def test_a_handshake_bound_to_another_certificate_is_refused_as_a_relay() -> None:
    """The peer saw another certificate than ours (a relay's): AUTHENTICATION, saying so."""
    err = refusal(signed(RELAY.binding), LISTENER.binding)
    assert err.reason == GoAwayReason.AUTHENTICATION
    assert "relay terminating TLS" in err.detail


def test_a_binding_rewritten_after_signing_fails_the_signature() -> None:
    """A relay that swaps in the certificate hash we expect breaks the node key signature."""
    forwarded = dataclasses.replace(signed(RELAY.binding), tls_binding=LISTENER.binding)
    err = refusal(forwarded, LISTENER.binding)
    assert err.reason == GoAwayReason.AUTHENTICATION
    assert "signature" in err.detail


def test_without_tls_the_binding_must_be_empty_both_ways() -> None:
    """p2p-tls = off: an unbound handshake passes; a bound one is refused, and on a TLS
    connection an unbound one is refused."""
    check(signed(b""), b"")
    assert refusal(signed(LISTENER.binding), b"").reason == GoAwayReason.AUTHENTICATION
    err = refusal(signed(b""), LISTENER.binding)
    assert "not bound" in err.detail


def test_the_certificate_binding_is_its_sha256() -> None:
    """The binding is the SHA-256 of the DER certificate, and differs between identities."""
    assert LISTENER.binding == sha256(LISTENER.certificate)
    assert LISTENER.binding != RELAY.binding


# --- the preamble -----------------------------------------------------------------------


def test_the_preamble_says_whether_a_side_runs_tls() -> None:
    """Each preamble parses back to its flag and has the announced size."""
    assert parse_preamble(preamble(True)) is True
    assert parse_preamble(preamble(False)) is False
    assert len(preamble(True)) == PREAMBLE_SIZE


def test_anything_but_a_preamble_is_refused() -> None:
    """A frame (an older node's hello) or another version is refused with a reason."""
    with pytest.raises(HandshakeFailed) as caught:
        parse_preamble(encode_frame(Time(1, 2, 3, 4))[:PREAMBLE_SIZE])
    assert caught.value.reason == GoAwayReason.FATAL_OTHER
    with pytest.raises(HandshakeFailed) as caught:
        parse_preamble(preamble(True)[:-2] + b"\x09\x01")
    assert caught.value.reason == GoAwayReason.WRONG_VERSION


def test_a_tls_mismatch_names_both_settings() -> None:
    """on against off is TLS_MISMATCH, and the detail says which side has which."""
    check_agree(True, True)
    check_agree(False, False)
    with pytest.raises(HandshakeFailed) as caught:
        check_agree(True, False)
    assert caught.value.reason == GoAwayReason.TLS_MISMATCH
    assert "peer has p2p-tls = off and this node p2p-tls = on" in caught.value.detail


# --- over real sockets ------------------------------------------------------------------

Accepted = Callable[[TcpChannel], Awaitable[bytes]]


@asynccontextmanager
async def listener(on_accept: Accepted) -> AsyncIterator[tuple[int, asyncio.Queue[object]]]:
    """A loopback listener that runs ``on_accept`` on each connection and queues its result
    (or the exception it raised) with the channel."""
    results: asyncio.Queue[object] = asyncio.Queue()

    async def accept(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        channel = TcpChannel(r, w)
        try:
            await results.put((channel, await on_accept(channel)))
        except Exception as err:  # handed to the test
            await results.put(err)
            await channel.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], results
    finally:
        server.close()
        await server.wait_closed()


def run(body: Callable[[], Awaitable[None]]) -> None:
    async def main() -> None:
        async with asyncio.timeout(20):
            await body()

    asyncio.run(main())


def test_two_ends_with_tls_agree_on_the_listeners_certificate_over_tls_1_3() -> None:
    """Both ends run TLS 1.3; the dialler's binding (what it was shown) equals the
    listener's (its own certificate); frames then cross both ways."""

    async def body() -> None:
        async with listener(lambda ch: negotiate(ch, LISTENER, False, 5)) as (port, results):
            ours = await TcpChannel.connect("127.0.0.1", port)
            binding = await negotiate(ours, DIALLER, True, 5)
            accepted = await results.get()
            assert isinstance(accepted, tuple)
            theirs, their_binding = accepted
            assert binding == their_binding == LISTENER.binding
            assert ours.tls is not None and ours.tls.version() == "TLSv1.3"
            await ours.send(Time(1, 2, 3, 4))
            assert await theirs.recv() == Time(1, 2, 3, 4)
            await theirs.send(Time(5, 6, 7, 8))
            assert await ours.recv() == Time(5, 6, 7, 8)
            await ours.close()
            await theirs.close()

    run(body)


def test_two_ends_without_tls_talk_plaintext_with_an_empty_binding() -> None:
    """p2p-tls = off at both ends: no TLS, empty bindings, frames cross."""

    async def body() -> None:
        async with listener(lambda ch: negotiate(ch, None, False, 5)) as (port, results):
            ours = await TcpChannel.connect("127.0.0.1", port)
            assert await negotiate(ours, None, True, 5) == b""
            accepted = await results.get()
            assert isinstance(accepted, tuple)
            theirs, their_binding = accepted
            assert their_binding == b"" and ours.tls is None
            await ours.send(Time(1, 2, 3, 4))
            assert await theirs.recv() == Time(1, 2, 3, 4)
            await ours.close()
            await theirs.close()

    run(body)


@pytest.mark.parametrize("dialler_tls", [True, False])
def test_a_tls_mismatch_is_refused_at_both_ends_without_a_hang(dialler_tls: bool) -> None:
    """One end on, the other off: each raises TLS_MISMATCH at once (no TLS error, no wait
    for a timeout)."""

    async def body() -> None:
        listener_identity = None if dialler_tls else LISTENER
        dialler_identity = DIALLER if dialler_tls else None
        async with listener(lambda ch: negotiate(ch, listener_identity, False, 30)) as (
            port,
            results,
        ):
            ours = await TcpChannel.connect("127.0.0.1", port)
            async with asyncio.timeout(2):
                with pytest.raises(HandshakeFailed) as caught:
                    await negotiate(ours, dialler_identity, True, 30)
                theirs = await results.get()
            assert caught.value.reason == GoAwayReason.TLS_MISMATCH
            assert isinstance(theirs, HandshakeFailed)
            assert theirs.reason == GoAwayReason.TLS_MISMATCH
            await ours.close()

    run(body)


def test_bytes_sent_before_tls_are_never_read_as_if_from_inside_it() -> None:
    """A dialler that sends a frame in plaintext right behind its preamble, then runs TLS:
    the listener's first frame is the one sent inside TLS, not the injected one."""

    async def body() -> None:
        async with listener(lambda ch: negotiate(ch, LISTENER, False, 5)) as (port, results):
            ours = await TcpChannel.connect("127.0.0.1", port)
            await ours.send_raw(preamble(True) + encode_frame(Time(6, 6, 6, 6)))
            assert parse_preamble(await ours.recv_raw(PREAMBLE_SIZE))
            await ours.start_tls(DIALLER.client, server_side=False, timeout=5)
            accepted = await results.get()
            assert isinstance(accepted, tuple)
            theirs = accepted[0]
            await ours.send(Time(1, 2, 3, 4))
            assert await theirs.recv() == Time(1, 2, 3, 4)
            await ours.close()
            await theirs.close()

    run(body)


def test_a_tls_terminating_relay_leaves_the_two_ends_with_different_bindings() -> None:
    """Dialler -> relay (TLS with the relay's certificate) -> listener: each end's binding is
    the certificate it dealt with, so the handshakes each signs fail at the other end."""

    async def body() -> None:
        async with listener(lambda ch: negotiate(ch, LISTENER, False, 5)) as (port, results):

            async def relay(inbound: TcpChannel) -> bytes:
                outbound = await TcpChannel.connect("127.0.0.1", port)
                await negotiate(outbound, RELAY, True, 5)
                return await negotiate(inbound, RELAY, False, 5)

            async with listener(relay) as (relay_port, _):
                ours = await TcpChannel.connect("127.0.0.1", relay_port)
                binding = await negotiate(ours, DIALLER, True, 5)
                accepted = await results.get()
                assert isinstance(accepted, tuple)
                their_binding = accepted[1]
                assert binding == RELAY.binding and their_binding == LISTENER.binding
                # What each end signs, the other refuses.
                assert refusal(signed(binding), their_binding).reason == (
                    GoAwayReason.AUTHENTICATION
                )
                assert refusal(signed(their_binding), binding).reason == (
                    GoAwayReason.AUTHENTICATION
                )
                await ours.close()
                await accepted[0].close()

    run(body)


def test_a_tls_channel_closed_while_its_peer_sends_is_freed_at_once() -> None:
    """A channel that refuses an oversized frame under TLS while the peer keeps sending frees
    its TLS state (with its 256 KiB read buffer) as soon as it is dropped: no SSL error
    ("application data after close notify") keeps it in a reference cycle until the garbage
    collector runs, which let a flood of such strangers grow a node by 250 MiB."""

    async def body() -> weakref.ref[asyncio.BaseProtocol]:
        async with listener(lambda ch: negotiate(ch, LISTENER, False, 5)) as (port, results):
            ours = await TcpChannel.connect("127.0.0.1", port, max_frame=1024)
            await negotiate(ours, DIALLER, True, 5)
            accepted = await results.get()
            assert isinstance(accepted, tuple) and ours._plaintext is not None
            state = weakref.ref(ours._plaintext.transport.get_protocol())
            theirs = accepted[0]
            await theirs.send_raw((8 << 20).to_bytes(4, "big") + b"\x01" + bytes(1 << 20))
            try:
                await ours.recv()
            except OversizedFrame:
                pass
            else:
                raise AssertionError("the oversized frame was not refused")
            await theirs.close()
            del ours, theirs, accepted
        await until(lambda: state() is None, "the transports' closing callbacks to free it")
        return state

    gc.disable()  # what reference counting alone frees
    try:
        state = asyncio.run(body())
        assert state() is None, gc.get_referrers(state())
    finally:
        gc.enable()


def test_a_tls_channel_whose_peer_takes_nothing_is_aborted_at_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under TLS too, a close whose data and close_notify cannot be flushed (a cut link, a
    peer that reads nothing) gives up after ``CLOSE_SECONDS`` and drops the connection: the
    peer sees it end at once, not after TLS's own shutdown timeout."""
    monkeypatch.setattr(p2p.transport.tcp, "CLOSE_SECONDS", 0.3)

    async def body() -> None:
        async with listener(lambda ch: negotiate(ch, LISTENER, False, 5)) as (port, results):
            ours = await TcpChannel.connect("127.0.0.1", port)
            await negotiate(ours, DIALLER, True, 5)
            accepted = await results.get()
            assert isinstance(accepted, tuple)
            theirs: TcpChannel = accepted[0]
            sending = asyncio.create_task(ours.send_raw(bytes(64 << 20)))
            raw = ours._plaintext
            assert raw is not None
            await until(  # stuck behind the full buffers: theirs reads nothing
                lambda: raw.transport.get_write_buffer_size() > 0, "the send buffered"
            )
            started = time.monotonic()
            await ours.close()
            with contextlib.suppress(ChannelBroken):
                await sending
            with pytest.raises((ChannelBroken, ChannelClosed)):
                while True:  # what reached their socket, then the end
                    await theirs.recv_raw(1 << 20)
            assert time.monotonic() - started < 1.5, "ended by the abort, not TLS's timeout"
            await theirs.close()

    run(body)
