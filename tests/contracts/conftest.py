"""The BPS contract built once per session (in a copy, so the tests never write into the
source tree) and deployed on a fresh local chain per test, with what its tests share: the
anchor digest and signature exactly as a broker's sidecar makes them."""

from __future__ import annotations

import hashlib
import shutil
import struct
from typing import Any

import pytest

from chain.core.primitives.crypto import PrivateKey
from contract_tools.build import CONTRACTS_DIR, Built, build
from contract_tools.testing import BLOCK_TIME_S, LocalChain, Result
from tests.contract_tools.conftest import require_toolchain

NOW_US = BLOCK_TIME_S * 1_000_000  # what currentTime() gives the local chain's actions
ZERO = bytes(32)
BROKER_KEYS = {"brk.a": PrivateKey(b"\x11" * 32), "brk.b": PrivateKey(b"\x22" * 32)}


def anchor_digest(
    topic_id: int, partition: int, first: int, last: int, root: bytes, prev: bytes
) -> bytes:
    """sha256 of the 92 bytes the contract hashes: topic id u64 | partition u32 | first u64 |
    last u64 (little-endian) | root (32) | prev (32)."""
    return hashlib.sha256(
        struct.pack("<QIQQ", topic_id, partition, first, last) + root + prev
    ).digest()


def packed_key(key: PrivateKey) -> bytes:
    """The broker's key as regbroker takes it: type byte 0 (K1), then the compressed key."""
    return b"\x00" + bytes(key.public_key)


def packed_signature(key: PrivateKey, digest: bytes) -> bytes:
    """A signature as assert_recover_key takes it: type byte 0, header 31 + recovery id, r, s."""
    sig = key.sign(digest)
    return bytes([0, 31 + sig[64]]) + sig[:64]


class Bps:
    """The contract on account ``bps`` of a local chain, initialized with admin ``bor.gov``,
    two registered brokers and tenant ``acme`` owned by alice."""

    def __init__(self, chain: LocalChain, built: Built) -> None:
        self.chain = chain
        chain.create_accounts("bor.gov", "dave", *BROKER_KEYS)
        chain.deploy("bps", built)
        self.push("init", {"admin": "bor.gov"}, "bps")
        for broker, key in BROKER_KEYS.items():
            url = f"nats://{broker}:4222"
            self.push(
                "regbroker", {"broker": broker, "url": url, "key": packed_key(key).hex()}, "bor.gov"
            )
        self.push("addtenant", {"tenant": "acme", "owner": "alice"}, "bor.gov")

    def push(self, action: str, args: dict[str, Any], *auth: str) -> Result:
        return self.chain.push("bps", action, args, list(auth))

    def can(self, topic: str, principal: str, right: int, tenant: str = "acme") -> bool:
        args = {"tenant": tenant, "topic": topic, "principal": principal, "right": right}
        return bool(self.chain.call("bps", "canaccess", args))

    def row(self, scope: str | int, table: str, primary: int) -> Any:
        return self.chain.row("bps", scope, table, primary)

    def rows(self, scope: str | int, table: str) -> list[Any]:
        return self.chain.rows("bps", scope, table)


@pytest.fixture(scope="session")
def bps_built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    require_toolchain()
    directory = tmp_path_factory.mktemp("contracts") / "bps"
    shutil.copytree(CONTRACTS_DIR / "bps", directory, ignore=shutil.ignore_patterns("build"))
    return build(directory)


@pytest.fixture
def bps(contract_chain: LocalChain, bps_built: Built) -> Bps:
    return Bps(contract_chain, bps_built)
