"""A peer that gets through a real node's handshake, for the integration tests that play
one: the hello, then a handshake signed by a fresh key claiming a position, as any stranger
may (the node's allowed-connection = any)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import BlockId
from p2p.transport.tcp import TcpChannel
from p2p.wire.handshake import ChainPosition, make_handshake
from p2p.wire.messages import PROTOCOL_VERSION, Handshake, Hello
from scripts.peers import dial, refusal


def lib_position(info: Mapping[str, object]) -> ChainPosition:
    """The node's LIB (``info``: its ``get_info``) as both head and LIB: a position any
    stranger may claim."""
    lib = int(str(info["last_irreversible_block_num"]))
    lib_id = BlockId(bytes.fromhex(str(info["last_irreversible_block_id"])))
    return ChainPosition(lib, lib_id, lib, lib_id)


async def handshake(
    channel: TcpChannel, binding: bytes, chain_id: bytes, position: ChainPosition
) -> None:
    """On a channel from ``dial``, the hello and a handshake signed by a fresh key claiming
    ``position``; returns once the node's handshake came. Raises HandshakeFailed with the
    reason if the node sends us away, ChannelClosed if it closes."""
    node_id = os.urandom(32)
    await channel.send(Hello(PROTOCOL_VERSION, chain_id, node_id, os.urandom(32)))
    hello = await channel.recv()
    if not isinstance(hello, Hello):
        raise refusal(hello)
    await channel.send(
        make_handshake(
            chain_id=chain_id,
            node_id=node_id,
            node_key=PrivateKey.generate(),
            peer_nonce=hello.nonce,
            position=position,
            p2p_address="",
            tls_binding=binding,
        )
    )
    answer = await channel.recv()
    if not isinstance(answer, Handshake):
        raise refusal(answer)


async def authenticate(channel: TcpChannel, binding: bytes, info: Mapping[str, object]) -> None:
    """``handshake`` on the node's chain (``info``: its ``get_info``), claiming its LIB."""
    await handshake(channel, binding, bytes.fromhex(str(info["chain_id"])), lib_position(info))


async def authenticated(
    port: int, info: Mapping[str, object], source: str | None = None
) -> TcpChannel:
    """Dial the node on ``port`` (from ``source``) and get through the preamble, TLS and
    ``authenticate``; returns our end of the connection."""
    channel, binding = await dial("127.0.0.1", port, source=source)
    try:
        await authenticate(channel, binding, info)
    except BaseException:
        await channel.close()
        raise
    return channel
