"""Replaying history to stream subscribers in bounded memory.

A subscriber resuming from far back reads the store in batches bounded in blocks, bytes and
time (``read_after``, on the chain thread). The final blocks read are kept, briefly, in one
``ReplayCache`` that every session shares: sessions replaying the same stretch (64 clients
resuming from the same block) decode each block once, encode each frame once, and hold one
copy between them rather than one each. The cache is bounded in bytes and emptied when the
last replay ends, so that a burst of replays leaves nothing behind.

Only final blocks are shared: a final block is the only block of its number this chain will
ever have, so a session may take it from the cache by number alone, once it checks that the
block extends its cursor.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from chain.controller import Chain
from chain.core.consensus.block import SignedBlock
from chain.core.execution.actions import Call
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import BlockId, TxId
from chain.view import ChainView
from node.api.stream.frames import BlockIndex, Cursor, Traces

# A replay reads at most this many blocks per call on the chain thread, and stops sooner
# once it has read REPLAY_BATCH_BYTES of encoded blocks or for REPLAY_BUDGET_S: full blocks
# take milliseconds each to decode, and a block to apply or a push to admit waits behind the
# call. The bytes bound what one session holds decoded at once: 1 MiB is five full-memo
# blocks of 500 transfers, 6 MiB once decoded.
REPLAY_BATCH = 100
REPLAY_BATCH_BYTES = 1 << 20
REPLAY_BUDGET_S = 0.01
# A block's index held in memory (its decoded transactions, the JSON of each transaction
# and action, and the unfiltered frames) takes about this many times its encoded size: a
# block of 500 transfers with 256-character memos is 180 KB encoded, ~1.4 MB indexed.
INDEX_WEIGHT = 8
# What the shared cache holds at most: 48 MiB is ~35 such blocks, enough for subscribers that
# started together to stay within it of each other, and a cost the node can always afford.
REPLAY_CACHE_BYTES = 48 << 20


@dataclass(frozen=True, slots=True)
class Batch:
    """What one replay read found: where the cursor stands and the blocks after it."""

    position: str  # "ours", "above_head", "above_lib", "below_first" or "elsewhere"
    blocks: tuple[SignedBlock, ...]
    head: Cursor
    lib: Cursor
    first_block: int
    traces: dict[int, Traces] = field(default_factory=dict)  # of the blocks that ran contracts


def read_after(
    chain: Chain,
    cursor: Cursor,
    irreversible: bool,
    limit: int,
    budget_s: float,
    max_bytes: int = REPLAY_BATCH_BYTES,
) -> Batch:
    """(On the chain thread.) Whether ``cursor`` is on our chain and, if it is, up to
    ``limit`` blocks after it (to the LIB when ``irreversible``), ``max_bytes`` of them
    encoded and ``budget_s`` of reading at most (one block at least)."""
    view = chain.view()
    head, lib = Cursor(view.head.num, view.head.id), Cursor(view.lib_num, view.lib_id)
    position = _position(chain, view, cursor, irreversible)
    if position != "ours":
        return Batch(position, (), head, lib, view.first_block)
    last = min(lib.num if irreversible else head.num, cursor.num + limit)
    blocks = []
    traces: dict[int, Traces] = {}
    deadline = time.monotonic() + budget_s
    size = 0
    for num in range(cursor.num + 1, last + 1):
        block = chain.block_by_num(num)
        blocks.append(block)
        if any(a.CODE == Call.CODE for stx in block.transactions for a in stx.tx.actions):
            traces[num] = tuple((TxId(t), trace) for t, trace in chain.traces(num))
        size += len(block.encode())
        if size >= max_bytes or time.monotonic() >= deadline:
            break
    return Batch(position, tuple(blocks), head, lib, view.first_block, traces)


def _position(chain: Chain, view: ChainView, cursor: Cursor, irreversible: bool) -> str:
    if cursor.num > view.head.num:
        return "above_head"
    if irreversible and cursor.num > view.lib_num:
        return "above_lib"
    if cursor.num < view.first_block - 1:
        return "below_first"
    if cursor.num == view.head.num:
        held = view.head.id
    elif cursor.num == view.first_block - 1:  # named only by the first block held
        held = chain.block_by_num(view.first_block).header.previous
    else:
        held = chain.block_by_num(cursor.num).id
    return "ours" if held == cursor.id else "elsewhere"


class ReplayCache:
    """The indexes of final blocks that replaying sessions read, by number, bounded in bytes
    (least recently used first out); and the reads in flight, so that sessions at the same
    place wait for one read rather than each make their own. Used on the event loop only.
    Amounts are shown in ``params``' token."""

    def __init__(self, params: ChainParams, max_bytes: int = REPLAY_CACHE_BYTES) -> None:
        self.params = params
        self.max_bytes = max_bytes
        self.bytes = 0
        self._final: OrderedDict[int, tuple[BlockIndex, int]] = OrderedDict()
        self._reads: dict[int, asyncio.Event] = {}  # by the first block number read
        self._replaying = 0

    def __len__(self) -> int:
        return len(self._final)

    def get(self, num: int, previous: BlockId) -> BlockIndex | None:
        """The final block ``num`` if it is held and extends ``previous``."""
        held = self._final.get(num)
        if held is None or held[0].block.header.previous != previous:
            return None
        self._final.move_to_end(num)
        return held[0]

    def put(self, block: SignedBlock, traces: Traces) -> BlockIndex:
        """The index of final ``block``: the one held, or a new one, held from now on."""
        held = self._final.get(block.num)
        if held is not None and held[0].block.id == block.id:
            self._final.move_to_end(block.num)
            return held[0]
        index = BlockIndex(block, traces, params=self.params)
        weight = len(block.encode()) * INDEX_WEIGHT
        if weight > self.max_bytes:
            return index  # larger than the whole cache: this session's alone
        if held is not None:
            self.bytes -= held[1]
        self._final[block.num] = (index, weight)
        self.bytes += weight
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self._final.popitem(last=False)
            self.bytes -= dropped
        return index

    def reading(self, first: int) -> asyncio.Event | None:
        """The read in flight from block ``first``, set when it is answered; None if none."""
        return self._reads.get(first)

    def start_read(self, first: int) -> asyncio.Event:
        done = self._reads[first] = asyncio.Event()
        return done

    def end_read(self, first: int, done: asyncio.Event) -> None:
        if self._reads.get(first) is done:
            del self._reads[first]
        done.set()

    @property
    def replaying(self) -> int:
        """Sessions replaying now."""
        return self._replaying

    def replay_started(self) -> None:
        self._replaying += 1

    def replay_ended(self) -> bool:
        """One replay is over; True when it was the last, and the cache is now empty."""
        self._replaying -= 1
        if self._replaying:
            return False
        self._final.clear()
        self.bytes = 0
        return True
