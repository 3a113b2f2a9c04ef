"""The configs of the node's parts, made from the sections of ``node.config.model.NodeConfig``.

The parts below ``node`` (``p2p``'s transport, switch and sync manager, the HTTP server)
keep their own config classes and never import ``node``; each is made here, by one function,
from the section that declares its options. An option is declared once, in its section, and
handed to its part here.
"""

from __future__ import annotations

from dataclasses import replace

from node.api.listener import HttpLimits
from node.api.stream.hub import StreamLimits
from node.config.model import NodeConfig, P2pConfig, StreamConfig
from node.errors import ConfigError
from node.network import NetConfig
from node.process import fds
from p2p.blocksync.manager import SyncConfig
from p2p.transport.connections import MAX_WAITING, TransportConfig
from p2p.transport.switch import SwitchConfig
from p2p.transport.tls import TlsIdentity
from p2p.wire.handshake import AuthPolicy


def transport_config(p2p: P2pConfig) -> TransportConfig:
    """Listen, dial and handshake; with ``p2p-tls = on`` a fresh TLS identity for this run."""
    try:
        policy = AuthPolicy.parse(p2p.allowed_connection, p2p.peer_keys)
    except ValueError as err:
        raise ConfigError("allowed-connection", str(err)) from err
    return TransportConfig(
        listen=p2p.listen,
        p2p_server_address=p2p.server_address,
        policy=policy,
        handshake_timeout_ms=p2p.handshake_timeout_ms,
        max_unauthenticated=p2p.max_unauthenticated,
        max_per_address=p2p.max_per_address,
        tls=TlsIdentity.generate() if p2p.tls else None,
    )


def switch_config(p2p: P2pConfig) -> SwitchConfig:
    return SwitchConfig(max_clients=p2p.max_clients)


def sync_config(p2p: P2pConfig) -> SyncConfig:
    return SyncConfig(
        sync_fetch_span=p2p.sync_fetch_span,
        sync_ranges=p2p.sync_ranges,
        sync_progress_interval_ms=p2p.sync_progress_interval_ms,
    )


def net_config(p2p: P2pConfig) -> NetConfig:
    return NetConfig(
        transport=transport_config(p2p),
        switch=switch_config(p2p),
        sync=sync_config(p2p),
        peers=p2p.peers,
        light_validation=p2p.validation_mode == "light",
    )


def http_limits(config: NodeConfig, nofile: int) -> tuple[HttpLimits, HttpLimits]:
    """The public and the admin listener's limits; their connection caps, unless configured,
    from the fd limit ``nofile`` (``node.process.fds``), after the peers' share."""
    p2p, http = config.p2p, config.http
    peers = fds.peer_fds(p2p.max_clients, p2p.max_unauthenticated, len(p2p.peers), MAX_WAITING)
    public_cap, admin_cap = fds.http_connection_caps(nofile, peers)
    total = http.max_connections or public_cap
    public = HttpLimits(
        max_body_bytes=http.max_body_bytes,
        max_in_flight=http.max_in_flight,
        max_response_s=http.max_response_ms / 1000,
        read_timeout_s=http.read_timeout_ms / 1000,
        max_connections=total,
        max_connections_per_address=http.max_connections_per_address or max(1, total // 4),
        write_timeout_s=http.write_timeout_ms / 1000,
        max_response_bytes_in_flight=http.max_response_bytes_in_flight,
    )
    # The admin listener's few clients share one address (loopback): one cap for both.
    admin = replace(public, max_connections=admin_cap, max_connections_per_address=admin_cap)
    return public, admin


def stream_limits(stream: StreamConfig) -> StreamLimits:
    return StreamLimits(
        max_streams=stream.max_streams,
        max_streams_per_address=stream.max_streams_per_address,
        buffer=stream.buffer,
        buffer_bytes=stream.buffer_bytes,
        subscribe_timeout_ms=stream.subscribe_timeout_ms,
        max_unsubscribed_per_address=stream.max_unsubscribed_per_address,
        ping_ms=stream.ping_ms,
    )
