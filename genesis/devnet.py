"""Genesis files and keys for development networks."""

from __future__ import annotations

import json
import os
import string
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from genesis.model import Genesis, parse_genesis

DEV_USERS = ("alice", "bob", "carol")
DEV_GOVERNOR = "bor.gov"


def producer_names(count: int) -> list[str]:
    """producera, producerb, ... (names may not contain digits 6-9 or 0)."""
    if not 1 <= count <= 21:
        raise ValueError("a dev network has 1 to 21 producers")
    return [f"producer{string.ascii_lowercase[i]}" for i in range(count)]


def make_dev_genesis(
    producers: int,
    *,
    precision: int = 4,
    start: datetime | None = None,
    params: dict[str, int | str] | None = None,
) -> tuple[Genesis, dict[str, str]]:
    """A dev genesis (finality by votes unless ``params`` says otherwise) and the private keys
    of every account and producer in it."""
    keys: dict[str, PrivateKey] = {}
    unit = 10**precision
    accounts: list[dict[str, Any]] = []
    for name in (DEV_GOVERNOR, *DEV_USERS, *producer_names(producers)):
        keys[name] = PrivateKey.generate()
        balance = 1_000_000 * unit if name in DEV_USERS else 10_000 * unit
        accounts.append(
            {"name": name, "key": public_key_to_text(keys[name].public_key), "balance": balance}
        )
    start = start or datetime.now(UTC)
    doc = {
        "initial_timestamp": start.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "token": {
            "symbol": "BOR",
            "precision": precision,
            "supply": sum(a["balance"] for a in accounts),
        },
        "governance": [DEV_GOVERNOR],
        "chain_params": {"schedule_size": 21, "finality": "votes", **(params or {})},
        "accounts": accounts,
        "initial_producers": [
            {"name": n, "key": public_key_to_text(keys[n].public_key)}
            for n in producer_names(producers)
        ],
    }
    return parse_genesis(doc), {name: key.to_text() for name, key in keys.items()}


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (0600), whatever mode a file
    already there had: it holds private keys."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)  # O_CREAT's mode applies only to a new file
        f.write(text)


def producer_key_file(out_dir: Path, producer: str) -> Path:
    """Where ``write_dev_genesis`` keeps a producer's private key alone, for a
    ``signature-provider = PUB_K1_...=KEYFILE:path`` line."""
    return out_dir / f"{producer}.key"


def write_dev_genesis(out_dir: Path, producers: int, **params: int | str) -> tuple[Path, Path]:
    """Write genesis.json, keys.json (every account's key) and each producer's key file
    (``producer_key_file``), the keys with mode 0600, into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    genesis, keys = make_dev_genesis(producers, params=params)
    genesis_path = out_dir / "genesis.json"
    genesis_path.write_text(json.dumps(genesis.to_json(), indent=2) + "\n")
    keys_path = out_dir / "keys.json"
    write_private(keys_path, json.dumps(keys, indent=2) + "\n")
    for producer in producer_names(producers):
        write_private(producer_key_file(out_dir, producer), keys[producer] + "\n")
    return genesis_path, keys_path
