"""Node configuration: a nodeos-style ``config.ini`` where every option is also a flag.

``config.ini`` holds ``key = value`` lines (``#`` starts a comment); options marked
repeatable may appear many times. Command-line flags override the file. Everything is
validated once, here, and errors name the option.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chain.crypto import PrivateKey, public_key_from_text
from chain.errors import ChainError
from chain.types import BlockId, PublicKey, is_valid_name
from node.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Option:
    name: str
    help: str
    default: Any = None
    kind: type = str
    repeatable: bool = False


OPTIONS: tuple[Option, ...] = (
    Option("data-dir", "directory of the block store and config.ini", "data"),
    Option("genesis-json", "genesis file (default: <data-dir>/genesis.json)"),
    Option(
        "state-sync",
        "on: a node with no block yet fetches a snapshot from its peers (in verified chunks,"
        " several peers at once) instead of replaying history: of state-sync-trusted-block if"
        " given, else of the newest block the header chain, followed from genesis, shows"
        " irreversible",
        "off",
    ),
    Option(
        "state-sync-trusted-block",
        "the id (64 hex digits) of an irreversible block you trust, whose snapshot state sync"
        " fetches: take it from a node you trust (its /v1/node/snapshots); without it, state"
        " sync follows the header chain from genesis to find one",
    ),
    Option(
        "state-sync-request-timeout-ms",
        "how long state sync waits for a peer's snapshot manifest or chunk before asking"
        " another; a peer that lets two requests in a row lapse is dropped and banned a while",
        10_000,
        int,
    ),
    Option("snapshot-chunk-bytes", "chunk size of the snapshots this node serves", 1 << 20, int),
    Option(
        "snapshot-interval-blocks",
        "write a snapshot each time the LIB passes a multiple of this (0: only when asked),"
        " keeping the newest snapshot-keep ones: what peers state-sync from",
        0,
        int,
    ),
    Option("snapshot-keep", "periodic snapshots kept (older ones are deleted)", 2, int),
    Option(
        "snapshot",
        "start an empty data dir from this snapshot file (verified first; ignored once the"
        " data dir holds the chain it started)",
    ),
    Option("http-server-address", "host:port of the HTTP RPC", "127.0.0.1:8888"),
    Option(
        "admin-http-server-address",
        "host:port of the admin RPC (/v1/net/connect, /v1/net/disconnect); '' for none",
        "127.0.0.1:8889",
    ),
    Option("admin-token", "bearer token the admin RPC requires ('' for none)", ""),
    Option("http-max-in-flight-requests", "RPC requests handled at once (0: no limit)", 256, int),
    Option(
        "http-max-response-time-ms", "longest an RPC answer may take (0: no limit)", 30_000, int
    ),
    Option(
        "http-read-timeout-ms",
        "time a client has to send a request's header, and then its body",
        10_000,
        int,
    ),
    Option(
        "http-max-connections",
        "open connections to the HTTP RPC at most, beyond which one is answered 503 and closed"
        " (0: what the fd limit leaves after the node's files and peers, at most 4096)",
        0,
        int,
    ),
    Option(
        "http-max-connections-per-address",
        "open connections to the HTTP RPC from one client address at most (0: a quarter of"
        " http-max-connections)",
        0,
        int,
    ),
    Option(
        "http-write-timeout-ms",
        "a connection whose client takes none of its answer's bytes for this long is closed",
        10_000,
        int,
    ),
    Option(
        "http-max-response-bytes-in-flight",
        "bytes of answers over 64 KiB being written at once, over all connections, beyond"
        " which another such answer is a 503 (0: no limit); each costs ~twice its size",
        64 << 20,
        int,
    ),
    Option("access-control-allow-origin", "CORS origin of the public RPC ('' for none)", ""),
    Option("producer-name", "a producer this node produces for", repeatable=True),
    Option(
        "signature-provider",
        "PUB_K1_...=KEY:PVT_K1_... key that signs blocks (nodeos syntax)",
        repeatable=True,
    ),
    Option(
        "finalizer-key",
        "PVT_K1_... key this node votes with as a finalizer (default: its signature-provider"
        " keys; a key outside the finalizer policy never votes)",
        repeatable=True,
    ),
    Option(
        "production-pause-vote-timeout-ms",
        "pause producing once finality by votes has not moved for this long (0: never)",
        6000,
        int,
    ),
    Option("p2p-listen-endpoint", "host:port to accept peers on ('' for none)", "0.0.0.0:9876"),
    Option("p2p-server-address", "host:port peers should use for us (default: listen endpoint)"),
    Option("p2p-peer-address", "host:port of a peer to connect to", repeatable=True),
    Option("allowed-connection", "any, producers or specified (repeatable)", repeatable=True),
    Option(
        "peer-key",
        "PUB_K1_... key allowed to connect (allowed-connection = specified)",
        repeatable=True,
    ),
    Option("peer-private-key", "PVT_K1_... key this node signs handshakes with"),
    Option(
        "p2p-tls",
        "on: TLS 1.3 on every peer connection, bound to the handshake's node key; off:"
        " plaintext. Both ends must agree",
        "on",
    ),
    Option("max-clients", "inbound peers at most (0: no limit)", 25, int),
    Option(
        "p2p-max-unauthenticated",
        "inbound connections still in their handshake at most (0: no limit)",
        32,
        int,
    ),
    Option("p2p-max-per-address", "inbound connections from one IP at most (0: no limit)", 8, int),
    Option("p2p-handshake-timeout-ms", "time a peer has to complete the handshake", 5000, int),
    Option("sync-fetch-span", "blocks per sync range request", 500, int),
    Option("sync-ranges", "sync ranges in flight at once, each from a different peer", 3, int),
    Option(
        "validation-mode",
        "full, or light: irreversible blocks during catch-up are checked by producer signature"
        " and Merkle roots, their transactions' signatures are not",
        "full",
    ),
    Option("rdma", "auto (RDMA with peers that can, else TCP), off, or required", "auto"),
    Option("rdma-device", "RDMA device to use (default: the first with an active port)"),
    Option("rdma-max-peers", "peers with an RDMA channel at once (buffer regions)", 16, int),
    Option("rdma-ring-slots", "slots of each RDMA receive ring (the credit window)", 32, int),
    Option("rdma-slot-size", "bytes per RDMA ring slot", 64 * 1024, int),
    Option("max-mempool-txs", "transactions held in the mempool at most", 50_000, int),
    Option("max-mempool-per-account", "pending transactions per account at most", 5_000, int),
    Option("max-http-body-bytes", "largest accepted HTTP request body", 1 << 20, int),
    Option(
        "signature-workers",
        "processes that recover signatures ahead of block execution (0: none)",
        # One fewer than the cores: the main process needs a whole core for execution, and
        # oversubscribing 2 cores with 2 workers measured slower than 1 (bench_apply.py).
        max(0, (os.cpu_count() or 1) - 1),
        int,
    ),
    Option("log-level", "debug, info, warning or error", "info"),
    Option("log-format", "auto (JSON unless a terminal), json or console", "auto"),
)


@dataclass(frozen=True, slots=True)
class NodeConfig:
    data_dir: Path
    genesis_json: Path
    http_host: str
    http_port: int
    producers: tuple[str, ...]
    signing_keys: dict[PublicKey, PrivateKey]
    p2p_listen: tuple[str, int] | None
    p2p_server_address: str
    p2p_peers: tuple[tuple[str, int], ...]
    allowed_connection: tuple[str, ...]
    peer_keys: frozenset[bytes]
    peer_private_key: PrivateKey | None
    p2p_tls: bool
    max_clients: int
    p2p_max_unauthenticated: int
    p2p_max_per_address: int
    p2p_handshake_timeout_ms: int
    sync_fetch_span: int
    sync_ranges: int
    max_mempool_txs: int
    max_mempool_per_account: int
    max_http_body_bytes: int
    admin_http: tuple[str, int] | None
    admin_token: str
    http_max_in_flight: int
    http_max_response_ms: int
    http_read_timeout_ms: int
    cors_origin: str
    signature_workers: int
    validation_mode: str
    rdma: str
    rdma_device: str | None
    rdma_max_peers: int
    rdma_ring_slots: int
    rdma_slot_size: int
    log_level: str
    log_format: str
    finalizer_keys: dict[PublicKey, PrivateKey] = field(default_factory=dict)
    production_pause_vote_timeout_ms: int = 6000
    snapshot: Path | None = None
    state_sync: bool = False
    state_sync_trusted: BlockId | None = None  # None: found by following the header chain
    state_sync_request_timeout_ms: int = 10_000
    snapshot_chunk_bytes: int = 1 << 20
    snapshot_interval_blocks: int = 0
    snapshot_keep: int = 2
    http_max_connections: int = 0  # 0: derived from the fd limit (node.fds)
    http_max_connections_per_address: int = 0
    http_write_timeout_ms: int = 10_000
    http_max_response_bytes_in_flight: int = 64 << 20


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="config.ini to read (default: <data-dir>/config.ini)")
    for opt in OPTIONS:
        flag = "--" + opt.name
        if opt.repeatable:
            parser.add_argument(flag, action="append", help=opt.help)
        else:
            parser.add_argument(flag, help=f"{opt.help} (default: {opt.default})")


def read_ini(path: Path) -> dict[str, list[str]]:
    """Parse ``key = value`` lines; a key may repeat."""
    values: dict[str, list[str]] = {}
    known = {o.name for o in OPTIONS}
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if "=" not in line:
            raise ConfigError(f"{path.name}:{lineno}", "expected 'key = value'")
        key, value = (part.strip() for part in line.split("=", 1))
        if key not in known:
            raise ConfigError(key, f"unknown option in {path.name}:{lineno}")
        values.setdefault(key, []).append(value)
    return values


def _convert(opt: Option, raw: str) -> Any:
    if opt.kind is int:
        try:
            value = int(raw)
        except ValueError as err:
            raise ConfigError(opt.name, f"expected an integer, got {raw!r}") from err
        if value < 0:
            raise ConfigError(opt.name, "must not be negative")
        return value
    return raw


def _signature_provider(spec: str) -> tuple[PublicKey, PrivateKey]:
    try:
        pub_text, rest = spec.split("=", 1)
        kind, priv_text = rest.split(":", 1)
    except ValueError as err:
        raise ConfigError("signature-provider", "expected PUB_K1_...=KEY:PVT_K1_...") from err
    if kind != "KEY":
        raise ConfigError("signature-provider", f"unsupported provider {kind!r} (only KEY)")
    try:
        pub = public_key_from_text(pub_text)
        key = PrivateKey.from_text(priv_text)
    except ChainError as err:
        raise ConfigError("signature-provider", str(err)) from err
    if key.public_key != pub:
        raise ConfigError("signature-provider", "the private key does not match the public key")
    return pub, key


# One DNS label: letters, digits, '-' inside, '_' (SRV-style names); 1 to 63 characters.
_LABEL = re.compile("[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def host_problem(host: str) -> str | None:
    """Why ``host`` is neither an IP literal nor a well-formed DNS name; None if it is one.
    The resolver's idna codec raises UnicodeError on a label over 63 characters or an empty
    one (``a..b``), so such a name is refused here rather than in a dial."""
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    name = host.removesuffix(".")
    if not name:
        return "the host is empty"
    if len(name) > 253:
        return "a host name has at most 253 characters"
    for label in name.split("."):
        if not label:
            return f"host {host!r} has an empty label"
        if len(label) > 63:
            return f"host {host!r} has a label over 63 characters"
        if _LABEL.fullmatch(label) is None:
            return f"host {host!r} is not an IP address or a DNS name (letters, digits, '-')"
    return None


def parse_endpoint(option: str, text: str, default_host: str = "0.0.0.0") -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    # ASCII digits only: str.isdigit takes "²" and "١٢٣", and int() refuses 4,300 digits.
    if not sep or re.fullmatch("[0-9]{1,5}", port) is None or int(port) > 65535:
        raise ConfigError(option, f"expected host:port, got {text!r}")
    host = host.strip("[]") or default_host
    problem = host_problem(host)
    if problem is not None:
        raise ConfigError(option, problem)
    return host, int(port)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def load_config(args: argparse.Namespace) -> NodeConfig:
    """Merge config.ini and flags into a validated NodeConfig."""
    flag_values = {o.name: getattr(args, o.name.replace("-", "_"), None) for o in OPTIONS}
    data_dir = Path(flag_values["data-dir"] or "data")
    config_path = Path(args.config) if getattr(args, "config", None) else data_dir / "config.ini"
    file_values: dict[str, list[str]] = {}
    if config_path.exists():
        file_values = read_ini(config_path)
    elif getattr(args, "config", None):
        raise ConfigError("config", f"{config_path} does not exist")
    merged: dict[str, Any] = {}
    for opt in OPTIONS:
        flag = flag_values[opt.name]
        if opt.repeatable:
            merged[opt.name] = list(flag or file_values.get(opt.name, []))
        elif flag is not None:
            merged[opt.name] = _convert(opt, flag)
        elif opt.name in file_values:
            merged[opt.name] = _convert(opt, file_values[opt.name][-1])
        else:
            merged[opt.name] = opt.default
    if flag_values["data-dir"] is None and "data-dir" in file_values:
        data_dir = Path(merged["data-dir"])
    # An RPC address without a host stays on loopback: serving the world is a choice.
    host, port = parse_endpoint("http-server-address", merged["http-server-address"], "127.0.0.1")
    admin = merged["admin-http-server-address"]
    admin_http = parse_endpoint("admin-http-server-address", admin, "127.0.0.1") if admin else None
    if admin_http is not None and not merged["admin-token"] and not _loopback(admin_http[0]):
        raise ConfigError(
            "admin-http-server-address", "off loopback, the admin RPC needs an admin-token"
        )
    for name in ("http-read-timeout-ms", "http-write-timeout-ms"):
        if merged[name] < 1:
            raise ConfigError(name, "must be at least 1")
    for name in merged["producer-name"]:
        if not is_valid_name(name):
            raise ConfigError("producer-name", f"{name!r} is not an account name")
    keys = dict(_signature_provider(s) for s in merged["signature-provider"])
    if merged["producer-name"] and not keys:
        raise ConfigError("signature-provider", "producer-name is set but no signing key is")
    try:
        finalizers = [PrivateKey.from_text(k) for k in merged["finalizer-key"]]
    except ChainError as err:
        raise ConfigError("finalizer-key", str(err)) from err
    finalizer_keys = {k.public_key: k for k in finalizers} or dict(keys)
    if merged["log-level"] not in ("debug", "info", "warning", "error"):
        raise ConfigError("log-level", "expected debug, info, warning or error")
    if merged["log-format"] not in ("auto", "json", "console"):
        raise ConfigError("log-format", "expected auto, json or console")
    listen = merged["p2p-listen-endpoint"]
    p2p_listen = parse_endpoint("p2p-listen-endpoint", listen) if listen else None
    peers = tuple(parse_endpoint("p2p-peer-address", a) for a in merged["p2p-peer-address"])
    modes = tuple(merged["allowed-connection"]) or ("any",)
    for mode in modes:
        if mode not in ("any", "producers", "specified"):
            raise ConfigError("allowed-connection", f"{mode!r} is not any, producers or specified")
    try:
        peer_keys = frozenset(public_key_from_text(k) for k in merged["peer-key"])
        node_key = (
            PrivateKey.from_text(merged["peer-private-key"]) if merged["peer-private-key"] else None
        )
    except ChainError as err:
        raise ConfigError("peer-key/peer-private-key", str(err)) from err
    if merged["p2p-tls"] not in ("on", "off"):
        raise ConfigError("p2p-tls", f"{merged['p2p-tls']!r} is not on or off")
    for name in ("sync-fetch-span", "sync-ranges", "p2p-handshake-timeout-ms"):
        if merged[name] < 1:
            raise ConfigError(name, "must be at least 1")
    if merged["validation-mode"] not in ("full", "light"):
        raise ConfigError("validation-mode", f"{merged['validation-mode']!r} is not full or light")
    if merged["rdma"] not in ("auto", "off", "required"):
        raise ConfigError("rdma", f"{merged['rdma']!r} is not auto, off or required")
    for name, low, high in (
        ("rdma-max-peers", 1, 1024),
        ("rdma-ring-slots", 2, 4096),
        ("rdma-slot-size", 4096, 8 << 20),
    ):
        if not low <= merged[name] <= high:
            raise ConfigError(name, f"must be between {low} and {high}")
    if merged["state-sync"] not in ("on", "off"):
        raise ConfigError("state-sync", f"{merged['state-sync']!r} is not on or off")
    trusted = None
    text = merged["state-sync-trusted-block"]
    if text:
        if re.fullmatch("[0-9a-fA-F]{64}", text) is None:
            raise ConfigError(
                "state-sync-trusted-block", "must be the 64-hex-digit id of a block you trust"
            )
        trusted = BlockId(bytes.fromhex(text))
    if not 4096 <= merged["snapshot-chunk-bytes"] <= 4 << 20:
        raise ConfigError("snapshot-chunk-bytes", "must be between 4096 and 4 MiB")
    if not 1000 <= merged["state-sync-request-timeout-ms"] <= 600_000:
        raise ConfigError("state-sync-request-timeout-ms", "must be between 1000 and 600000")
    server_address = merged["p2p-server-address"] or listen or ""
    genesis = merged["genesis-json"]
    return NodeConfig(
        p2p_listen=p2p_listen,
        p2p_server_address=server_address,
        p2p_peers=peers,
        allowed_connection=modes,
        peer_keys=peer_keys,
        peer_private_key=node_key,
        p2p_tls=merged["p2p-tls"] == "on",
        max_clients=merged["max-clients"],
        p2p_max_unauthenticated=merged["p2p-max-unauthenticated"],
        p2p_max_per_address=merged["p2p-max-per-address"],
        p2p_handshake_timeout_ms=merged["p2p-handshake-timeout-ms"],
        sync_fetch_span=merged["sync-fetch-span"],
        sync_ranges=merged["sync-ranges"],
        data_dir=data_dir,
        genesis_json=Path(genesis) if genesis else data_dir / "genesis.json",
        http_host=host,
        http_port=port,
        producers=tuple(merged["producer-name"]),
        signing_keys=keys,
        max_mempool_txs=merged["max-mempool-txs"],
        max_mempool_per_account=merged["max-mempool-per-account"],
        max_http_body_bytes=merged["max-http-body-bytes"],
        admin_http=admin_http,
        admin_token=merged["admin-token"],
        http_max_in_flight=merged["http-max-in-flight-requests"],
        http_max_response_ms=merged["http-max-response-time-ms"],
        http_read_timeout_ms=merged["http-read-timeout-ms"],
        cors_origin=merged["access-control-allow-origin"],
        signature_workers=merged["signature-workers"],
        validation_mode=merged["validation-mode"],
        rdma=merged["rdma"],
        rdma_device=merged["rdma-device"] or None,
        rdma_max_peers=merged["rdma-max-peers"],
        rdma_ring_slots=merged["rdma-ring-slots"],
        rdma_slot_size=merged["rdma-slot-size"],
        log_level=merged["log-level"],
        log_format=merged["log-format"],
        finalizer_keys=finalizer_keys,
        production_pause_vote_timeout_ms=merged["production-pause-vote-timeout-ms"],
        snapshot=Path(merged["snapshot"]) if merged["snapshot"] else None,
        state_sync=merged["state-sync"] == "on",
        state_sync_trusted=trusted,
        state_sync_request_timeout_ms=merged["state-sync-request-timeout-ms"],
        snapshot_chunk_bytes=merged["snapshot-chunk-bytes"],
        snapshot_interval_blocks=merged["snapshot-interval-blocks"],
        snapshot_keep=max(1, merged["snapshot-keep"]),
        http_max_connections=merged["http-max-connections"],
        http_max_connections_per_address=merged["http-max-connections-per-address"],
        http_write_timeout_ms=merged["http-write-timeout-ms"],
        http_max_response_bytes_in_flight=merged["http-max-response-bytes-in-flight"],
    )
