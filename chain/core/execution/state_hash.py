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

BLAKE3 because its extended output is several times cheaper than SHAKE-128's; not a sparse
Merkle tree, which needs ~256 hashes and as many LevelDB reads per changed key. The header
carries ``root()``, a SHA-256 of the lanes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
from blake3 import blake3

from chain.core.execution import engine
from chain.core.primitives.crypto import sha256
from chain.core.primitives.errors import EncodingError

__all__ = ["LANES", "STATE_HASH_BYTES", "StateHash"]

LANES = 1024
STATE_HASH_BYTES = 2 * LANES
# Elements are summed 32 at a time, out of a 64 KiB buffer per thread that stays in the
# processor's cache: each element is hashed into memory just written and summed again, and
# no element outlives its batch. In a block's application this measured 3.4-3.6 against
# 3.7-3.9 µs a transfer for keeping each written account's element to subtract at its next
# change (no hashing then, but every element a fresh 2 KiB written and read back cold), and
# 8 elements a batch measured worse (numpy's call per batch).
_BATCH = 32
# Elements put into the set by ``moved`` are kept, by their input, until they are taken out
# again: a key changed once more (an account in every block) then costs one hash, not two.
# Without SIMD wide enough for BLAKE3's extended output (AVX-512), an element costs 3-4 µs,
# most of a transfer's commitment. At most this many are kept, the oldest dropped first
# (about 18 MiB of elements and their inputs).
_MEMO = 8192

Lanes = npt.NDArray[np.uint16]

# The 4-byte length prefix of keys of up to 255 bytes, looked up rather than built: every
# element of every block is hashed with one.
_PREFIXES = tuple(n.to_bytes(4, "big") for n in range(256))


class _Scratch(threading.local):
    """This thread's BLAKE3 hasher (reset and reused: 0.61 against 0.85 µs an element for a
    new one, measured), its two batch buffers, one for elements taken out of the set and
    one for elements put in, each with its numpy view of ``_BATCH`` rows of lanes, and its
    memo of the elements it put in lately (``_MEMO``)."""

    def __init__(self) -> None:
        self.hasher = blake3()
        self.out = memoryview(bytearray(_BATCH * STATE_HASH_BYTES))
        self.out_rows = np.frombuffer(self.out, dtype="<u2").reshape(_BATCH, LANES)
        self.into = memoryview(bytearray(_BATCH * STATE_HASH_BYTES))
        self.into_rows = np.frombuffer(self.into, dtype="<u2").reshape(_BATCH, LANES)
        self.memo: dict[bytes, bytes] = {}


_scratch = _Scratch()


def _sum(entries: Iterable[tuple[bytes, bytes]]) -> Lanes:
    """The lane-wise sum of the elements of ``entries`` (in C on the compiled core)."""
    scratch = _scratch
    summer = engine.state_summer()
    if summer is not None:
        lanes = np.zeros(LANES, dtype=np.uint16)
        summer(lanes, entries, scratch.hasher)
        return lanes
    hasher, buf, rows = scratch.hasher, scratch.into, scratch.into_rows
    reset, update, digest = hasher.reset, hasher.update, hasher.digest
    size, prefixes = STATE_HASH_BYTES, _PREFIXES
    total = np.zeros(LANES, dtype=np.uint16)
    n = 0
    for key, value in entries:
        # The key's length first, so that (key, value) pairs cannot collide by moving a
        # boundary.
        length = len(key)
        reset()
        update((prefixes[length] if length < 256 else length.to_bytes(4, "big")) + key + value)
        buf[n * size : (n + 1) * size] = digest(size)
        n += 1
        if n == _BATCH:
            total += rows.sum(axis=0, dtype=np.uint16)  # wraps modulo 2^16, lane by lane
            n = 0
    if n:
        total += rows[:n].sum(axis=0, dtype=np.uint16)
    return total


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
        self, removed: Iterable[tuple[bytes, bytes]], added: Iterable[tuple[bytes, bytes]]
    ) -> StateHash:
        """The hash after ``removed`` entries left the set and ``added`` ones joined it."""
        return StateHash(self._lanes - _sum(removed) + _sum(added))

    def moved(
        self, changes: Sequence[tuple[bytes, bytes | None]], before: Mapping[bytes, bytes | None]
    ) -> StateHash:
        """The hash after each ``(key, value)`` of ``changes`` replaced ``before[key]`` (None:
        no entry). The hot path of every block, written out: ``updated`` would go through
        two generators. An element taken out is found in the memo when this thread put it
        in lately (the memo holds exactly what BLAKE3 gave for the same input). The compiled
        core (``engine.state_mover``) does the same, summing each element in C."""
        scratch = _scratch
        mover = engine.state_mover()
        if mover is not None:
            lanes = self._lanes.copy()
            mover(lanes, changes, before, scratch.hasher, scratch.memo, _MEMO)
            return StateHash(lanes)
        hasher, size, prefixes, memo = scratch.hasher, STATE_HASH_BYTES, _PREFIXES, scratch.memo
        reset, update, digest = hasher.reset, hasher.update, hasher.digest
        out, out_rows, into, into_rows = (
            scratch.out,
            scratch.out_rows,
            scratch.into,
            scratch.into_rows,
        )
        lanes = self._lanes.copy()
        taken = put = 0
        for key, value in changes:
            old = before[key]
            if old == value:
                continue
            length = len(key)
            prefix = prefixes[length] if length < 256 else length.to_bytes(4, "big")
            if old is not None:
                entry = prefix + key + old
                element = memo.pop(entry, None)
                if element is None:
                    reset()
                    update(entry)
                    element = digest(size)
                out[taken * size : (taken + 1) * size] = element
                taken += 1
                if taken == _BATCH:
                    lanes -= out_rows.sum(axis=0, dtype=np.uint16)
                    taken = 0
            if value is not None:
                entry = prefix + key + value
                reset()
                update(entry)
                element = digest(size)
                memo[entry] = element
                into[put * size : (put + 1) * size] = element
                put += 1
                if put == _BATCH:
                    lanes += into_rows.sum(axis=0, dtype=np.uint16)
                    put = 0
        if taken:
            lanes -= out_rows[:taken].sum(axis=0, dtype=np.uint16)
        if put:
            lanes += into_rows[:put].sum(axis=0, dtype=np.uint16)
        while len(memo) > _MEMO:
            del memo[next(iter(memo))]
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
