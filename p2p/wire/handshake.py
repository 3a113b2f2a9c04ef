"""Building and checking handshakes.

Each side opens with ``Hello`` carrying a fresh random nonce. The handshake that follows is
signed over SHA-256(domain || chain id || the *peer's* nonce || our node id || our key ||
TLS binding), so a recorded handshake is worthless on any other connection (EOSIO signs a
timestamp, which can be replayed within its window). The TLS binding is the SHA-256 of the
listener's TLS certificate as the signer saw it (``p2p.transport.tls``): both sides must name the
same certificate, which a relay terminating TLS with a certificate of its own cannot arrange.
Without TLS (``p2p-tls = off`` at both ends) the binding is empty, and must be.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from chain.core.primitives.crypto import PrivateKey, recover, sha256
from chain.core.primitives.errors import BadSignature
from chain.core.primitives.types import BlockId
from p2p.errors import HandshakeFailed
from p2p.wire.messages import PROTOCOL_VERSION, GoAwayReason, Handshake, Hello

_DOMAIN = b"bor-handshake-v1"
AGENT = "bor/0.1"


@dataclass(frozen=True, slots=True)
class ChainPosition:
    lib_num: int
    lib_id: BlockId
    head_num: int
    head_id: BlockId
    first_block: int = 1  # the lowest block we hold and serve (a snapshot's, if one started us)


@dataclass(frozen=True, slots=True)
class AuthPolicy:
    """``allowed-connection``: any peer, or only peers whose key is an active producer's
    signing key and/or one of the configured ``peer-key``s."""

    allow_any: bool = True
    allow_producers: bool = False
    peer_keys: frozenset[bytes] = frozenset()

    @classmethod
    def parse(cls, modes: Collection[str], peer_keys: Collection[bytes]) -> AuthPolicy:
        modes = set(modes) or {"any"}
        unknown = modes - {"any", "producers", "specified"}
        if unknown:
            raise ValueError(f"unknown allowed-connection {sorted(unknown)[0]!r}")
        return cls("any" in modes, "producers" in modes, frozenset(peer_keys))


def handshake_digest(
    chain_id: bytes, peer_nonce: bytes, node_id: bytes, key: bytes, tls_binding: bytes = b""
) -> bytes:
    # Every field but the last has a fixed size, so the concatenation is unambiguous.
    return sha256(_DOMAIN + chain_id + peer_nonce + node_id + key + tls_binding)


def make_handshake(
    *,
    chain_id: bytes,
    node_id: bytes,
    node_key: PrivateKey,
    peer_nonce: bytes,
    position: ChainPosition,
    p2p_address: str,
    generation: int = 1,
    rdma: bool = False,
    tls_binding: bytes = b"",
) -> Handshake:
    """Our handshake; ``tls_binding`` as ``p2p.transport.tls.negotiate`` returned it (empty without
    TLS)."""
    key = node_key.public_key
    signature = node_key.sign(handshake_digest(chain_id, peer_nonce, node_id, key, tls_binding))
    return Handshake(
        version=PROTOCOL_VERSION,
        chain_id=chain_id,
        node_id=node_id,
        key=key,
        signature=signature,
        p2p_address=p2p_address,
        lib_num=position.lib_num,
        lib_id=position.lib_id,
        head_num=position.head_num,
        head_id=position.head_id,
        agent=AGENT,
        generation=generation,
        rdma=rdma,
        tls_binding=tls_binding,
        first_block=position.first_block,
    )


def check_hello(hello: Hello, chain_id: bytes, node_id: bytes) -> None:
    """First checks, before any signature work: version, chain, and talking to ourselves."""
    if hello.node_id == node_id:
        raise HandshakeFailed(GoAwayReason.SELF, "connected to ourselves")
    if hello.chain_id != chain_id:
        raise HandshakeFailed(
            GoAwayReason.WRONG_CHAIN, f"peer is on chain {hello.chain_id.hex()[:16]}"
        )
    if hello.version != PROTOCOL_VERSION:
        raise HandshakeFailed(GoAwayReason.WRONG_VERSION, f"protocol {hello.version}")


def check_handshake(
    hs: Handshake,
    *,
    hello: Hello,
    my_nonce: bytes,
    chain_id: bytes,
    policy: AuthPolicy,
    producer_keys: Collection[bytes],
    our_lib: int,
    our_id_at: Callable[[int], BlockId | None],
    tls_binding: bytes = b"",
) -> None:
    """Raise HandshakeFailed with the go_away reason if the peer must be refused.
    ``tls_binding`` is ours for this connection: the peer's must be the same."""
    if hs.chain_id != chain_id:
        raise HandshakeFailed(GoAwayReason.WRONG_CHAIN, "handshake names another chain")
    if hs.version != PROTOCOL_VERSION:
        raise HandshakeFailed(GoAwayReason.WRONG_VERSION, f"handshake protocol {hs.version}")
    if hs.node_id != hello.node_id:
        raise HandshakeFailed(GoAwayReason.FATAL_OTHER, "node id changed after hello")
    if not hs.key or not hs.signature:
        raise HandshakeFailed(GoAwayReason.AUTHENTICATION, "handshake is not signed")
    if hs.tls_binding != tls_binding:
        raise HandshakeFailed(
            GoAwayReason.AUTHENTICATION, _binding_mismatch(hs.tls_binding, tls_binding)
        )
    digest = handshake_digest(chain_id, my_nonce, hs.node_id, hs.key, hs.tls_binding)
    try:
        signer = recover(hs.signature, digest)
    except BadSignature as err:
        raise HandshakeFailed(GoAwayReason.AUTHENTICATION, f"bad signature: {err}") from err
    if signer != hs.key:
        raise HandshakeFailed(GoAwayReason.AUTHENTICATION, "signature is not by the named key")
    allowed = (
        policy.allow_any
        or (policy.allow_producers and hs.key in producer_keys)
        or hs.key in policy.peer_keys
    )
    if not allowed:
        raise HandshakeFailed(GoAwayReason.AUTHENTICATION, "key is not allowed to connect")
    if hs.lib_num <= our_lib:
        ours = our_id_at(hs.lib_num)
        if ours is not None and ours != hs.lib_id:
            raise HandshakeFailed(
                GoAwayReason.FORKED, f"irreversible block {hs.lib_num} differs from ours"
            )


def _binding_mismatch(theirs: bytes, ours: bytes) -> str:
    if not ours:
        return "handshake is bound to a TLS session but this connection has no TLS"
    if not theirs:
        return "handshake is not bound to our TLS session"
    return (
        "handshake is bound to another TLS certificate than ours: a relay terminating TLS "
        f"in between? (theirs {theirs.hex()[:16]}, ours {ours.hex()[:16]})"
    )
