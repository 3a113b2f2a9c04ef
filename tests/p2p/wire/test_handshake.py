"""Who may connect: the hello and handshake checks, as pure functions (no sockets)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection

import pytest

from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import BlockId
from p2p.errors import HandshakeFailed
from p2p.wire.handshake import (
    AuthPolicy,
    ChainPosition,
    check_handshake,
    check_hello,
    make_handshake,
)
from p2p.wire.messages import PROTOCOL_VERSION, GoAwayReason, Handshake, Hello

CHAIN = b"c" * 32
OTHER_CHAIN = b"x" * 32
US = b"u" * 32  # our node id
PEER = b"p" * 32  # the peer's node id
MY_NONCE = b"\x01" * 32  # the nonce in our hello: the peer must sign it
PEER_KEY = PrivateKey(b"\x11" * 32)
OTHER_KEY = PrivateKey(b"\x22" * 32)
ANYONE = AuthPolicy()


def block_id(num: int, branch: int = 1) -> BlockId:
    return BlockId(num.to_bytes(4, "big") + bytes([branch]) * 28)


def our_id_at(num: int) -> BlockId | None:
    """Our chain: every block up to 50 on branch 1; nothing above."""
    return block_id(num) if num <= 50 else None


def peer_hello(
    *, version: int = PROTOCOL_VERSION, chain_id: bytes = CHAIN, node_id: bytes = PEER
) -> Hello:
    return Hello(version, chain_id, node_id, b"\x02" * 32)


def peer_handshake(
    *,
    key: PrivateKey = PEER_KEY,
    nonce: bytes = MY_NONCE,
    lib: int = 40,
    lib_id: BlockId | None = None,
    node_id: bytes = PEER,
    chain_id: bytes = CHAIN,
) -> Handshake:
    return make_handshake(
        chain_id=chain_id,
        node_id=node_id,
        node_key=key,
        peer_nonce=nonce,
        position=ChainPosition(lib, lib_id or block_id(lib), lib + 5, block_id(lib + 5)),
        p2p_address="peer:9876",
    )


def check(
    hs: Handshake,
    *,
    policy: AuthPolicy = ANYONE,
    producer_keys: Collection[bytes] = (),
    our_lib: int = 45,
    ids: Callable[[int], BlockId | None] = our_id_at,
) -> None:
    check_handshake(
        hs,
        hello=peer_hello(),
        my_nonce=MY_NONCE,
        chain_id=CHAIN,
        policy=policy,
        producer_keys=producer_keys,
        our_lib=our_lib,
        our_id_at=ids,
    )


def refused(reason: GoAwayReason, call: Callable[[], None]) -> HandshakeFailed:
    with pytest.raises(HandshakeFailed) as info:
        call()
    assert info.value.reason == reason, info.value.detail
    return info.value


def test_an_honest_peer_on_our_chain_is_accepted() -> None:
    """The baseline the refusals below differ from by one field: hello and handshake pass."""
    check_hello(peer_hello(), CHAIN, US)
    check(peer_handshake())


def test_a_handshake_signed_for_another_connections_nonce_is_refused() -> None:
    """A recorded handshake replayed on a new connection signs the old nonce: AUTHENTICATION."""
    replayed = peer_handshake(nonce=b"\x09" * 32)
    refused(GoAwayReason.AUTHENTICATION, lambda: check(replayed))


def test_a_signature_by_a_key_other_than_the_named_one_is_refused() -> None:
    """A handshake naming one key but signed by another is refused with AUTHENTICATION."""
    signed_by_other = peer_handshake(key=OTHER_KEY)
    forged = dataclasses.replace(signed_by_other, key=PEER_KEY.public_key)
    error = refused(GoAwayReason.AUTHENTICATION, lambda: check(forged))
    assert "named key" in error.detail


def test_an_unsigned_handshake_is_refused() -> None:
    """A handshake without key or signature is refused with AUTHENTICATION, before recovery."""
    hs = peer_handshake()
    refused(GoAwayReason.AUTHENTICATION, lambda: check(dataclasses.replace(hs, signature=b"")))
    refused(GoAwayReason.AUTHENTICATION, lambda: check(dataclasses.replace(hs, key=b"")))


def test_a_peer_whose_irreversible_block_differs_from_ours_is_forked() -> None:
    """A peer final on another block at a height we hold is refused with FORKED."""
    hs = peer_handshake(lib=40, lib_id=block_id(40, branch=2))
    error = refused(GoAwayReason.FORKED, lambda: check(hs))
    assert "40" in error.detail


def test_an_irreversible_block_above_ours_or_unknown_to_us_is_not_judged() -> None:
    """Only a LIB at or below ours that we can look up can show a fork: others pass."""
    above_our_lib = peer_handshake(lib=48, lib_id=block_id(48, branch=2))
    check(above_our_lib, our_lib=45)
    unknown = peer_handshake(lib=40, lib_id=block_id(40, branch=2))
    check(unknown, ids=lambda num: None)


def test_a_node_id_changed_between_hello_and_handshake_is_refused() -> None:
    """The handshake must come from the node that said hello: FATAL_OTHER otherwise."""
    hs = peer_handshake(node_id=b"q" * 32)
    refused(GoAwayReason.FATAL_OTHER, lambda: check(hs))


def test_another_chain_is_refused_in_hello_and_in_handshake() -> None:
    """A peer naming another chain id is refused with WRONG_CHAIN at either step."""
    refused(
        GoAwayReason.WRONG_CHAIN, lambda: check_hello(peer_hello(chain_id=OTHER_CHAIN), CHAIN, US)
    )
    hs = peer_handshake(chain_id=OTHER_CHAIN)
    refused(GoAwayReason.WRONG_CHAIN, lambda: check(hs))


def test_another_protocol_version_is_refused_in_hello_and_in_handshake() -> None:
    """A peer speaking another protocol version is refused with WRONG_VERSION (which the
    dialler may retry later) whether the hello or the handshake says so."""
    hello = peer_hello(version=PROTOCOL_VERSION + 1)
    error = refused(GoAwayReason.WRONG_VERSION, lambda: check_hello(hello, CHAIN, US))
    assert GoAwayReason(error.reason).retry
    hs = dataclasses.replace(peer_handshake(), version=PROTOCOL_VERSION + 1)
    refused(GoAwayReason.WRONG_VERSION, lambda: check(hs))


def test_connecting_to_ourselves_is_refused() -> None:
    """A hello carrying our own node id is refused with SELF, before any other check."""
    ourselves = peer_hello(node_id=US, chain_id=OTHER_CHAIN)
    refused(GoAwayReason.SELF, lambda: check_hello(ourselves, CHAIN, US))


def test_producers_mode_accepts_an_active_producer_key_and_refuses_another() -> None:
    """allowed-connection = producers: a producer's signing key passes, any other key is
    refused with AUTHENTICATION."""
    policy = AuthPolicy.parse(["producers"], [])
    producers = {PEER_KEY.public_key}
    check(peer_handshake(key=PEER_KEY), policy=policy, producer_keys=producers)
    outsider = peer_handshake(key=OTHER_KEY)
    refused(
        GoAwayReason.AUTHENTICATION,
        lambda: check(outsider, policy=policy, producer_keys=producers),
    )


def test_specified_mode_accepts_only_the_configured_peer_keys() -> None:
    """allowed-connection = specified: a configured peer-key passes, a producer's key that is
    not configured does not."""
    policy = AuthPolicy.parse(["specified"], [OTHER_KEY.public_key])
    check(peer_handshake(key=OTHER_KEY), policy=policy)
    producer = peer_handshake(key=PEER_KEY)
    refused(
        GoAwayReason.AUTHENTICATION,
        lambda: check(producer, policy=policy, producer_keys={PEER_KEY.public_key}),
    )


def test_producers_and_specified_together_accept_either() -> None:
    """Both modes: a producer key or a configured key is enough."""
    policy = AuthPolicy.parse(["producers", "specified"], [OTHER_KEY.public_key])
    producers = {PEER_KEY.public_key}
    check(peer_handshake(key=PEER_KEY), policy=policy, producer_keys=producers)
    check(peer_handshake(key=OTHER_KEY), policy=policy, producer_keys=producers)


def test_an_unknown_allowed_connection_mode_is_a_config_error() -> None:
    """AuthPolicy.parse names the unknown mode; no modes at all means any."""
    with pytest.raises(ValueError, match="'everyone'"):
        AuthPolicy.parse(["any", "everyone"], [])
    assert AuthPolicy.parse([], []).allow_any
