"""The anchors' Merkle tree: every leaf of every tree size up to 70 proves against the root,
and a changed payload, offset, path or index does not."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bps import merkle


def leaves(n: int) -> list[bytes]:
    return [merkle.leaf(7, 1, i + 1, b"message %d" % i) for i in range(n)]


def test_every_leaf_of_every_size_proves() -> None:
    for n in range(1, 71):
        tree = leaves(n)
        root = merkle.root(tree)
        for i in range(n):
            path = merkle.proof(tree, i)
            assert len(path) <= n.bit_length()
            assert merkle.root_from_proof(tree[i], i, n, path) == root


def test_rfc6962_shape_for_three_leaves() -> None:
    """Three leaves: H(1 | H(1 | a | b) | c), the left subtree the largest power of two."""
    a, b, c = leaves(3)

    def node(x: bytes, y: bytes) -> bytes:
        return hashlib.sha256(b"\x01" + x + y).digest()

    assert merkle.root([a, b, c]) == node(node(a, b), c)


@given(st.integers(2, 64), st.data())
def test_a_change_breaks_the_proof(n: int, data: st.DataObject) -> None:
    tree = leaves(n)
    root = merkle.root(tree)
    i = data.draw(st.integers(0, n - 1))
    path = merkle.proof(tree, i)
    changed = merkle.leaf(7, 1, i + 1, b"forged")
    assert merkle.root_from_proof(changed, i, n, path) != root
    moved = merkle.leaf(7, 1, i + 2, b"message %d" % i)  # the same payload at another offset
    assert merkle.root_from_proof(moved, i, n, path) != root
    other = data.draw(st.integers(0, n - 1).filter(lambda j: j != i))
    try:  # another index: another root, or a path of another length (refused)
        assert merkle.root_from_proof(tree[i], other, n, path) != root
    except ValueError as err:
        assert "hashes, not" in str(err)
    if path:
        bent = [bytes(32), *path[1:]]
        assert merkle.root_from_proof(tree[i], i, n, bent) != root


def test_a_path_of_the_wrong_length_is_refused() -> None:
    tree = leaves(5)
    with pytest.raises(ValueError, match="has 3 hashes, not 2"):
        merkle.root_from_proof(tree[0], 0, 5, merkle.proof(tree, 0)[:2])
    with pytest.raises(ValueError):
        merkle.proof(tree, 5)


def test_anchor_digest_binds_every_field() -> None:
    base = (1, 0, 1, 10, b"\x01" * 32, b"\x02" * 32)
    digest = merkle.anchor_digest(*base)
    for k in range(4):
        changed = list(base)
        changed[k] = int(changed[k]) + 1  # type: ignore[call-overload]
        assert merkle.anchor_digest(*changed) != digest  # type: ignore[arg-type]
