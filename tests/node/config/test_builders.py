"""The configs of the peer layer's parts and of the HTTP listeners, made from the options."""

from __future__ import annotations

import argparse
from pathlib import Path

from node.api.stream.hub import StreamLimits
from node.config.builders import http_limits, net_config, stream_limits
from node.config.file import add_options, load_config
from node.config.model import NodeConfig


def _load(tmp_path: Path, ini: str) -> NodeConfig:
    (tmp_path / "config.ini").write_text(ini)
    parser = argparse.ArgumentParser()
    add_options(parser)
    return load_config(parser.parse_args(["--data-dir", str(tmp_path)]))


def test_the_peer_layers_configs_carry_the_p2p_options(tmp_path: Path) -> None:
    """Each p2p option reaches the transport, switch or sync manager config that uses it."""
    config = _load(
        tmp_path,
        "p2p-listen-endpoint = 127.0.0.1:7000\n"
        "p2p-server-address = node.example:7000\n"
        "p2p-peer-address = 10.0.0.2:7000\n"
        "allowed-connection = producers\n"
        "p2p-tls = off\n"
        "max-clients = 3\n"
        "p2p-max-unauthenticated = 4\n"
        "p2p-max-per-address = 2\n"
        "p2p-handshake-timeout-ms = 800\n"
        "sync-fetch-span = 7\n"
        "sync-ranges = 2\n"
        "validation-mode = light\n",
    )
    net = net_config(config.p2p)
    transport = net.transport
    assert (transport.listen, transport.p2p_server_address) == (
        ("127.0.0.1", 7000),
        "node.example:7000",
    )
    assert transport.policy.allow_producers and not transport.policy.allow_any
    assert transport.tls is None and transport.handshake_timeout_ms == 800
    assert (transport.max_unauthenticated, transport.max_per_address) == (4, 2)
    assert net.switch.max_clients == 3
    assert (net.sync.sync_fetch_span, net.sync.sync_ranges) == (7, 2)
    assert net.peers == (("10.0.0.2", 7000),) and net.light_validation
    assert net_config(NodeConfig().p2p).transport.tls is not None  # p2p-tls defaults to on


def test_http_limits_carry_the_http_options_and_derive_the_caps_left_at_zero(
    tmp_path: Path,
) -> None:
    """The listeners' limits are the http options; connection caps left at 0 come from the fd
    limit, a quarter of the total per address."""
    config = _load(
        tmp_path,
        "max-http-body-bytes = 1000\n"
        "http-max-in-flight-requests = 9\n"
        "http-max-response-time-ms = 1500\n"
        "http-read-timeout-ms = 2500\n"
        "http-write-timeout-ms = 3500\n"
        "http-max-response-bytes-in-flight = 4096\n",
    )
    public, admin = http_limits(config, 65_536)
    assert (public.max_body_bytes, public.max_in_flight) == (1000, 9)
    assert (public.max_response_s, public.read_timeout_s, public.write_timeout_s) == (1.5, 2.5, 3.5)
    assert public.max_response_bytes_in_flight == 4096
    assert public.max_connections > 0
    assert public.max_connections_per_address == public.max_connections // 4
    assert admin.max_connections == admin.max_connections_per_address > 0
    set_caps = _load(tmp_path, "http-max-connections = 50\nhttp-max-connections-per-address = 5\n")
    public, _ = http_limits(set_caps, 65_536)
    assert (public.max_connections, public.max_connections_per_address) == (50, 5)


def test_the_stream_limits_carry_the_stream_options(tmp_path: Path) -> None:
    """The websocket stream's limits are its seven options."""
    config = _load(
        tmp_path,
        "http-max-streams = 10\nhttp-max-streams-per-address = 2\n"
        "http-stream-buffer = 16\nhttp-stream-ping-ms = 1000\n"
        "http-stream-buffer-bytes = 4096\nhttp-stream-subscribe-timeout-ms = 500\n"
        "http-max-unsubscribed-streams-per-address = 3\n",
    )
    assert stream_limits(config.stream) == StreamLimits(
        max_streams=10,
        max_streams_per_address=2,
        buffer=16,
        buffer_bytes=4096,
        subscribe_timeout_ms=500,
        max_unsubscribed_per_address=3,
        ping_ms=1000,
    )
