"""The state commitment: a lattice hash (LtHash) of every state entry.

Each entry (key, value) maps to a vector of 1,024 unsigned 16-bit lanes (the 2,048-byte
BLAKE3 extended output of the entry); the state's hash is the lane-wise sum of the vectors of
all its entries, modulo 2^16. Adding or removing an entry is one vector addition or
subtraction, so a block updates the commitment in O(its changes), whatever the size of the
state, and a snapshot is verified by summing its entries and comparing. This is the
construction of Bellare and Micciancio's multiset hashes as instantiated by Lewi et al.
(Facebook, 2019: "Securing Update Propagation with Homomorphic Hashing", LtHash16, whose
security rests on the short-integer-solution lattice problem: n = 1024, d = 16 gives more
than 200 bits). Solana's accounts lattice hash uses the same parameters.

Measured before choosing (this machine): BLAKE3's 2,048-byte output costs 0.6 µs per entry,
SHAKE-128's 3.3 µs; a sparse Merkle tree needs ~256 hashes and as many LevelDB reads per
changed key. The header carries ``root()``, a SHA-256 of the lanes.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from operator import itemgetter

import numpy as np
import numpy.typing as npt
from blake3 import blake3

from chain.crypto import sha256
from chain.errors import EncodingError
from chain.schema import prefix_end

__all__ = ["LANES", "STATE_HASH_BYTES", "StateHash"]

LANES = 1024
STATE_HASH_BYTES = 2 * LANES
_BATCH = 1024  # elements summed at once: a 2 MiB buffer per thread

Lanes = npt.NDArray[np.uint16]
_first = itemgetter(0)


# The 4-byte length prefix of keys of up to 255 bytes, looked up rather than built: every
# element of every block is hashed with one.
_PREFIXES = tuple(n.to_bytes(4, "big") for n in range(256))


def _element(key: bytes, value: bytes) -> bytes:
    # The key's length first, so that (key, value) pairs cannot collide by moving a boundary.
    return blake3(len(key).to_bytes(4, "big") + key + value).digest(STATE_HASH_BYTES)


# The elements of values recently written under busy keys (accounts), by key: the next
# change of such a key removes exactly that entry, whose element then needs no hashing.
# Bounded: 16,384 keys of about 2.2 KiB is 36 MiB (bench_sync.py's 5,000 busy accounts all
# fit: with 4,096, a fifth of the removals missed and were hashed again, and the light
# import of its 610k-transfer history took 8-12 % longer). Only ``StateHash.moved`` and
# ``StateHash.updated`` use it, from one thread (the chain's). A plain dict: a removal takes
# its key out (``pop``) and the new value's element goes in at the end, so the dict is kept
# in the order keys were last written, and past the bound the half written longest ago goes
# in one sweep (an OrderedDict's ``move_to_end`` for every write cost more).
_recent: dict[bytes, tuple[bytes, bytes]] = {}
_RECENT_MAX = 16384


def _trim_recent() -> None:
    if len(_recent) > _RECENT_MAX:
        for key in list(islice(_recent, len(_recent) - _RECENT_MAX // 2)):
            _recent.pop(key, None)


def _known_or_hashed(key: bytes, value: bytes) -> bytes:
    """The element of (key, value), taken out of ``_recent`` if held there."""
    held = _recent.pop(key, None)
    return held[1] if held is not None and held[0] == value else _element(key, value)


_buffers = threading.local()


def _hasher() -> blake3:
    """This thread's BLAKE3 hasher, for ``StateHash.moved`` to reset and reuse."""
    hasher: blake3 | None = getattr(_buffers, "hasher", None)
    if hasher is None:
        hasher = _buffers.hasher = blake3()
    return hasher


def _buffer() -> memoryview:
    """This thread's buffer for a batch of elements: written over and over, so hashing
    does not allocate (fresh memory for every element measured 1.8 µs against 1.0)."""
    buf: memoryview | None = getattr(_buffers, "buf", None)
    if buf is None:
        buf = _buffers.buf = memoryview(bytearray(_BATCH * STATE_HASH_BYTES))
    return buf


def _sum(entries: Iterable[tuple[bytes, bytes]]) -> Lanes:
    total = np.zeros(LANES, dtype=np.uint16)
    buf, size, n = _buffer(), STATE_HASH_BYTES, 0
    for key, value in entries:
        buf[n * size : (n + 1) * size] = _element(key, value)
        n += 1
        if n == _BATCH:
            total += _lanes(buf, n)
            n = 0
    if n:
        total += _lanes(buf, n)
    return total


def _lanes_of(elements: list[bytes]) -> Lanes:
    return _lanes(memoryview(b"".join(elements)), len(elements))


def _lanes(buf: memoryview, n: int) -> Lanes:
    vectors = np.frombuffer(buf[: n * STATE_HASH_BYTES], dtype="<u2").reshape(n, LANES)
    total: Lanes = vectors.sum(axis=0, dtype=np.uint16)  # wraps modulo 2^16, lane by lane
    return total


def _run(changes: Sequence[tuple[bytes, bytes | None]], prefix: bytes) -> tuple[int, int]:
    """Where the keys starting with ``prefix`` are in ``changes`` (in key order)."""
    lo = bisect_left(changes, prefix, key=_first)
    return lo, bisect_left(changes, prefix_end(prefix), lo, key=_first)


def _hash_run(
    run: Sequence[tuple[bytes, bytes | None]],
    before: Mapping[bytes, bytes | None],
    gone: list[bytes],
    new: list[bytes],
    *,
    keep: bool,
) -> None:
    """Append to ``gone`` the elements of the entries ``run`` replaces (as ``before`` has
    them) and to ``new`` those of its new entries; ``keep``: hold the new elements in
    ``_recent`` (a held element is used, and dropped, whatever ``keep`` says). Written out:
    a length prefix looked up, and this thread's hasher reset rather than a new one built
    (0.61 against 0.85 µs an element, measured)."""
    recent, pop, size, prefixes = _recent, _recent.pop, STATE_HASH_BYTES, _PREFIXES
    hasher = _hasher()
    reset, update, digest = hasher.reset, hasher.update, hasher.digest
    for key, value in run:
        old = before[key]
        if old == value:
            continue
        n = len(key)
        prefix = prefixes[n] if n < 256 else n.to_bytes(4, "big")
        if old is not None:
            held = pop(key, None)
            if held is not None and held[0] == old:
                gone.append(held[1])
            else:
                reset()
                update(prefix + key + old)
                gone.append(digest(size))
        if value is not None:
            reset()
            update(prefix + key + value)
            element = digest(size)
            if keep:
                recent[key] = (value, element)
            new.append(element)


class StateHash:
    """The lattice hash of a set of state entries; immutable."""

    __slots__ = ("_lanes",)

    def __init__(self, lanes: Lanes) -> None:
        self._lanes = lanes

    @classmethod
    def empty(cls) -> StateHash:
        return cls(np.zeros(LANES, dtype=np.uint16))

    @classmethod
    def of(cls, entries: Iterable[tuple[bytes, bytes]]) -> StateHash:
        """The hash of exactly ``entries`` (each key once)."""
        return cls(_sum(entries))

    @classmethod
    def from_bytes(cls, raw: bytes) -> StateHash:
        if len(raw) != STATE_HASH_BYTES:
            raise EncodingError("state hash", f"{len(raw)} bytes, not {STATE_HASH_BYTES}")
        return cls(np.frombuffer(raw, dtype="<u2").astype(np.uint16))

    def to_bytes(self) -> bytes:
        return self._lanes.astype("<u2").tobytes()

    def root(self) -> bytes:
        """What a block header commits to: the SHA-256 of the lanes."""
        return sha256(self.to_bytes())

    def updated(
        self,
        removed: Iterable[tuple[bytes, bytes]],
        added: Iterable[tuple[bytes, bytes]],
        busy: bytes | None = None,
    ) -> StateHash:
        """The hash after ``removed`` entries left the set and ``added`` ones joined it. The
        elements of added entries whose key starts with ``busy`` (keys changed again and
        again, such as accounts) are kept for a while: the next change of that key removes
        exactly that entry."""
        gone = [_known_or_hashed(key, value) for key, value in removed]
        new: list[bytes] = []
        for key, value in added:
            element = _element(key, value)
            if busy is not None and key.startswith(busy):
                _recent[key] = (value, element)
            new.append(element)
        _trim_recent()
        return self._moved_by(gone, new)

    def moved(
        self,
        changes: Sequence[tuple[bytes, bytes | None]],
        before: Mapping[bytes, bytes | None],
        *,
        busy: bytes,
    ) -> StateHash:
        """The hash after each ``(key, value)`` of ``changes`` (in key order, as
        ``StateView.changes`` gives them) replaced ``before[key]`` (None: no entry). Keys
        starting with ``busy`` are those whose elements are kept (as ``updated`` does).

        The hot path of every block. Keys in order make the busy keys one run of
        ``changes``, found by bisection, so no key is tested for a prefix."""
        lo, hi = _run(changes, busy)
        gone: list[bytes] = []
        new: list[bytes] = []
        _hash_run(changes[:lo], before, gone, new, keep=False)
        _hash_run(changes[lo:hi], before, gone, new, keep=True)
        _hash_run(changes[hi:], before, gone, new, keep=False)
        _trim_recent()
        return self._moved_by(gone, new)

    def _moved_by(self, gone: list[bytes], new: list[bytes]) -> StateHash:
        lanes = self._lanes
        for at in range(0, len(gone), _BATCH):
            lanes = lanes - _lanes_of(gone[at : at + _BATCH])
        for at in range(0, len(new), _BATCH):
            lanes = lanes + _lanes_of(new[at : at + _BATCH])
        return StateHash(lanes)

    def plus(self, entries: Iterable[tuple[bytes, bytes]]) -> StateHash:
        """The hash with ``entries`` (none of them already in the set) added."""
        return StateHash(self._lanes + _sum(entries))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StateHash) and bool(np.array_equal(self._lanes, other._lanes))

    def __hash__(self) -> int:
        return hash(self.to_bytes())

    def __repr__(self) -> str:
        return f"StateHash({self.root().hex()[:16]}…)"
