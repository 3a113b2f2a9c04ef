"""Following the header chain: which blocks are irreversible, learnt without their bodies.

A fresh node that state-syncs needs a block it can trust. Rather than take one on the
operator's word (``state-sync-trusted-block``), it can start from the one header state it
trusts without asking anyone, genesis, and judge each next header on it as a block's header is
judged (``process_signed_header``: the header's rules, the scheduled producer's signature, the
QC proving a new finality claim), each one's schedule changes taking effect as the chain's
do. The LIB so followed is a fact as strong as a full node's: more than two thirds of the
producers, or of the finalizers on a votes chain, built on it. Snapshots of blocks at or below
it, with the ids followed, can then be trusted (``trusts``).

Above the LIB, peers may be on different branches. The chain keeps the header states from
its LIB up to its tip, so that a batch of headers can continue any of those blocks (the
branch switches) but never one below the LIB: a header that does not continue a block held is
refused as one that does not follow (``NotContinuing``), which is a peer's fault only when
the batch starts right above the LIB. What a peer sends is judged, never believed: the first
header that breaks a rule raises ``InvalidBlock`` and those before it stay.

``checkpoint`` gives the LIB's header state and the irreversible blocks remembered as bytes,
and ``HeaderChain.resume`` takes them back, so that a node restarted in the middle of a state
sync follows on from its LIB rather than from genesis (the node keeps the bytes in its data
dir: they are trusted as the rest of it is, with a digest against damage).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from chain.core.block_transition import process_signed_header
from chain.core.consensus.block import SignedHeader
from chain.core.consensus.dpos import HeaderState, decode_header_state
from chain.core.primitives.crypto import sha256
from chain.core.primitives.encoding import check_bytes, check_int, pack, unpack
from chain.core.primitives.errors import ChainError, EncodingError
from chain.core.primitives.params import SLOT_MS, ChainParams, slot_start_ms
from chain.core.primitives.types import BlockId, block_num_of

__all__ = [
    "CHECKPOINT_VERSION",
    "KEEP_FINAL_IDS",
    "MAX_REVERSIBLE",
    "Checkpoint",
    "HeaderChain",
    "Judged",
    "NotContinuing",
]

KEEP_FINAL_IDS = 1 << 16  # irreversible blocks remembered (id and header state digest, 5 MiB)
# Header states held above the LIB (about 1 KiB each): following stops when the LIB stalls
# longer (14 hours of 0.5-second blocks), until it is restarted.
MAX_REVERSIBLE = 100_000
CHECKPOINT_VERSION = 1
_ENTRY = 64  # a final block in a checkpoint: its id, then its header state's SHA-256


class NotContinuing(ChainError):
    """A batch of headers that does not continue any block held (the LIB or above)."""

    name = "not_continuing"


@dataclass(frozen=True, slots=True)
class Judged:
    """Headers judged on a chain (``HeaderChain.judge``): the block they continue, the header
    states of those sound, in order, and the error of the first that was not (those after it
    were not judged)."""

    parent: BlockId | None
    states: tuple[HeaderState, ...]
    error: ChainError | None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A header chain's LIB header state and the final blocks it remembers (their ids and
    header state digests, from block ``first`` on), taken at once; ``encode`` (about 20 ms
    for 65,536 blocks) may then run on another thread."""

    chain_id: bytes
    lib_state: bytes
    first: int
    final: tuple[tuple[BlockId, bytes], ...]

    def encode(self) -> bytes:
        blob = b"".join(block_id + digest for block_id, digest in self.final)
        body = pack([CHECKPOINT_VERSION, self.chain_id, self.lib_state, self.first, blob])
        return sha256(body) + body


def _decode_lib_state(raw: bytes) -> HeaderState:
    """A checkpoint's LIB header state, its fields checked (the digest only shows the file
    is as written)."""
    try:
        state = decode_header_state(raw)
        check_bytes(state.id, 32, "header state id")
        check_int(state.num, 0, 2**32 - 1, "header state block number")
        check_int(state.lib, 0, state.num, "header state LIB")
        check_int(state.slot, 0, 2**32 - 1, "header state slot")
        if state.encode() != raw:
            raise EncodingError("header checkpoint", "header state not in canonical encoding")
    except (TypeError, ValueError, IndexError, KeyError, AttributeError) as err:
        raise EncodingError("header checkpoint", f"bad header state: {err}") from err
    return state


class HeaderChain:
    """The header chain followed from a trusted header state (genesis)."""

    def __init__(self, start: HeaderState, params: ChainParams, chain_id: bytes) -> None:
        self.params = params
        self.chain_id = chain_id
        # The LIB's header state and every one above it on the branch followed, by number.
        self._states: dict[int, HeaderState] = {start.num: start}
        self._lib: int = start.num
        self._tip: int = start.num
        # Irreversible blocks by number, oldest out first: the id and the SHA-256 of the
        # header state, which a snapshot of the block must carry.
        self._final: OrderedDict[int, tuple[BlockId, bytes]] = OrderedDict(
            {start.num: (start.id, sha256(start.encode()))}
        )

    @classmethod
    def resume(cls, raw: bytes, params: ChainParams, chain_id: bytes) -> HeaderChain:
        """The chain a ``checkpoint`` was taken of, followed from its LIB on; EncodingError
        when ``raw`` is damaged, of another version or of another chain."""
        if len(raw) < 32 or sha256(raw[32:]) != raw[:32]:
            raise EncodingError("header checkpoint", "damaged: its digest does not match")
        fields = unpack(raw[32:], "header checkpoint")
        if type(fields) is not list or len(fields) != 5:
            raise EncodingError("header checkpoint", "expected 5 fields")
        version = check_int(fields[0], 0, 2**32, "header checkpoint version")
        if version != CHECKPOINT_VERSION:
            raise EncodingError("header checkpoint", f"version {version}, not {CHECKPOINT_VERSION}")
        if check_bytes(fields[1], 32, "header checkpoint chain id") != chain_id:
            raise EncodingError("header checkpoint", "of another chain")
        if type(fields[2]) is not bytes:
            raise EncodingError("header checkpoint", "expected the LIB's header state")
        lib = _decode_lib_state(fields[2])
        first = check_int(fields[3], max(0, lib.num - KEEP_FINAL_IDS + 1), lib.num, "first block")
        blob = fields[4]
        if type(blob) is not bytes or len(blob) != (lib.num - first + 1) * _ENTRY:
            raise EncodingError("header checkpoint", "final blocks do not run up to its LIB")
        chain = cls(lib, params, chain_id)
        chain._final = OrderedDict(
            (first + i // _ENTRY, (BlockId(blob[i : i + 32]), blob[i + 32 : i + _ENTRY]))
            for i in range(0, len(blob), _ENTRY)
        )
        if chain._final[lib.num] != (lib.id, sha256(lib.encode())):
            raise EncodingError("header checkpoint", "its LIB is not its last final block")
        return chain

    def checkpoint(self) -> Checkpoint:
        """The LIB's header state and the irreversible blocks remembered, for ``resume``
        once encoded (``Checkpoint.encode``, which may run on another thread)."""
        return Checkpoint(
            self.chain_id,
            self._states[self._lib].encode(),
            next(iter(self._final)),
            tuple(self._final.values()),
        )

    @property
    def tip(self) -> HeaderState:
        """The last header followed."""
        return self._states[self._tip]

    @property
    def lib(self) -> int:
        return self._lib

    def extend(self, headers: Sequence[SignedHeader], now_ms: int) -> int:
        """Judge ``headers`` (consecutive) in turn on the block before the first, and follow
        them; returns how many were followed. A first header that continues no block held
        raises ``NotContinuing``; one that breaks a rule raises ``InvalidBlock``, and those
        before it stay followed."""
        judged = self.judge(headers, now_ms)
        count = self.adopt(judged)
        if judged.error is not None:
            raise judged.error
        return count

    def judge(self, headers: Sequence[SignedHeader], now_ms: int) -> Judged:
        """What ``extend`` would follow, without following it: the header states of the
        headers judged sound, up to the first that breaks a rule (``Judged.error``). Reads
        the chain and changes nothing, so it may run on another thread while nothing else
        changes the chain; ``adopt`` then follows the result. Raises ``NotContinuing``."""
        if not headers:
            return Judged(None, (), None)
        first = headers[0]
        parent = self._states.get(first.num - 1)
        if parent is None or parent.id != first.header.previous:
            raise NotContinuing(
                f"block {first.num} continues no block held (LIB {self._lib}, tip {self._tip})"
            )
        states: list[HeaderState] = []
        continued = parent.id
        lib = self._lib
        for signed in headers:
            if signed.num - lib > MAX_REVERSIBLE:
                break  # the LIB stalled: nothing more to learn until it moves
            if slot_start_ms(signed.header.slot) > now_ms + SLOT_MS:
                break  # in the future by our clock (ours may be slow): not now, no fault
            try:
                state = process_signed_header(
                    parent, signed, params=self.params, chain_id=self.chain_id, now_ms=now_ms
                )
            except ChainError as err:  # process_header checks that it continues ``parent``
                return Judged(continued, tuple(states), err)
            states.append(state)
            lib = max(lib, state.lib)
            parent = state
        return Judged(continued, tuple(states), None)

    def adopt(self, judged: Judged) -> int:
        """Follow the header states ``judge`` gave (nothing changed the chain since): the
        first replaces the branch above its parent. Returns how many were followed; raises
        ``NotContinuing`` if the chain no longer holds the block they continue."""
        if not judged.states:
            return 0
        first = judged.states[0].num
        parent = self._states.get(first - 1)
        if parent is None or parent.id != judged.parent:
            raise NotContinuing(f"block {first - 1} judged on is no longer held")
        for num in range(first, self._tip + 1):
            del self._states[num]
        for state in judged.states:
            self._states[state.num] = state
            self._tip = state.num
            if state.lib > self._lib:
                self._finalize(state.lib)
        return len(judged.states)

    def _finalize(self, lib: int) -> None:
        for num in range(self._lib + 1, lib + 1):
            state = self._states[num]
            self._final[num] = (state.id, sha256(state.encode()))
            if len(self._final) > KEEP_FINAL_IDS:
                self._final.popitem(last=False)
        for num in range(self._lib, lib):
            del self._states[num]
        self._lib = lib

    def trusts(self, block_id: BlockId) -> bool:
        """Whether ``block_id`` is an irreversible block of the chain followed (one of the
        last ``KEEP_FINAL_IDS``)."""
        return self.header_state_digest(block_id) is not None

    def header_state_digest(self, block_id: BlockId) -> bytes | None:
        """The SHA-256 of the header state (schedules, LIB, finality data) at ``block_id``
        as followed, if it is an irreversible block of the chain followed: a snapshot of it
        must carry exactly that header state."""
        held = self._final.get(block_num_of(block_id))
        return held[1] if held is not None and held[0] == block_id else None
