"""The HTTP listener's and the stream's limits for tests, and the RPC's fuel for a read-only
call, built the node's way (``node.config.builders``) from the options' declared defaults
(``node.config.model``), so that no test repeats a default."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from node.api.listener import HttpLimits
from node.api.stream.hub import StreamLimits
from node.config import builders as config_builders
from node.config.model import HttpConfig, NodeConfig, StreamConfig

# The fd limit the public listener's connection caps are made from (http-max-connections
# and its per-address cap are 0 by default: from the fd limit): a raised limit, as the node
# runs with, and the same on every machine.
NOFILE = 1 << 16
# The fuel a read-only contract call may use (http-call-fuel), for ``node.api.rpc.Api``.
CALL_FUEL = HttpConfig().call_fuel


def http_limits(**changes: Any) -> HttpLimits:
    """The public listener's limits under the declared defaults, but for ``changes``."""
    public, _admin = config_builders.http_limits(NodeConfig(), NOFILE)
    return replace(public, **changes)


def stream_limits(**changes: Any) -> StreamLimits:
    return replace(config_builders.stream_limits(StreamConfig()), **changes)
