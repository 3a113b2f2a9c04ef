"""The Merkle tree over a partition's messages that an anchor commits to (RFC 6962's shape:
leaves and inner nodes hashed with different prefixes, the left subtree the largest power of
two), so that one message is proven against an anchor's root with log2(n) hashes.

A leaf binds the message to its place: the topic's id, the partition, the offset, and the
SHA-256 of the payload as the broker stores it (encrypted or not).
"""

from __future__ import annotations

import hashlib
import struct

LEAF = b"\x00"
NODE = b"\x01"


def leaf(topic_id: int, partition: int, offset: int, payload: bytes) -> bytes:
    digest = hashlib.sha256(payload).digest()
    return hashlib.sha256(LEAF + struct.pack("<QIQ", topic_id, partition, offset) + digest).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(NODE + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two below ``n`` (n >= 2)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def root(leaves: list[bytes]) -> bytes:
    if not leaves:
        raise ValueError("no leaves")
    level = list(leaves)
    return _root(level, 0, len(level))


def _root(leaves: list[bytes], lo: int, hi: int) -> bytes:
    if hi - lo == 1:
        return leaves[lo]
    k = _split(hi - lo)
    return _node(_root(leaves, lo, lo + k), _root(leaves, lo + k, hi))


def proof(leaves: list[bytes], index: int) -> list[bytes]:
    """The sibling hashes from leaf ``index`` up to the root (RFC 6962's audit path)."""
    if not 0 <= index < len(leaves):
        raise ValueError("index outside the tree")
    path: list[bytes] = []
    lo, hi = 0, len(leaves)
    while hi - lo > 1:
        k = _split(hi - lo)
        if index < lo + k:
            path.append(_root(leaves, lo + k, hi))
            hi = lo + k
        else:
            path.append(_root(leaves, lo, lo + k))
            lo = lo + k
    path.reverse()
    return path


def root_from_proof(leaf_hash: bytes, index: int, size: int, path: list[bytes]) -> bytes:
    """The root that ``path`` gives for ``leaf_hash`` at ``index`` of ``size`` leaves; a
    wrong path or a changed leaf gives another root (or ValueError for a path of the wrong
    length)."""
    if not 0 <= index < size:
        raise ValueError("index outside the tree")
    sides: list[bool] = []  # True: the sibling is on the right
    lo, hi = 0, size
    while hi - lo > 1:
        k = _split(hi - lo)
        if index < lo + k:
            sides.append(True)
            hi = lo + k
        else:
            sides.append(False)
            lo = lo + k
    if len(sides) != len(path):
        raise ValueError(f"a proof for {size} leaves has {len(sides)} hashes, not {len(path)}")
    node = leaf_hash
    for sibling, right in zip(path, reversed(sides), strict=True):
        node = _node(node, sibling) if right else _node(sibling, node)
    return node


def anchor_digest(
    topic_id: int, partition: int, first: int, last: int, root_hash: bytes, prev: bytes
) -> bytes:
    """What a broker signs and the contract checks: SHA-256 of topic id (u64), partition
    (u32), first and last offsets (u64), all little-endian, then the root and the previous
    anchor's digest."""
    packed = struct.pack("<QIQQ", topic_id, partition, first, last) + root_hash + prev
    return hashlib.sha256(packed).digest()
