"""Blocks from peers wait here, ordered by number, until they can be applied in order.

Ranges from several peers arrive interleaved; the applier hands the chain contiguous runs
starting at the next needed number, in batches (one trip to the chain thread per batch, with
the next blocks' signatures recovered ahead by the chain's worker processes). Blocks too far
above the head are refused, which bounds memory together with the sync manager's window.

A peer's blocks are read off the network at the pace the chain takes them, because decoding
holds the GIL: a reader running ahead would decode on the event loop while the chain thread,
which gives up the GIL at every LevelDB read, waited to get it back and the signature
workers idled. Past ``LOOKAHEAD`` blocks above the last block the chain is done with, the
peer's reader waits (``room``, for a while at most) before it reads the next message. The
chain tells of each block it is done with (``taken``), not only of each batch, so that a
block is decoded as one is applied instead of a batch's worth in one burst each time the
head moves; a reader then need stay only one batch (and the blocks handed along) ahead.

In light validation no worker waits on the decoding, and the chain thread's hand-off of the
GIL to a reader at every block costs more than a burst does, so the readers and the chain
take turns at the GIL instead of sharing it: a reader reads (up to one batch above the head)
only while no light batch is being applied, and the applier waits for a whole batch before
it pushes (``FILL_QUIET`` without a new block, ``FILL_WAIT`` at most).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from chain.core.consensus.block import SignedBlock
from chain.signatures.signers import PREFETCH_BLOCKS
from p2p.service import BlockResult, ChainService

# Blocks per trip to the chain thread: a few hundred milliseconds of work at most, so that
# produced blocks and RPC calls are not held up behind a sync batch for long.
BATCH = 50
# Blocks after a batch handed along with it, for their signatures to be recovered early.
AHEAD = PREFETCH_BLOCKS
# How far above the last block the chain is done with a peer's blocks are read without
# waiting, where the chain tells of each block (full validation): the next batch and the
# blocks handed along with it, as a block more is read for each block of the batch in flight
# taken. In light validation, a batch above the head, and only while no batch is applied.
LOOKAHEAD = BATCH + AHEAD
# In light validation the applier pushes a batch short of BATCH blocks once no block has come
# for FILL_QUIET seconds (the readers wait for room, or the network is slower than the chain),
# or FILL_WAIT seconds after it began to wait.
FILL_QUIET = 0.02
FILL_WAIT = 0.5
# The longest a reader waits for room: well under the sync manager's stall timeout and the
# switch's silence limit, both counted from the last message read from a peer; a chain slower
# than that still gets a block read from each peer every ROOM_WAIT seconds.
ROOM_WAIT = 1.0

# Told, after each batch, each block's result beside the peer that sent it.
OnPushed = Callable[[list[tuple[str, BlockResult]]], Awaitable[None]]


class BlockApplier:
    def __init__(
        self,
        chain: ChainService,
        on_pushed: OnPushed,
        light_upto: Callable[[], int] = lambda: 0,
        max_ahead: int = 5000,
    ) -> None:
        self.chain = chain
        self.on_pushed = on_pushed
        self.light_upto = light_upto
        self.max_ahead = max_ahead
        self._pending: dict[int, list[tuple[str, SignedBlock]]] = {}
        # The batch the chain is applying now: still held, though no longer pending.
        self._pushing: list[tuple[str, SignedBlock]] = []
        self._wake = asyncio.Event()
        # The highest block of the batch being pushed that the chain is done with (0: none).
        self._taken = 0
        # Set (and replaced) whenever the chain is done with a block or a batch: readers may
        # have room.
        self._moved = asyncio.Event()

    def __len__(self) -> int:
        return sum(len(v) for v in self._pending.values())

    def add(self, peer: str, block: SignedBlock) -> bool:
        """Queue ``block``; False if it is too far ahead of our head to hold."""
        head = self.chain.position().head_num
        if block.num > head + self.max_ahead:
            return False
        entries = self._pending.setdefault(block.num, [])
        if all(b.id != block.id for _, b in entries):
            entries.append((peer, block))
        self._wake.set()
        return True

    async def room(self, num: int) -> None:
        """Wait until block ``num`` may be read (``_room_upto``), ``ROOM_WAIT`` at most
        (what the reader of a peer sending block ``num`` next does first)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ROOM_WAIT
        while num > self._room_upto(num):
            left = deadline - loop.time()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._moved.wait(), left)

    def _room_upto(self, num: int) -> int:
        """The highest block a reader about to read block ``num`` may read now: ``LOOKAHEAD``
        above our head or the last block the chain is done with; in light validation, a batch
        above our head while the chain is idle, nothing while it applies a batch."""
        head = self.chain.position().head_num
        if self._told_per_block(num):
            return max(head, self._taken) + LOOKAHEAD
        return head if self._pushing else head + BATCH

    def _told_per_block(self, num: int) -> bool:
        """Whether the chain tells of each block it is done with in a batch up to block
        ``num``: where it recovers signatures, not in light validation (see the module's
        doc)."""
        return num > self.light_upto()

    def _took(self, num: int) -> None:
        """The chain is done with block ``num`` of the batch being pushed."""
        self._taken = max(self._taken, num)
        self._wake_readers()

    def _wake_readers(self) -> None:
        self._moved.set()
        self._moved = asyncio.Event()

    def lowest(self) -> tuple[str, int] | None:
        """The lowest block held, waiting or in the batch being pushed, and the peer that sent
        it; None if nothing is held. A batch takes a second or more to apply: were its blocks
        left out, the sync manager would see our next block asked for by nobody and ask for
        the whole batch again (on a one-peer bootstrap, most blocks came twice)."""
        held: list[tuple[int, str]] = [(b.num, peer) for peer, b in self._pushing]
        held += [(num, entries[0][0]) for num, entries in self._pending.items()]
        if not held:
            return None
        num, peer = min(held, key=lambda h: h[0])
        return peer, num

    def next_batch(self) -> list[tuple[str, SignedBlock]]:
        """What to push next: anything at or below the head (a fork candidate or a duplicate:
        the chain sorts it out), then the contiguous run above the head, up to ``BATCH``.
        Blocks above a gap wait for the gap to be filled: the sync manager asks for it
        (``SyncManager.applier_waits``)."""
        head = self.chain.position().head_num
        batch: list[tuple[str, SignedBlock]] = []
        for num in sorted(n for n in self._pending if n <= head):
            batch.extend(self._pending.pop(num))
        num = head + 1
        while num in self._pending and len(batch) < BATCH:
            batch.extend(self._pending.pop(num))
            num += 1
        return batch

    def _run_above(self, head: int) -> int:
        """How many blocks from ``head`` + 1 on are held without a gap, up to ``BATCH``."""
        count = 0
        while head + count + 1 in self._pending and count < BATCH:
            count += 1
        return count

    async def _filled(self) -> None:
        """In light validation, wait until a whole batch above our head is held, no block has
        come for ``FILL_QUIET``, or ``FILL_WAIT`` has passed."""
        head = self.chain.position().head_num
        if head >= self.light_upto():
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FILL_WAIT
        while self._run_above(head) < BATCH:
            left = min(FILL_QUIET, deadline - loop.time())
            if left <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except TimeoutError:
                return

    def _ahead(self, batch: list[tuple[str, SignedBlock]]) -> list[SignedBlock]:
        """The blocks that would follow ``batch`` in the next one, as held now (up to
        ``AHEAD``): their signatures can be recovered while ``batch`` is applied."""
        num = max(b.num for _, b in batch) + 1
        out: list[SignedBlock] = []
        while num in self._pending and len(out) < AHEAD:
            out.append(self._pending[num][0][1])
            num += 1
        return out

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while True:
                await self._filled()
                batch = self.next_batch()
                if not batch:
                    break
                self._pushing = batch
                taken = self._took if self._told_per_block(batch[-1][1].num) else None
                try:
                    results = await self.chain.push_blocks(
                        [b for _, b in batch], self.light_upto(), self._ahead(batch), taken
                    )
                finally:
                    self._pushing = []
                    self._taken = 0  # the published head covers the batch now
                self._wake_readers()
                pairs = [(peer, r) for (peer, _), r in zip(batch, results, strict=True)]
                await self.on_pushed(pairs)
