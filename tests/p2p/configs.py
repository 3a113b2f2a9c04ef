"""The p2p parts' configs for tests, built the node's way (``node.config.builders``) from the
options' declared defaults (``node.config.model``), so that no test repeats a default."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from node.config import builders as config_builders
from node.config.model import P2pConfig
from p2p.blocksync.manager import SyncConfig
from p2p.transport.connections import TransportConfig
from p2p.transport.switch import SwitchConfig

# Where tests listen, rather than the declared 0.0.0.0:9876.
LOOPBACK = ("127.0.0.1", 0)


def sync_config(**changes: Any) -> SyncConfig:
    return replace(config_builders.sync_config(P2pConfig()), **changes)


def switch_config(**changes: Any) -> SwitchConfig:
    return replace(config_builders.switch_config(P2pConfig()), **changes)


def transport_config(**changes: Any) -> TransportConfig:
    """The declared defaults, listening on loopback and without TLS unless ``changes`` say."""
    declared = config_builders.transport_config(P2pConfig(tls=False))
    return replace(declared, **({"listen": LOOPBACK} | changes))
