"""Node configuration: what the node's config is, one frozen section per part that reads it.

Each option is declared once, as a field of the section of the config that the part reading
it takes (``NodeConfig.p2p``, ``.http``, ``.stream`` …), with the helpers of
``node.config.options``. ``OPTIONS`` and ``OPTION_SECTIONS`` list those declarations, section by
section: the one table that the flags, ``config.ini`` (``node.config.file``), ``--help`` and
docs/config.md are made from. ``check_together`` holds the rules that tie one option to another.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import cast

from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import BlockId, PublicKey
from chain.mempool import ACCOUNT_SHARE, DEFAULT_MAX_BYTES, MIB
from node.config.options import (
    OPTION_KEY,
    Option,
    account_names,
    block_id,
    choice,
    endpoint,
    number,
    on_off,
    optional_path,
    optional_private_key,
    parsed,
    peer_endpoints,
    private_keys,
    public_keys,
    repeated,
    signature_providers,
    some,
    text,
)
from node.errors import ConfigError

# --- the sections: one per part that reads them ---------------------------------------------
# Each field is an option's declaration: the helpers of node.config.options return a
# ``dataclasses.field`` (which ruff's RUF009 cannot see through where the field's type is not
# immutable).


@dataclass(frozen=True, slots=True)
class ChainConfig:
    """What opening the chain reads (``node.data_dir.open_chain``)."""

    genesis_json: Path | None = parsed(  # noqa: RUF009
        "genesis-json", None, "genesis file (default: <data-dir>/genesis.json)", optional_path
    )
    snapshot: Path | None = parsed(  # noqa: RUF009
        "snapshot",
        None,
        "start an empty data dir from this snapshot file (verified first; ignored once the"
        " data dir holds the chain it started)",
        optional_path,
    )
    max_mempool_txs: int = number(
        "max-mempool-txs", 50_000, "transactions held in the mempool at most"
    )
    max_mempool_per_account: int = number(
        "max-mempool-per-account", 5_000, "pending transactions per account at most"
    )
    # In bytes too: 600 setcodes of 261 KB pushed at once fit the count bounds and took a
    # producer to 930 MiB (issue 39). The defaults' reasoning is at chain.mempool's; the floor
    # of 1 MiB still admits a few of the largest transactions the default chain allows.
    max_mempool_bytes: int = number(
        "max-mempool-bytes",
        DEFAULT_MAX_BYTES,
        "bytes of pending transactions held at most (packed bytes and signatures)",
        low=MIB,
    )
    max_mempool_account_bytes: int = number(
        "max-mempool-account-bytes",
        0,
        "bytes of one account's pending transactions at most, within max-mempool-bytes"
        f" (0: 1/{ACCOUNT_SHARE} of max-mempool-bytes)",
    )
    signature_workers: int = number(
        "signature-workers",
        # One fewer than the cores: the main process needs a whole core for execution, and
        # oversubscribing 2 cores with 2 workers is slower than 1 (bench_apply.py).
        max(0, (os.cpu_count() or 1) - 1),
        "processes that recover signatures ahead of block execution (0: none)",
    )


@dataclass(frozen=True, slots=True)
class LogConfig:
    """What the node logs, and in which form (``node.process.logging``)."""

    level: str = choice(
        "log-level", "info", ("debug", "info", "warning", "error"), "how much the node logs"
    )
    format: str = choice(
        "log-format", "auto", ("auto", "json", "console"), "auto: JSON unless a terminal"
    )


@dataclass(frozen=True, slots=True)
class HttpConfig:
    """The public and the admin RPC listeners (``node.config.builders.http_limits``)."""

    # An RPC address without a host stays on loopback: serving the world is a choice.
    address: tuple[str, int] = parsed(
        "http-server-address",
        "127.0.0.1:8888",
        "host:port of the HTTP RPC",
        lambda text: some(endpoint("http-server-address", "127.0.0.1")(text)),
    )
    admin_address: tuple[str, int] | None = parsed(
        "admin-http-server-address",
        "127.0.0.1:8889",
        "host:port of the admin RPC (/v1/net/connect, /v1/net/disconnect); '' for none",
        endpoint("admin-http-server-address", "127.0.0.1"),
    )
    admin_token: str = text("admin-token", "", "bearer token the admin RPC requires ('' for none)")
    # Each request in flight holds its body (up to max-http-body-bytes) and a handler: 256
    # bounds that to 256 MiB at the default body size, and is as many reads as may queue for
    # the chain thread (node.api.reads.MAX_WAITING), so a burst that fits one fits the other.
    max_in_flight: int = number(
        "http-max-in-flight-requests", 256, "RPC requests handled at once (0: no limit)"
    )
    # A commit-mode push waits for its block within this time; any other answer takes
    # milliseconds unless the node is overloaded.
    max_response_ms: int = number(
        "http-max-response-time-ms", 30_000, "longest an RPC answer may take (0: no limit)"
    )
    # Real clients send a header in one packet and a body of a few KiB right after it.
    read_timeout_ms: int = number(
        "http-read-timeout-ms",
        10_000,
        "time a client has to send a request's header, and then its body",
        low=1,
    )
    max_connections: int = number(
        "http-max-connections",
        0,
        "open connections to the HTTP RPC at most, beyond which one is answered 503 and closed"
        " (0: what the fd limit leaves after the node's files and peers, at most 4096)",
    )
    max_connections_per_address: int = number(
        "http-max-connections-per-address",
        0,
        "open connections to the HTTP RPC from one client address at most (0: a quarter of"
        " http-max-connections)",
    )
    # A client that never reads holds no buffer, handler or fd beyond this.
    write_timeout_ms: int = number(
        "http-write-timeout-ms",
        10_000,
        "a connection whose client takes none of its answer's bytes for this long is closed",
        low=1,
    )
    # Each large answer being written costs about twice its size until its client has taken
    # it (the body, and the transport's copy of what the kernel's send queue has no room
    # for). 100 clients that asked for a 2.27 MB block and never read held 380 MiB without
    # this bound.
    max_response_bytes_in_flight: int = number(
        "http-max-response-bytes-in-flight",
        64 << 20,
        "bytes of answers over 64 KiB being written at once, over all connections, beyond"
        " which another such answer is a 503 (0: no limit); each costs ~twice its size",
    )
    max_body_bytes: int = number(
        "max-http-body-bytes", 1 << 20, "largest accepted HTTP request body"
    )
    call_fuel: int = number(
        "http-call-fuel",
        5_000_000,
        "fuel a read-only contract call (/v1/chain/call) may use; a transaction's cap is the"
        " chain's max_tx_fuel",
        low=1,
        high=1_000_000_000,
    )
    cors_origin: str = text(
        "access-control-allow-origin", "", "CORS origin of the public RPC ('' for none)"
    )
    explorer: bool = on_off(
        "http-explorer",
        True,
        "serve the explorer page at /explorer/ on the public RPC (it reads only the public RPC)",
    )

    @property
    def host(self) -> str:
        return self.address[0]

    @property
    def port(self) -> int:
        return self.address[1]


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """The websocket ``/v1/chain/stream`` on the public listener (``node.api.stream.hub``)."""

    max_streams: int = number(
        "http-max-streams", 1024, "stream subscriptions open at once, in all (0: no limit)"
    )
    max_streams_per_address: int = number(
        "http-max-streams-per-address",
        64,
        "stream subscriptions open at once from one client address (0: no limit)",
    )
    # 4096 messages are over half an hour of blocks at 2 a second, or a fork switch of any
    # depth the chain allows.
    buffer: int = number(
        "http-stream-buffer",
        4096,
        "messages queued for one stream subscriber; one that falls this far behind is sent"
        " 'lagged' and closed",
        low=1,
        high=1 << 20,
    )
    # 4096 full blocks would be GBs that a client which never reads keeps alive; 64 MiB is a
    # minute of 500 KB blocks.
    buffer_bytes: int = number(
        "http-stream-buffer-bytes",
        64 << 20,
        "bytes of blocks queued for one stream subscriber; one that falls this far behind is"
        " sent 'lagged' and closed (0: no limit)",
        high=1 << 40,
    )
    # A client needs one round trip, and a socket that says nothing should not hold a place
    # for long.
    subscribe_timeout_ms: int = number(
        "http-stream-subscribe-timeout-ms",
        3_000,
        "a websocket of /v1/chain/stream that has not subscribed this soon after the upgrade"
        " is closed",
        low=100,
        high=60_000,
    )
    # A client opening its streams together (scripts/bench_stream.py opens 25 an address) is
    # not refused; one that never subscribes holds at most this many sockets, each for
    # http-stream-subscribe-timeout-ms.
    max_unsubscribed_per_address: int = number(
        "http-max-unsubscribed-streams-per-address",
        32,
        "websockets of /v1/chain/stream not yet subscribed, from one client address; they"
        " do not count under http-max-streams until they subscribe (0: no limit)",
    )
    ping_ms: int = number(
        "http-stream-ping-ms",
        20_000,
        "a stream subscriber is pinged this often, and closed if it does not answer in time",
        low=100,
        high=3_600_000,
    )


@dataclass(frozen=True, slots=True)
class P2pConfig:
    """The peer layer: transport, switch and block sync (``node.config.builders.net_config``)."""

    listen: tuple[str, int] | None = parsed(
        "p2p-listen-endpoint",
        "0.0.0.0:9876",
        "host:port to accept peers on ('' for none)",
        endpoint("p2p-listen-endpoint"),
    )
    # '' until load_config sets it to the listen endpoint as written.
    server_address: str = parsed(
        "p2p-server-address",
        None,
        "host:port peers should use for us (default: listen endpoint)",
        lambda text: text or "",
    )
    peers: tuple[tuple[str, int], ...] = repeated(
        "p2p-peer-address", "host:port of a peer to connect to", peer_endpoints
    )
    allowed_connection: tuple[str, ...] = repeated(
        "allowed-connection",
        "who may connect: any, producers or specified (peer-key)",
        lambda modes: modes or ("any",),
        choices=("any", "producers", "specified"),
    )
    peer_keys: frozenset[bytes] = repeated(
        "peer-key",
        "PUB_K1_... key allowed to connect (allowed-connection = specified)",
        public_keys,
    )
    private_key: PrivateKey | None = parsed(  # noqa: RUF009
        "peer-private-key",
        None,
        "KEYFILE:path (or PVT_K1_...) of the key this node signs handshakes with (default:"
        " a producer key, else one generated into <data-dir>/node_key)",
        optional_private_key,
    )
    tls: bool = on_off(
        "p2p-tls",
        True,
        "on: TLS 1.3 on every peer connection, bound to the handshake's node key; off:"
        " plaintext. Both ends must agree",
    )
    max_clients: int = number("max-clients", 25, "inbound peers at most (0: no limit)")
    # A handshake takes milliseconds, so a few dozen slots serve a restart of every peer at
    # once; each slot holds at most a handshake-sized frame plus the stream's read buffer.
    max_unauthenticated: int = number(
        "p2p-max-unauthenticated",
        32,
        "inbound connections still in their handshake at most (0: no limit)",
    )
    max_per_address: int = number(
        "p2p-max-per-address", 8, "inbound connections from one IP at most (0: no limit)"
    )
    handshake_timeout_ms: int = number(
        "p2p-handshake-timeout-ms", 5000, "time a peer has to complete the handshake", low=1
    )
    sync_fetch_span: int = number("sync-fetch-span", 500, "blocks per sync range request", low=1)
    sync_ranges: int = number(
        "sync-ranges", 3, "sync ranges in flight at once, each from a different peer", low=1
    )
    sync_progress_interval_ms: int = number(
        "sync-progress-interval-ms",
        5000,
        "time between sync_progress log lines while catching up with peers (0: none)",
    )
    validation_mode: str = choice(
        "validation-mode",
        "full",
        ("full", "light"),
        "light: irreversible blocks during catch-up are checked by producer signature and"
        " Merkle roots, their transactions' signatures are not",
    )


@dataclass(frozen=True, slots=True)
class RdmaConfig:
    """RDMA channels between peers (``node.app.open_rdma``)."""

    mode: str = choice(
        "rdma",
        "auto",
        ("auto", "off", "required"),
        "auto: RDMA with peers that can, else TCP; required: refuse to start without it",
    )
    device: str | None = parsed(
        "rdma-device",
        None,
        "RDMA device to use (default: the first with an active port)",
        lambda text: text or None,
    )
    max_peers: int = number(
        "rdma-max-peers",
        16,
        "peers with an RDMA channel at once (buffer regions)",
        low=1,
        high=1024,
    )
    ring_slots: int = number(
        "rdma-ring-slots",
        32,
        "slots of each RDMA receive ring (the credit window)",
        low=2,
        high=4096,
    )
    slot_size: int = number(
        "rdma-slot-size", 64 * 1024, "bytes per RDMA ring slot", low=4096, high=8 << 20
    )


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """Block production and finality votes (the producer loop and the finalizer)."""

    names: tuple[str, ...] = repeated(
        "producer-name", "a producer this node produces for", account_names
    )
    signing_keys: dict[PublicKey, PrivateKey] = repeated(  # noqa: RUF009
        "signature-provider",
        "PUB_K1_...=KEYFILE:path: the key that signs blocks, read from a file only you may"
        " read (chmod 600); nodeos' PUB_K1_...=KEY:PVT_K1_... works too, but shows the key",
        signature_providers,
    )
    # Without finalizer-key, load_config sets the signing keys here.
    finalizer_keys: dict[PublicKey, PrivateKey] = repeated(  # noqa: RUF009
        "finalizer-key",
        "KEYFILE:path (or PVT_K1_...) of a key this node votes with as a finalizer (default:"
        " its signature-provider keys; a key outside the finalizer policy never votes)",
        private_keys,
    )
    pause_vote_timeout_ms: int = number(
        "production-pause-vote-timeout-ms",
        6000,
        "pause producing once finality by votes has not moved for this long (0: never)",
    )


@dataclass(frozen=True, slots=True)
class SnapshotConfig:
    """The snapshots this node writes and serves to peers that state-sync."""

    chunk_bytes: int = number(
        "snapshot-chunk-bytes",
        1 << 20,
        "chunk size of the snapshots this node serves",
        low=4096,
        high=4 << 20,
    )
    interval_blocks: int = number(
        "snapshot-interval-blocks",
        0,
        "write a snapshot each time the LIB passes a multiple of this (0: only when asked),"
        " keeping the newest snapshot-keep ones: what peers state-sync from",
    )
    keep: int = number(
        "snapshot-keep",
        2,
        "periodic snapshots kept (older ones are deleted; 0 keeps 1)",
        convert=lambda n: max(1, n),
    )


@dataclass(frozen=True, slots=True)
class StateSyncConfig:
    """Starting from a peer's snapshot instead of replaying history."""

    enabled: bool = on_off(
        "state-sync",
        False,
        "on: a node with no block yet fetches a snapshot from its peers (in verified chunks,"
        " several peers at once) instead of replaying history: of state-sync-trusted-block if"
        " given, else of the newest block the header chain, followed from genesis, shows"
        " irreversible",
    )
    trusted: BlockId | None = parsed(  # noqa: RUF009
        "state-sync-trusted-block",
        None,
        "the id (64 hex digits) of an irreversible block you trust, whose snapshot state sync"
        " fetches: take it from a node you trust (its /v1/node/snapshots); without it, state"
        " sync follows the header chain from genesis to find one",
        block_id,
    )
    request_timeout_ms: int = number(
        "state-sync-request-timeout-ms",
        10_000,
        "how long state sync waits for a peer's snapshot manifest or chunk before asking"
        " another; a peer that lets two requests in a row lapse is dropped and banned a while",
        low=1000,
        high=600_000,
    )


@dataclass(frozen=True, slots=True)
class NodeConfig:
    data_dir: Path = parsed(  # noqa: RUF009
        "data-dir",
        "data",
        "directory of the block store and config.ini",
        lambda text: Path(text or "data"),
    )
    chain: ChainConfig = field(default_factory=ChainConfig)
    log: LogConfig = field(default_factory=LogConfig)
    http: HttpConfig = field(default_factory=HttpConfig)
    stream: StreamConfig = field(default_factory=StreamConfig)
    p2p: P2pConfig = field(default_factory=P2pConfig)
    rdma: RdmaConfig = field(default_factory=RdmaConfig)
    producer: ProducerConfig = field(default_factory=ProducerConfig)
    snapshots: SnapshotConfig = field(default_factory=SnapshotConfig)
    state_sync: StateSyncConfig = field(default_factory=StateSyncConfig)

    @property
    def genesis_json(self) -> Path:
        return self.chain.genesis_json or self.data_dir / "genesis.json"


# What each section is about, for the commented config.ini and ``run --help``.
_TITLES: dict[str | None, str] = {
    None: "the data dir",
    "chain": "the chain: genesis, starting from a snapshot, mempool, signature workers",
    "log": "logging",
    "http": "the HTTP RPC: the public and the admin listener",
    "stream": "the websocket stream (/v1/chain/stream)",
    "p2p": "peers: listening, dialling, limits, block sync",
    "rdma": "RDMA between peers",
    "producer": "block production and finality votes",
    "snapshots": "snapshots this node writes and serves",
    "state_sync": "state sync: starting from a peer's snapshot",
}


def sections() -> Iterator[tuple[str | None, type]]:
    """(attribute, section class) of every section, (None, NodeConfig) for the top level."""
    yield None, NodeConfig
    for f in fields(NodeConfig):
        if OPTION_KEY not in f.metadata:
            assert f.default_factory is not MISSING
            yield f.name, cast(type, f.default_factory)


def declared() -> Iterator[tuple[str | None, str, Option]]:
    """(section, field, option) of every option, in the order of the declarations."""
    for section, cls in sections():
        for f in fields(cls):
            if OPTION_KEY in f.metadata:
                yield section, f.name, f.metadata[OPTION_KEY]


OPTIONS: tuple[Option, ...] = tuple(option for _, _, option in declared())

# (title, options) of every section, in the order of the declarations: the one table that
# the flags, the commented config.ini and the configuration reference are made from.
OPTION_SECTIONS: tuple[tuple[str, tuple[Option, ...]], ...] = tuple(
    (_TITLES[section], tuple(o for s, _, o in declared() if s == section))
    for section, _ in sections()
)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def check_together(config: NodeConfig) -> None:
    """The rules that tie one option to another."""
    chain = config.chain
    if chain.max_mempool_account_bytes > chain.max_mempool_bytes:  # 0: a share of it
        raise ConfigError(
            "max-mempool-account-bytes",
            f"{chain.max_mempool_account_bytes} is more than max-mempool-bytes"
            f" ({chain.max_mempool_bytes}): one account's share is part of the whole",
        )
    http = config.http
    admin = http.admin_address
    if admin is not None and not http.admin_token and not _loopback(admin[0]):
        raise ConfigError(
            "admin-http-server-address", "off loopback, the admin RPC needs an admin-token"
        )
    producer = config.producer
    if producer.names and not producer.signing_keys:
        raise ConfigError(
            "signature-provider",
            f"producer-name {producer.names[0]} needs its signing key: signature-provider ="
            " PUB_K1_...=KEYFILE:path (a file only you may read) or PUB_K1_...=KEY:PVT_K1_...",
        )
