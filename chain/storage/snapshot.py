"""Snapshots: the whole state at an irreversible block, as one portable, versioned file.

The file is ``MAGIC``, the format version (4 bytes, big-endian), then frames, each a 4-byte
big-endian length and a msgpack array:

- the head: ``[0, chain id, the block, its header state, the state's lattice hash]``;
- entry chunks: ``[1, [[key, value], ...]]``, every state entry the commitment covers
  (``chain.core.primitives.schema.committed``: all but the de-duplication set's by-id index, which
  the import rebuilds from the blocks' id lists) once, in key order, up to ``CHUNK_ENTRIES``
  entries or ``CHUNK_BYTES`` of keys and values a chunk;
- the end: ``[2, entry count, content hash]``, the content hash being the BLAKE3 of every
  byte of the file before this frame.

Writing and reading stream chunk by chunk, so memory stays constant whatever the state's
size. A reader checks, in order: the magic and version (a wrong version names both), each
frame (a file that ends early is "truncated"), keys in order and inside the state range, the
content hash, then that the entries' lattice hash is the one recorded, that it is the state
root in the block's header, and that the header state is the block's. What it cannot check
alone is that the block belongs to the chain the user means: the block id, printed by
``bor-node snapshot verify``, is compared with a node the user trusts (see the README).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from blake3 import blake3

from chain.core.consensus.block import SignedBlock, decode_block
from chain.core.consensus.dpos import HeaderState, decode_header_state
from chain.core.execution.state_hash import StateHash
from chain.core.primitives import schema
from chain.core.primitives.encoding import check_bytes, check_int, pack, unpack
from chain.core.primitives.errors import ChainError, SnapshotError

__all__ = [
    "HEAD_PREFIX",
    "MAGIC",
    "VERSION",
    "SnapshotHead",
    "SnapshotSummary",
    "head_size",
    "read_head",
    "read_snapshot",
    "write_snapshot",
]

MAGIC = b"BoR snapshot\n\x00"
VERSION = 2  # 2: the de-duplication set as one id list per block (1: one entry per id)
CHUNK_ENTRIES = 2048
CHUNK_BYTES = 1 << 20  # a block's id list is up to 180 KiB (5,000 ids)
MAX_FRAME = 64 << 20  # a chunk is far below; more means damage
_HEAD, _CHUNK, _END = 0, 1, 2
HEAD_PREFIX = len(MAGIC) + 8  # the magic, the version and the head frame's length

Progress = Callable[[int, int], None]  # (entries so far, bytes so far)


@dataclass(frozen=True, slots=True)
class SnapshotHead:
    """Which block a snapshot is of, and what its state must hash to."""

    chain_id: bytes
    block: SignedBlock
    header_state: HeaderState
    state_hash: StateHash

    @property
    def num(self) -> int:
        return self.block.num

    def check(self) -> None:
        """The block, its header state and the state commitment agree."""
        if self.header_state.id != self.block.id:
            raise SnapshotError(f"the header state is not block {self.num}'s")
        if self.state_hash.root() != self.block.header.state_root:
            raise SnapshotError(f"the state commitment is not block {self.num}'s state root")


@dataclass(frozen=True, slots=True)
class SnapshotSummary:
    head: SnapshotHead
    entries: int
    size: int
    content_hash: bytes


def _frame(obj: Any) -> bytes:
    body = pack(obj)
    return len(body).to_bytes(4, "big") + body


def write_snapshot(
    out: BinaryIO,
    head: SnapshotHead,
    entries: Iterable[tuple[bytes, bytes]],
    progress: Progress | None = None,
) -> SnapshotSummary:
    """Write ``head`` and ``entries`` (in key order) to ``out``; the entries must hash to the
    head's state hash, or SnapshotError (and the file is not to be used)."""
    head.check()
    hasher = blake3()
    size = 0

    def emit(data: bytes) -> None:
        nonlocal size
        out.write(data)
        hasher.update(data)
        size += len(data)

    emit(MAGIC + VERSION.to_bytes(4, "big"))
    emit(
        _frame(
            [
                _HEAD,
                head.chain_id,
                head.block.encode(),
                head.header_state.encode(),
                head.state_hash.to_bytes(),
            ]
        )
    )
    count, chunk, chunk_bytes = 0, [], 0
    seen = StateHash.empty()
    for key, value in entries:
        chunk.append([key, value])
        chunk_bytes += len(key) + len(value)
        if len(chunk) == CHUNK_ENTRIES or chunk_bytes >= CHUNK_BYTES:
            seen = seen.plus(chunk_pairs(chunk))
            emit(_frame([_CHUNK, chunk]))
            count += len(chunk)
            chunk, chunk_bytes = [], 0
            if progress is not None:
                progress(count, size)
    if chunk:
        seen = seen.plus(chunk_pairs(chunk))
        emit(_frame([_CHUNK, chunk]))
        count += len(chunk)
    if seen != head.state_hash:
        raise SnapshotError("the state read does not match its commitment: not written")
    content_hash = hasher.digest()
    end = _frame([_END, count, content_hash])
    out.write(end)
    size += len(end)
    if progress is not None:
        progress(count, size)
    return SnapshotSummary(head, count, size, content_hash)


def chunk_pairs(chunk: list[list[bytes]]) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in chunk]


class _Reader:
    def __init__(self, inp: BinaryIO) -> None:
        self._inp = inp
        self.hasher = blake3()
        self.offset = 0
        self.entries = 0

    def exact(self, n: int, what: str) -> bytes:
        data = self._inp.read(n)
        if len(data) != n:
            raise SnapshotError(
                f"truncated: the file ends inside {what} at byte {self.offset + len(data)}, "
                f"after {self.entries} state entries"
            )
        self.offset += n
        return data

    def frame(self, hashed: bool = True) -> list[Any]:
        raw_len = self.exact(4, "a frame length")
        length = int.from_bytes(raw_len, "big")
        if length > MAX_FRAME:
            raise SnapshotError(f"damaged: a frame of {length} bytes at byte {self.offset - 4}")
        body = self.exact(length, "a frame")
        if hashed:
            self.hasher.update(raw_len + body)
        try:
            obj = unpack(body, "snapshot frame")
        except ChainError as err:
            raise SnapshotError(f"damaged at byte {self.offset - length}: {err}") from err
        if not isinstance(obj, list) or not obj or not isinstance(obj[0], int):
            raise SnapshotError(f"damaged: a frame at byte {self.offset - length} is not tagged")
        return obj


def _bytes(value: Any, what: str) -> bytes:
    if type(value) is not bytes:
        raise SnapshotError(f"damaged snapshot head: {what} is not bytes")
    return value


def _check_start(start: bytes) -> None:
    """The magic and the format version (``start``: the file's first bytes, up to 4 past
    the magic)."""
    if not start or not MAGIC.startswith(start[: len(MAGIC)]):
        raise SnapshotError("not a BoR snapshot (the file does not start with its magic)")
    if len(start) < len(MAGIC) + 4:
        raise SnapshotError("truncated: the file ends inside its header")
    version = int.from_bytes(start[len(MAGIC) : len(MAGIC) + 4], "big")
    if version != VERSION:
        raise SnapshotError(
            f"snapshot format version {version}; this node reads version {VERSION} "
            "(use a BoR release of that format, or make a new snapshot)"
        )


def head_size(start: bytes) -> int:
    """How many bytes the magic, version and head frame of a snapshot take, from its first
    ``HEAD_PREFIX`` bytes: a download reads its head (``read_head``) as soon as it holds
    that many, long before the whole file. SnapshotError if ``start`` is not that of a
    snapshot of this version."""
    assert len(start) >= HEAD_PREFIX
    _check_start(start)
    length = int.from_bytes(start[len(MAGIC) + 4 : HEAD_PREFIX], "big")
    if length > MAX_FRAME:
        raise SnapshotError(f"damaged: a frame of {length} bytes at byte {len(MAGIC) + 4}")
    return HEAD_PREFIX + length


def read_head(inp: BinaryIO) -> tuple[_Reader, SnapshotHead]:
    reader = _Reader(inp)
    start = inp.read(len(MAGIC) + 4)
    reader.offset = len(start)
    _check_start(start)
    reader.hasher.update(start)
    frame = reader.frame()
    try:
        if frame[0] != _HEAD or len(frame) != 5:
            raise SnapshotError("damaged: the first frame is not the snapshot head")
        head = SnapshotHead(
            chain_id=check_bytes(frame[1], 32, "chain id"),
            block=decode_block(_bytes(frame[2], "block")),
            header_state=decode_header_state(_bytes(frame[3], "header state")),
            state_hash=StateHash.from_bytes(_bytes(frame[4], "state hash")),
        )
    except SnapshotError:
        raise
    except (ChainError, TypeError, IndexError, KeyError, ValueError) as err:
        raise SnapshotError(f"damaged snapshot head: {err}") from err
    head.check()
    return reader, head


def read_snapshot(inp: BinaryIO) -> tuple[SnapshotHead, Iterator[list[tuple[bytes, bytes]]]]:
    """The head of the snapshot in ``inp``, and its entries chunk by chunk.

    The head is checked at once; the entries as they are read. Only when the iterator has
    run to its end without a SnapshotError is the snapshot whole and verified: a caller
    writing entries as they come must not use them before then.
    """
    reader, head = read_head(inp)
    return head, _chunks(reader, head, inp)


def _chunks(
    reader: _Reader, head: SnapshotHead, inp: BinaryIO
) -> Iterator[list[tuple[bytes, bytes]]]:
    seen = StateHash.empty()
    last = b""
    state_end = schema.prefix_end(schema.STATE)
    while True:
        content_hash = reader.hasher.digest()
        frame = reader.frame()
        if frame[0] == _END:
            break
        if frame[0] != _CHUNK or len(frame) != 2 or not isinstance(frame[1], list):
            raise SnapshotError(f"damaged: an unknown frame at byte {reader.offset}")
        chunk: list[tuple[bytes, bytes]] = []
        for entry in frame[1]:
            if (
                not isinstance(entry, list)
                or len(entry) != 2
                or not isinstance(entry[0], bytes)
                or not isinstance(entry[1], bytes)
            ):
                raise SnapshotError(f"damaged: a malformed entry after {reader.entries} entries")
            key, value = entry
            if key <= last or not schema.STATE <= key < state_end or not schema.committed(key):
                raise SnapshotError(
                    f"damaged: entry {reader.entries} is out of order or not a state key"
                )
            last = key
            chunk.append((key, value))
            reader.entries += 1
        seen = seen.plus(chunk)
        yield chunk
    try:
        count = check_int(frame[1], 0, 2**63, "entry count")
        recorded = check_bytes(frame[2], 32, "content hash")
    except (ChainError, IndexError) as err:
        raise SnapshotError(f"damaged end of snapshot: {err}") from err
    if recorded != content_hash:
        raise SnapshotError("content hash mismatch: the file was changed or damaged")
    if count != reader.entries:
        raise SnapshotError(f"the end says {count} entries, the file holds {reader.entries}")
    if inp.read(1):
        raise SnapshotError("damaged: bytes after the end of the snapshot")
    if seen != head.state_hash:
        raise SnapshotError(
            f"the state does not match block {head.num}'s state commitment (hash mismatch)"
        )
