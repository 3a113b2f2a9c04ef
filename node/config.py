"""Node configuration: a nodeos-style ``config.ini`` where every option is also a flag.

Each option is declared once, as a field of the section of the config that the part reading
it takes (``NodeConfig.p2p``, ``.http``, ``.stream`` …): its name, default, help, choices
or range, and how its text becomes the field's value. The flags, the ``config.ini`` reader,
``--help`` and the checks are made from those declarations.

``config.ini`` holds ``key = value`` lines (``#`` starts a comment); options marked
repeatable may appear many times. Command-line flags override the file. Everything is
validated once, here, and errors name the option.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar, cast

from chain.core.crypto import PrivateKey, public_key_from_text
from chain.core.errors import ChainError
from chain.core.types import BlockId, PublicKey, is_valid_name
from node.errors import ConfigError

T = TypeVar("T")
_OPTION = "option"  # the key of a field's metadata that holds its Option


@dataclass(frozen=True, slots=True)
class Option:
    """One option: its flag and config.ini name, and how its text is checked and read."""

    name: str
    help: str
    default: str | int | None  # as config.ini would say it (None: not set)
    kind: type = str  # int: the text is a non-negative integer
    choices: tuple[str, ...] = ()
    low: int | None = None
    high: int | None = None
    repeatable: bool = False
    # From the checked value (a str, an int, or a tuple of str if repeatable, or None if
    # not set) to the field's; a ValueError becomes a ConfigError naming the option.
    convert: Callable[[Any], Any] = lambda value: value

    def read(self, value: Any) -> Any:
        """The field's value for ``value`` (text, or a tuple of texts if repeatable)."""
        if self.kind is int and isinstance(value, str):
            value = self._integer(value)
        for text in value if self.repeatable else (value,):
            if self.choices and text is not None and text not in self.choices:
                raise ConfigError(self.name, f"{text!r} is not {_either(self.choices)}")
        try:
            return self.convert(value)
        except ValueError as err:
            raise ConfigError(self.name, str(err)) from err

    def _integer(self, text: str) -> int:
        try:
            value = int(text)
        except ValueError as err:
            raise ConfigError(self.name, f"expected an integer, got {text!r}") from err
        if value < 0:
            raise ConfigError(self.name, "must not be negative")
        if self.high is not None and not (self.low or 0) <= value <= self.high:
            raise ConfigError(self.name, f"must be between {self.low or 0} and {self.high}")
        if self.low is not None and value < self.low:
            raise ConfigError(self.name, f"must be at least {self.low}")
        return value

    def help_text(self) -> str:
        if self.repeatable:
            return f"{self.help} (repeatable)"
        bounds = ""
        if self.high is not None:
            bounds = f", {self.low or 0} to {self.high}"
        elif self.low:
            bounds = f", at least {self.low}"
        return f"{self.help} (default: {self.default}{bounds})"


def _either(choices: tuple[str, ...]) -> str:
    return ", ".join(choices[:-1]) + " or " + choices[-1]


def _field(option: Option) -> Any:
    """A dataclass field declared by ``option``; its default is the option's default, read."""
    default = () if option.repeatable else option.default
    return field(default_factory=lambda: option.convert(default), metadata={_OPTION: option})


def number(
    name: str,
    default: int,
    help: str,
    *,
    low: int | None = None,
    high: int | None = None,
    convert: Callable[[int], int] = lambda value: value,
) -> int:
    """A non-negative integer option, within [low, high] where given."""
    return cast(int, _field(Option(name, help, default, int, low=low, high=high, convert=convert)))


def text(name: str, default: str, help: str) -> str:
    return cast(str, _field(Option(name, help, default)))


def choice(name: str, default: str, choices: tuple[str, ...], help: str) -> str:
    return cast(str, _field(Option(name, help, default, choices=choices)))


def on_off(name: str, default: bool, help: str) -> bool:
    option = Option(
        name, help, "on" if default else "off", choices=("on", "off"), convert=lambda v: v == "on"
    )
    return cast(bool, _field(option))


def parsed(name: str, default: str | None, help: str, convert: Callable[[str | None], T]) -> T:
    """An option whose text ``convert`` reads (None when it is not set)."""
    return cast(T, _field(Option(name, help, default, convert=convert)))


def repeated(
    name: str, help: str, convert: Callable[[tuple[str, ...]], T], choices: tuple[str, ...] = ()
) -> T:
    """An option that may be given many times; ``convert`` reads all its values at once."""
    return cast(
        T, _field(Option(name, help, None, repeatable=True, choices=choices, convert=convert))
    )


# --- how option texts become values ---------------------------------------------------------

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


def _endpoint(
    option: str, default_host: str = "0.0.0.0"
) -> Callable[[str | None], tuple[str, int] | None]:
    """``host:port``, or None for '' (the listener is off)."""
    return lambda text: parse_endpoint(option, text, default_host) if text else None


def _path(text: str | None) -> Path | None:
    return Path(text) if text else None


def _some(value: T | None) -> T:
    assert value is not None  # declared with a default, so never unset
    return value


def _signature_provider(spec: str) -> tuple[PublicKey, PrivateKey]:
    try:
        pub_text, rest = spec.split("=", 1)
        kind, priv_text = rest.split(":", 1)
    except ValueError as err:
        raise ValueError("expected PUB_K1_...=KEY:PVT_K1_...") from err
    if kind != "KEY":
        raise ValueError(f"unsupported provider {kind!r} (only KEY)")
    try:
        pub = public_key_from_text(pub_text)
        key = PrivateKey.from_text(priv_text)
    except ChainError as err:
        raise ValueError(str(err)) from err
    if key.public_key != pub:
        raise ValueError("the private key does not match the public key")
    return pub, key


def _signature_providers(specs: tuple[str, ...]) -> dict[PublicKey, PrivateKey]:
    return dict(_signature_provider(s) for s in specs)


def _private_keys(texts: tuple[str, ...]) -> dict[PublicKey, PrivateKey]:
    try:
        keys = [PrivateKey.from_text(k) for k in texts]
    except ChainError as err:
        raise ValueError(str(err)) from err
    return {k.public_key: k for k in keys}


def _private_key(text: str | None) -> PrivateKey | None:
    try:
        return PrivateKey.from_text(text) if text else None
    except ChainError as err:
        raise ValueError(str(err)) from err


def _public_keys(texts: tuple[str, ...]) -> frozenset[bytes]:
    try:
        return frozenset(public_key_from_text(k) for k in texts)
    except ChainError as err:
        raise ValueError(str(err)) from err


def _account_names(names: tuple[str, ...]) -> tuple[str, ...]:
    for name in names:
        if not is_valid_name(name):
            raise ValueError(f"{name!r} is not an account name")
    return names


def _block_id(text: str | None) -> BlockId | None:
    if not text:
        return None
    if re.fullmatch("[0-9a-fA-F]{64}", text) is None:
        raise ValueError("must be the 64-hex-digit id of a block you trust")
    return BlockId(bytes.fromhex(text))


def _peer_endpoints(texts: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    return tuple(parse_endpoint("p2p-peer-address", a) for a in texts)


# --- the sections: one per part that reads them ---------------------------------------------
# Each field is an option's declaration: the helpers above return a ``dataclasses.field``
# (which ruff's RUF009 cannot see through where the field's type is not immutable).


@dataclass(frozen=True, slots=True)
class ChainConfig:
    """What opening the chain reads (``node.app.open_chain``)."""

    genesis_json: Path | None = parsed(  # noqa: RUF009
        "genesis-json", None, "genesis file (default: <data-dir>/genesis.json)", _path
    )
    snapshot: Path | None = parsed(  # noqa: RUF009
        "snapshot",
        None,
        "start an empty data dir from this snapshot file (verified first; ignored once the"
        " data dir holds the chain it started)",
        _path,
    )
    max_mempool_txs: int = number(
        "max-mempool-txs", 50_000, "transactions held in the mempool at most"
    )
    max_mempool_per_account: int = number(
        "max-mempool-per-account", 5_000, "pending transactions per account at most"
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
    level: str = choice(
        "log-level", "info", ("debug", "info", "warning", "error"), "how much the node logs"
    )
    format: str = choice(
        "log-format", "auto", ("auto", "json", "console"), "auto: JSON unless a terminal"
    )


@dataclass(frozen=True, slots=True)
class HttpConfig:
    """The public and the admin RPC listeners (``node.config_builders.http_limits``)."""

    # An RPC address without a host stays on loopback: serving the world is a choice.
    address: tuple[str, int] = parsed(
        "http-server-address",
        "127.0.0.1:8888",
        "host:port of the HTTP RPC",
        lambda text: _some(_endpoint("http-server-address", "127.0.0.1")(text)),
    )
    admin_address: tuple[str, int] | None = parsed(
        "admin-http-server-address",
        "127.0.0.1:8889",
        "host:port of the admin RPC (/v1/net/connect, /v1/net/disconnect); '' for none",
        _endpoint("admin-http-server-address", "127.0.0.1"),
    )
    admin_token: str = text("admin-token", "", "bearer token the admin RPC requires ('' for none)")
    max_in_flight: int = number(
        "http-max-in-flight-requests", 256, "RPC requests handled at once (0: no limit)"
    )
    max_response_ms: int = number(
        "http-max-response-time-ms", 30_000, "longest an RPC answer may take (0: no limit)"
    )
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
    write_timeout_ms: int = number(
        "http-write-timeout-ms",
        10_000,
        "a connection whose client takes none of its answer's bytes for this long is closed",
        low=1,
    )
    max_response_bytes_in_flight: int = number(
        "http-max-response-bytes-in-flight",
        64 << 20,
        "bytes of answers over 64 KiB being written at once, over all connections, beyond"
        " which another such answer is a 503 (0: no limit); each costs ~twice its size",
    )
    max_body_bytes: int = number(
        "max-http-body-bytes", 1 << 20, "largest accepted HTTP request body"
    )
    cors_origin: str = text(
        "access-control-allow-origin", "", "CORS origin of the public RPC ('' for none)"
    )

    @property
    def host(self) -> str:
        return self.address[0]

    @property
    def port(self) -> int:
        return self.address[1]


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """The websocket ``/v1/chain/stream`` on the public listener (``node.api.stream``)."""

    max_streams: int = number(
        "http-max-streams", 1024, "stream subscriptions open at once, in all (0: no limit)"
    )
    max_streams_per_address: int = number(
        "http-max-streams-per-address",
        64,
        "stream subscriptions open at once from one client address (0: no limit)",
    )
    buffer: int = number(
        "http-stream-buffer",
        4096,
        "messages queued for one stream subscriber; one that falls this far behind is sent"
        " 'lagged' and closed",
        low=1,
        high=1 << 20,
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
    """The peer layer: transport, switch and block sync (``node.config_builders.net_config``)."""

    listen: tuple[str, int] | None = parsed(
        "p2p-listen-endpoint",
        "0.0.0.0:9876",
        "host:port to accept peers on ('' for none)",
        _endpoint("p2p-listen-endpoint"),
    )
    # '' until load_config sets it to the listen endpoint as written.
    server_address: str = parsed(
        "p2p-server-address",
        None,
        "host:port peers should use for us (default: listen endpoint)",
        lambda text: text or "",
    )
    peers: tuple[tuple[str, int], ...] = repeated(
        "p2p-peer-address", "host:port of a peer to connect to", _peer_endpoints
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
        _public_keys,
    )
    private_key: PrivateKey | None = parsed(  # noqa: RUF009
        "peer-private-key",
        None,
        "PVT_K1_... key this node signs handshakes with",
        _private_key,
    )
    tls: bool = on_off(
        "p2p-tls",
        True,
        "on: TLS 1.3 on every peer connection, bound to the handshake's node key; off:"
        " plaintext. Both ends must agree",
    )
    max_clients: int = number("max-clients", 25, "inbound peers at most (0: no limit)")
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
        "producer-name", "a producer this node produces for", _account_names
    )
    signing_keys: dict[PublicKey, PrivateKey] = repeated(  # noqa: RUF009
        "signature-provider",
        "PUB_K1_...=KEY:PVT_K1_... key that signs blocks (nodeos syntax)",
        _signature_providers,
    )
    # Without finalizer-key, load_config sets the signing keys here.
    finalizer_keys: dict[PublicKey, PrivateKey] = repeated(  # noqa: RUF009
        "finalizer-key",
        "PVT_K1_... key this node votes with as a finalizer (default: its signature-provider"
        " keys; a key outside the finalizer policy never votes)",
        _private_keys,
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
        _block_id,
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


def _sections() -> Iterator[tuple[str | None, type]]:
    """(attribute, section class) of every section, (None, NodeConfig) for the top level."""
    yield None, NodeConfig
    for f in fields(NodeConfig):
        if _OPTION not in f.metadata:
            assert f.default_factory is not MISSING
            yield f.name, cast(type, f.default_factory)


def _declared() -> Iterator[tuple[str | None, str, Option]]:
    """(section, field, option) of every option, in the order of the declarations."""
    for section, cls in _sections():
        for f in fields(cls):
            if _OPTION in f.metadata:
                yield section, f.name, f.metadata[_OPTION]


OPTIONS: tuple[Option, ...] = tuple(option for _, _, option in _declared())


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="config.ini to read (default: <data-dir>/config.ini)")
    for opt in OPTIONS:
        flag = "--" + opt.name
        metavar = "{" + ",".join(opt.choices) + "}" if opt.choices else None
        action = "append" if opt.repeatable else "store"
        parser.add_argument(flag, action=action, metavar=metavar, help=opt.help_text())


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


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def load_config(args: argparse.Namespace) -> NodeConfig:
    """Merge config.ini and flags into a validated NodeConfig."""
    flags = {o.name: getattr(args, o.name.replace("-", "_"), None) for o in OPTIONS}
    data_dir = Path(flags["data-dir"] or "data")
    config_path = Path(args.config) if getattr(args, "config", None) else data_dir / "config.ini"
    in_file: dict[str, list[str]] = {}
    if config_path.exists():
        in_file = read_ini(config_path)
    elif getattr(args, "config", None):
        raise ConfigError("config", f"{config_path} does not exist")
    given: dict[str, Any] = {}  # option name -> its text (tuple of texts if repeatable)
    for opt in OPTIONS:
        flag = flags[opt.name]
        if opt.repeatable:
            given[opt.name] = tuple(flag or in_file.get(opt.name, []))
        elif flag is not None:
            given[opt.name] = flag
        elif opt.name in in_file:
            given[opt.name] = in_file[opt.name][-1]
        else:
            given[opt.name] = opt.default
    values: dict[str | None, dict[str, Any]] = {section: {} for section, _ in _sections()}
    for section, name, opt in _declared():
        values[section][name] = opt.read(given[opt.name])
    p2p, producer = values["p2p"], values["producer"]
    p2p["server_address"] = p2p["server_address"] or given["p2p-listen-endpoint"] or ""
    producer["finalizer_keys"] = producer["finalizer_keys"] or dict(producer["signing_keys"])
    sections = {name: cls(**values[name]) for name, cls in _sections() if name is not None}
    config = NodeConfig(**values[None], **sections)
    _check_together(config)
    return config


def _check_together(config: NodeConfig) -> None:
    """The rules that tie one option to another."""
    http = config.http
    admin = http.admin_address
    if admin is not None and not http.admin_token and not _loopback(admin[0]):
        raise ConfigError(
            "admin-http-server-address", "off loopback, the admin RPC needs an admin-token"
        )
    if config.producer.names and not config.producer.signing_keys:
        raise ConfigError("signature-provider", "producer-name is set but no signing key is")
