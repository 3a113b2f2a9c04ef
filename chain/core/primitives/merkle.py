"""Merkle roots over transaction ids.

Leaves and inner nodes are hashed with different prefixes and an odd node is promoted rather
than paired with itself (RFC 6962), so two different id lists never share a root (Bitcoin's
duplicate-last-node rule allows that: CVE-2012-2459).
"""

from __future__ import annotations

from collections.abc import Sequence

from chain.core.primitives.crypto import sha256

EMPTY_ROOT = sha256(b"")


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    if not leaves:
        return EMPTY_ROOT
    level = [sha256(b"\x00" + leaf) for leaf in leaves]
    while len(level) > 1:
        nxt = [sha256(b"\x01" + level[i] + level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]
