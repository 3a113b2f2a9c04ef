"""One subscription of ``/v1/chain/stream``: replay from the store, then follow the chain.

The hub hands every ``ChainUpdate`` to ``Session.offer`` on the event loop; it only appends
to the session's inbox, bounded in messages, and a full inbox ends the session with
``lagged``: nothing the hub does waits for a client. The session's own task (``run``) turns
what it receives into frames and sends them, so a slow client only delays itself.

No gap, no duplicate: the session keeps the cursor of the last block it sent and moves it
only along the chain's steps. An applied block is sent when it extends the cursor, an undo
when it pops the cursor's block; any other step happened to a chain the client is not on
(an update that arrived while the replay read past it) and is skipped. Once an update
leaves the cursor at its view's head, the cursor mirrors the chain's head step by step, so
every later update must leave it there too; if one does not, the session ends with
``lagged`` (the client resumes from its cursor) rather than leave a gap.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping

import structlog

from chain.core.primitives.types import BlockId
from chain.events import BlockStep, ChainUpdate
from node.api.stream.abis import StreamAbis
from node.api.stream.frames import (
    INTERNAL_ERROR,
    TRY_AGAIN_LATER,
    BlockIndex,
    Cursor,
    IndexCache,
    Refused,
    Subscription,
    error_frame,
    lagged_frame,
    lib_frame,
    subscribed_frame,
    undo_frame,
)
from node.api.stream.replay import (
    REPLAY_BATCH,
    REPLAY_BATCH_BYTES,
    REPLAY_BUDGET_S,
    Batch,
    ReplayCache,
    read_after,
)
from node.runner import ChainRunner

log = structlog.get_logger("stream")

# Blocks above the cursor an irreversible-only session keeps from the updates, to send when
# the LIB passes them without reading them again; past this it reads them from the store.
MAX_AHEAD = 1024

Send = Callable[[bytes], Awaitable[None]]


class Ended(Exception):
    """The session ends with this frame and close code."""

    def __init__(self, frame: bytes, code: int) -> None:
        super().__init__(frame.decode())
        self.frame = frame
        self.code = code


class Session:
    """One connection's subscription: its inbox (filled by the hub), cursor and task."""

    def __init__(
        self,
        sub: Subscription,
        capacity: int,
        indexes: IndexCache,
        popped: Mapping[BlockId, tuple[int, BlockId]],
        max_bytes: int = 0,
        replays: ReplayCache | None = None,
        abis: StreamAbis | None = None,
    ) -> None:
        """``capacity``: the messages the inbox may hold, ``max_bytes`` the encoded blocks
        (0: no cap); ``replays``: the hub's cache of replayed blocks, ``abis`` its
        contracts' ABIs, both shared by sessions."""
        self.sub = sub
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.cursor = sub.cursor
        self._indexes = indexes
        self._replays = replays if replays is not None else ReplayCache(indexes.params)
        self._abis = abis if abis is not None else StreamAbis()
        self._runner: ChainRunner | None = None  # set by run
        self._popped = popped  # the hub's memory of popped blocks: id -> (num, parent id)
        self._inbox: deque[tuple[ChainUpdate, int, int]] = deque()
        self._weight = 0  # messages the inbox may turn into
        self._bytes = 0  # encoded blocks the inbox holds
        # Whether this session held much memory (it replayed history, or was cut): the hub
        # gives the allocator's free memory back to the system after such sessions end.
        self.heavy = False
        self._wake = asyncio.Event()
        self._ending: Ended | None = None
        self._lagged_reason = ""
        self._in_step = False
        self._lib_sent = -1
        self._ahead: dict[int, BlockStep] = {}  # irreversible only: blocks above the cursor

    # --- the hub's side (on the event loop, never waits) ------------------------------------

    def offer(self, update: ChainUpdate) -> bool:
        """Queue ``update``; False when the inbox is full and the session now ends lagged."""
        if self._ending is not None:
            return True
        weight = self._weight_of(update)
        if not weight:
            return True
        if self._weight + weight > self.capacity:
            reason = f"more than {self.capacity} messages waited (http-stream-buffer)"
            self._end(Ended(b"", TRY_AGAIN_LATER), lagged=reason)
            return False
        # The inbox shares its updates with the chain and the other sessions, but once they
        # have moved on, what it holds is this session's alone: a subscriber that does not
        # read must not keep thousands of full blocks alive.
        size = sum(len(step.block.encode()) for step in update.events.steps)
        if self.max_bytes and self._bytes + size > self.max_bytes:
            reason = f"more than {self.max_bytes} bytes of blocks waited (http-stream-buffer-bytes)"
            self._end(Ended(b"", TRY_AGAIN_LATER), lagged=reason)
            return False
        self._inbox.append((update, weight, size))
        self._weight += weight
        self._bytes += size
        self._wake.set()
        return True

    def _weight_of(self, update: ChainUpdate) -> int:
        """The most messages ``update`` can become for this session."""
        if self.sub.irreversible_only:
            return max(0, update.view.lib_num - update.previous_lib)
        return len(update.events.steps) + (1 if update.lib_advanced else 0)

    def fail(self, reason: str, code: int) -> None:
        """End the session with an error (the client broke the protocol after subscribing)."""
        self._end(Ended(error_frame(reason), code))

    def _end(self, ending: Ended, lagged: str = "") -> None:
        if self._ending is not None:
            return
        self._ending = ending
        self._lagged_reason = lagged
        self.heavy = self.heavy or bool(lagged)
        self._inbox.clear()
        self._weight = 0
        self._bytes = 0
        self._wake.set()

    @property
    def ended(self) -> bool:
        return self._ending is not None

    # --- the session's task ---------------------------------------------------------------

    async def run(self, runner: ChainRunner, send: Send) -> Ended:
        """Send the subscription's frames until it ends; returns how it ends (the last
        frame, error or lagged, and the close code), for the caller to send and close.
        ``Refused`` (a cursor it cannot start from) and the sender's errors propagate."""
        self._runner = runner
        try:
            await self._start(runner, send)
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._inbox and self._ending is None:
                    update, weight, size = self._inbox.popleft()
                    self._weight -= weight
                    self._bytes -= size
                    await self._follow(update, runner, send)
                self._check_end()
        except Ended as ending:
            return ending
        except asyncio.CancelledError as cancelled:
            # The client went away mid-replay. Raised on, the traceback would hold every frame
            # below this one with its blocks (a batch, its indexes: megabytes a session) in a
            # cycle through the task, freed only by a full collection, which the node's
            # thresholds make rare: 64 clients leaving a replay left ~100 MiB so held.
            raise cancelled.with_traceback(None)  # noqa: B904 - the same one, untraced

    def _check_end(self) -> None:
        ending = self._ending
        if ending is None:
            return
        if ending.frame:
            raise ending
        assert self.cursor is not None
        raise Ended(lagged_frame(self.cursor, self._lagged_reason), ending.code)

    async def _start(self, runner: ChainRunner, send: Send) -> None:
        sub = self.sub
        if sub.cursor is None:
            view = runner.view
            head, lib = Cursor(view.head.num, view.head.id), Cursor(view.lib_num, view.lib_id)
            self.cursor = lib if sub.irreversible_only else head
            self._lib_sent = lib.num
            await send(subscribed_frame(head, lib, self.cursor.num + 1))
            return
        cursor = sub.cursor
        undos: list[bytes] = []
        while True:
            batch = await runner.call(read_after, cursor, sub.irreversible_only, *_batch())
            if batch.position == "ours":
                break
            known = self._popped.get(cursor.id)
            if batch.position != "elsewhere" or known is None or sub.irreversible_only:
                raise Refused(_unusable(cursor, batch, known is not None))
            undone, cursor = cursor, Cursor(known[0] - 1, known[1])
            undos.append(undo_frame(undone.num, undone.id, cursor))
        self.cursor = cursor
        self._lib_sent = batch.lib.num
        await send(subscribed_frame(batch.head, batch.lib, cursor.num + 1))
        for frame in undos:
            await send(frame)
        await self._send_blocks(batch, send)
        await self._replay(runner, send)

    async def _replay(self, runner: ChainRunner, send: Send) -> None:
        """Send the blocks after the cursor, read from the store, up to the head (the LIB
        when irreversible only) as it stands when the last read is made."""
        self._replays.replay_started()
        try:
            await self._replay_from_store(runner, send)
        finally:
            self._replays.replay_ended()

    async def _replay_from_store(self, runner: ChainRunner, send: Send) -> None:
        sub = self.sub
        replays = self._replays
        while True:
            self._check_end()
            assert self.cursor is not None
            cursor = self.cursor
            shared = replays.get(cursor.num + 1, cursor.id)
            if shared is not None:  # final, read by this or another session
                self.heavy = True
                frame = await self._frame(shared, True)
                if frame is not None:
                    await send(frame)
                self.cursor = shared.cursor
                continue
            other = replays.reading(cursor.num + 1)
            if other is not None:  # another session is reading these blocks: share its read
                await other.wait()
                continue
            done = replays.start_read(cursor.num + 1)
            try:
                batch = await runner.call(read_after, cursor, sub.irreversible_only, *_batch())
            finally:
                replays.end_read(cursor.num + 1, done)
            if batch.position == "ours":
                if not batch.blocks:
                    return
                await self._send_blocks(batch, send)
                continue
            # A fork switch popped the cursor's block since the last read: the hub has seen
            # it (the update reached the loop before this read's answer).
            known = self._popped.get(cursor.id)
            if batch.position != "elsewhere" or known is None or sub.irreversible_only:
                why = _unusable(cursor, batch, known is not None)
                raise Ended(error_frame(why), INTERNAL_ERROR)
            await self._undo(known[0], cursor.id, known[1], send)

    async def _send_blocks(self, batch: Batch, send: Send) -> None:
        self.heavy = self.heavy or bool(batch.blocks)
        # Index every final block first: sessions waiting on this read find them all.
        indexes = [
            self._replays.put(block, batch.traces.get(block.num, ()))
            if block.num <= batch.lib.num
            else self._indexes.index(block, batch.traces.get(block.num, ()))
            for block in batch.blocks
        ]
        for index in indexes:
            block = index.block
            frame = await self._frame(index, block.num <= batch.lib.num)
            if frame is not None:
                await send(frame)
            self.cursor = Cursor(block.num, block.id)

    async def _frame(self, index: BlockIndex, irreversible: bool) -> bytes | None:
        """``index``'s frame for this subscription, its contract data decoded first where
        the frame shows it (the actions stream)."""
        if self.sub.stream == "actions" and not index.decoded:
            assert self._runner is not None, "run sets it"
            await self._abis.decode(index, self._runner)
        return index.frame(self.sub, irreversible)

    async def _undo(self, num: int, block_id: BlockId, parent_id: BlockId, send: Send) -> None:
        parent = Cursor(num - 1, parent_id)
        await send(undo_frame(num, block_id, parent))
        self.cursor = parent

    async def _follow(self, update: ChainUpdate, runner: ChainRunner, send: Send) -> None:
        if self.sub.irreversible_only:
            await self._follow_final(update, runner, send)
        else:
            await self._follow_steps(update, send)

    async def _follow_steps(self, update: ChainUpdate, send: Send) -> None:
        """Reversible mode: mirror the update's steps from the cursor (see the module)."""
        view = update.view
        for step in update.events.steps:
            assert self.cursor is not None
            block = step.block
            if step.undo:
                if block.id == self.cursor.id:
                    await self._undo(block.num, block.id, block.header.previous, send)
            elif block.header.previous == self.cursor.id:
                index = self._indexes.index(block, step.traces)
                frame = await self._frame(index, block.num <= view.lib_num)
                if frame is not None:
                    await send(frame)
                self.cursor = Cursor(block.num, block.id)
        if view.lib_num > self._lib_sent:
            self._lib_sent = view.lib_num
            await send(lib_frame(Cursor(view.lib_num, view.lib_id)))
        assert self.cursor is not None
        at_head = self.cursor.num == view.head.num and self.cursor.id == view.head.id
        if at_head:
            self._in_step = True
        elif self._in_step:
            log.warning("stream_out_of_step", cursor=self.cursor.num, head=view.head.num)
            reason = "the stream lost its place in the chain; resume from the cursor"
            raise Ended(lagged_frame(self.cursor, reason), TRY_AGAIN_LATER)

    async def _follow_final(self, update: ChainUpdate, runner: ChainRunner, send: Send) -> None:
        """Irreversible only: keep the blocks the steps bring, send them as the LIB passes
        them (reading from the store what was not kept)."""
        ahead = self._ahead
        for step in update.events.steps:
            block = step.block
            if step.undo:
                kept = ahead.get(block.num)
                if kept is not None and kept.block is block:
                    del ahead[block.num]
            else:
                ahead[block.num] = step
        if len(ahead) > MAX_AHEAD:
            ahead.clear()
        assert self.cursor is not None
        lib = update.view.lib_num
        while self.cursor.num < lib:
            final_step = ahead.pop(self.cursor.num + 1, None)
            if final_step is None or final_step.block.header.previous != self.cursor.id:
                await self._replay(runner, send)  # to the LIB as the chain has it now
                break
            final = final_step.block
            frame = await self._frame(self._indexes.index(final, final_step.traces), True)
            if frame is not None:
                await send(frame)
            self.cursor = Cursor(final.num, final.id)
        for num in [n for n in ahead if n <= self.cursor.num]:
            del ahead[num]


def _batch() -> tuple[int, float, int]:
    """A replay read's bounds (the module's, read when called so that tests may shrink them)."""
    return REPLAY_BATCH, REPLAY_BUDGET_S, REPLAY_BATCH_BYTES


def _unusable(cursor: Cursor, batch: Batch, popped: bool) -> str:
    """Why a replay cannot start (or go on) from ``cursor``."""
    where = f"cursor {cursor.num} ({cursor.id.hex()[:16]}…)"
    if batch.position == "above_head":
        return f"{where} is above the head {batch.head.num}"
    if batch.position == "above_lib":
        return f"{where} is above the LIB {batch.lib.num} (irreversible_only)"
    if batch.position == "below_first":
        return f"{where} is below the first block this node holds ({batch.first_block})"
    if popped:
        return f"{where} is not on this chain (it was undone; irreversible_only has no undo)"
    return f"{where} is not on this chain"
