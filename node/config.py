"""Node configuration: a nodeos-style ``config.ini`` where every option is also a flag.

``config.ini`` holds ``key = value`` lines (``#`` starts a comment); options marked
repeatable may appear many times. Command-line flags override the file. Everything is
validated once, here, and errors name the option.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chain.crypto import PrivateKey, public_key_from_text
from chain.errors import ChainError
from chain.types import PublicKey, is_valid_name
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
    Option("http-server-address", "host:port of the HTTP RPC", "127.0.0.1:8888"),
    Option("producer-name", "a producer this node produces for", repeatable=True),
    Option(
        "signature-provider",
        "PUB_K1_...=KEY:PVT_K1_... key that signs blocks (nodeos syntax)",
        repeatable=True,
    ),
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
    max_mempool_txs: int
    max_mempool_per_account: int
    max_http_body_bytes: int
    signature_workers: int
    log_level: str
    log_format: str


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
    host, sep, port = str(merged["http-server-address"]).rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError("http-server-address", "expected host:port")
    for name in merged["producer-name"]:
        if not is_valid_name(name):
            raise ConfigError("producer-name", f"{name!r} is not an account name")
    keys = dict(_signature_provider(s) for s in merged["signature-provider"])
    if merged["producer-name"] and not keys:
        raise ConfigError("signature-provider", "producer-name is set but no signing key is")
    if merged["log-level"] not in ("debug", "info", "warning", "error"):
        raise ConfigError("log-level", "expected debug, info, warning or error")
    if merged["log-format"] not in ("auto", "json", "console"):
        raise ConfigError("log-format", "expected auto, json or console")
    genesis = merged["genesis-json"]
    return NodeConfig(
        data_dir=data_dir,
        genesis_json=Path(genesis) if genesis else data_dir / "genesis.json",
        http_host=host.strip("[]") or "127.0.0.1",
        http_port=int(port),
        producers=tuple(merged["producer-name"]),
        signing_keys=keys,
        max_mempool_txs=merged["max-mempool-txs"],
        max_mempool_per_account=merged["max-mempool-per-account"],
        max_http_body_bytes=merged["max-http-body-bytes"],
        signature_workers=merged["signature-workers"],
        log_level=merged["log-level"],
        log_format=merged["log-format"],
    )
