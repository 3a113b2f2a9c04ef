"""The block applier: ordering, batching and its bound (with a fake chain service)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence

import pytest

from chain.core.consensus.block import SignedBlock
from chain.core.consensus.qc import Vote
from chain.core.consensus.votes import VoteOutcome
from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.errors import TransactionError
from chain.core.primitives.types import BlockId
from genesis.testing import DevNet
from p2p.blocksync import applier as applier_module
from p2p.blocksync.applier import AHEAD, BATCH, LOOKAHEAD, BlockApplier
from p2p.blocksync.manager import Action, FetchRange, Stage, SyncManager
from p2p.service import BlockResult, Outcome
from p2p.wire.handshake import ChainPosition
from tests.p2p.configs import sync_config
from tests.support.wait import settle, within


class FakeChain:
    """A chain service that applies any block numbered head + 1 and records every push."""

    chain_id = b"\x01" * 32

    def __init__(self) -> None:
        self.head = 0
        self.pushes: list[list[int]] = []
        self.light: list[int] = []
        self.ahead: list[list[int]] = []
        self.told: list[bool] = []  # per push: whether it was to tell of each block taken
        self.changed = asyncio.Condition()  # notified after each push

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        """Wait, 5 s at most, until ``condition`` holds after a push."""
        async with self.changed:
            await within(self.changed.wait_for(condition), what)

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    def position(self) -> ChainPosition:
        zero = BlockId(bytes(32))
        return ChainPosition(0, zero, self.head, zero)

    def producer_keys(self) -> Collection[bytes]:
        return ()

    async def id_at(self, num: int) -> BlockId | None:
        return None

    async def encoded_blocks(self, start: int, end: int) -> list[bytes]:
        return []

    async def push_blocks(
        self,
        blocks: Sequence[SignedBlock],
        light_upto: int,
        ahead: Sequence[SignedBlock] = (),
        taken: Callable[[int], None] | None = None,
    ) -> list[BlockResult]:
        self.pushes.append([b.num for b in blocks])
        self.light.append(light_upto)
        self.ahead.append([b.num for b in ahead])
        self.told.append(taken is not None)
        results = []
        for block in blocks:
            if block.num == self.head + 1:
                self.head += 1
                results.append(BlockResult(block, Outcome.APPLIED))
            else:
                results.append(BlockResult(block, Outcome.DUPLICATE))
        await self._notify()
        return results

    async def admit_transactions(
        self, txs: Sequence[SignedTransaction]
    ) -> list[TransactionError | None]:
        return [None] * len(txs)

    async def add_votes(self, votes: Sequence[Vote]) -> list[VoteOutcome]:
        return []


async def pushed_nowhere(pairs: list[tuple[str, BlockResult]]) -> None:
    """The applier's report of a push, for the tests that look at the chain instead."""


_MADE: list[SignedBlock] = []


def blocks(count: int) -> list[SignedBlock]:
    """Real signed blocks 1..count of one dev chain (only their numbers matter here)."""
    if len(_MADE) < count:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            net = DevNet.create()
            chain = net.open(tmp)
            _MADE[:] = [net.produce(chain) for _ in range(count)]
            chain.store.close()
    return _MADE[:count]


def test_blocks_arriving_out_of_order_are_pushed_in_order_from_the_head() -> None:
    """Blocks 3, 1, 2 from different peers reach the chain as one run 1, 2, 3."""
    chain = FakeChain()
    seen: list[tuple[str, int]] = []

    async def on_pushed(pairs: list[tuple[str, BlockResult]]) -> None:
        seen.extend((peer, r.block.num) for peer, r in pairs)

    async def main() -> None:
        applier = BlockApplier(chain, on_pushed, light_upto=lambda: 7)
        b1, b2, b3 = blocks(3)
        assert applier.add("p3", b3) and applier.add("p1", b1) and applier.add("p2", b2)
        assert len(applier) == 3
        task = asyncio.create_task(applier.run())
        await chain.until(lambda: chain.head >= 3, "block 3 applied")
        task.cancel()

    asyncio.run(main())
    assert chain.pushes == [[1, 2, 3]]
    assert chain.light == [7], "the light-validation bound comes with the push"
    assert seen == [("p1", 1), ("p2", 2), ("p3", 3)]


def test_a_gap_holds_back_the_blocks_above_it() -> None:
    """With block 2 missing, block 3 waits; once 2 arrives, both go."""
    chain = FakeChain()
    b1, b2, b3 = blocks(3)

    applier = BlockApplier(chain, pushed_nowhere)
    applier.add("p", b1)
    applier.add("p", b3)
    assert [b.num for _, b in applier.next_batch()] == [1]
    chain.head = 1
    assert applier.next_batch() == [], "3 waits for 2"
    applier.add("p", b2)
    assert [b.num for _, b in applier.next_batch()] == [2, 3]


def test_a_batch_holds_at_most_batch_blocks_above_the_head() -> None:
    """A long contiguous run is cut into trips of ``BATCH`` blocks."""
    chain = FakeChain()

    applier = BlockApplier(chain, pushed_nowhere)
    for block in blocks(BATCH + 5):
        applier.add("p", block)
    assert len(applier.next_batch()) == BATCH


def test_a_batch_comes_with_the_blocks_that_follow_it() -> None:
    """A push is handed the next ``AHEAD`` contiguous blocks held after its batch (for their
    signatures to be recovered while it is applied), none past a gap or for the last batch."""
    chain = FakeChain()

    async def main() -> None:
        applier = BlockApplier(chain, pushed_nowhere)
        task = asyncio.create_task(applier.run())
        for block in blocks(BATCH + 3):
            applier.add("p", block)
        await chain.until(lambda: chain.head >= BATCH + 3, "every block applied")
        task.cancel()

    asyncio.run(main())
    assert chain.pushes[0] == list(range(1, BATCH + 1))
    assert chain.ahead == [list(range(BATCH + 1, BATCH + 1 + AHEAD)), []]


def test_blocks_too_far_above_the_head_are_refused() -> None:
    """``max_ahead`` bounds memory: a block beyond head + max_ahead is not held."""
    chain = FakeChain()

    applier = BlockApplier(chain, pushed_nowhere, max_ahead=2)
    _, b2, b3 = blocks(3)
    assert applier.add("p", b2)
    assert not applier.add("p", b3)
    assert len(applier) == 1
    chain.head = 1
    assert applier.add("p", b3), "the bound moves with the head"


def test_the_same_block_from_two_peers_is_pushed_once() -> None:
    """De-duplication by id within one height."""
    chain = FakeChain()

    applier = BlockApplier(chain, pushed_nowhere)
    (b1,) = blocks(1)
    applier.add("p", b1)
    applier.add("q", b1)
    assert [peer for peer, _ in applier.next_batch()] == ["p"]


def test_the_lowest_block_held_is_told_with_its_peer() -> None:
    """What the sync manager needs to see a gap nobody asks for: the lowest block held (above
    the head, after a push) and who sent it; None when nothing is held."""
    chain = FakeChain()
    _, b2, b3 = blocks(3)

    applier = BlockApplier(chain, pushed_nowhere)
    assert applier.lowest() is None
    applier.add("q", b3)
    applier.add("p", b2)
    applier.add("q", b2)
    assert applier.lowest() == ("p", 2)


class GatedChain(FakeChain):
    """A fake chain whose pushes wait until ``release`` is set, as a batch of large blocks
    takes a second or more to apply."""

    def __init__(self) -> None:
        super().__init__()
        self.pushing = asyncio.Event()
        self.release = asyncio.Event()

    async def push_blocks(
        self,
        blocks: Sequence[SignedBlock],
        light_upto: int,
        ahead: Sequence[SignedBlock] = (),
        taken: Callable[[int], None] | None = None,
    ) -> list[BlockResult]:
        self.pushing.set()
        await self.release.wait()
        return await super().push_blocks(blocks, light_upto, ahead, taken)


def test_a_batch_being_applied_is_held_and_not_asked_for_again() -> None:
    """While the chain applies a batch, its blocks are still held: with their range delivered
    in full, the sync manager's tick (fake clock) asks for none of them again. (Left out, a
    one-peer bootstrap had most of its blocks sent twice.)"""
    chain = GatedChain()
    now = [100.0]
    sync = SyncManager(sync_config(sync_fetch_span=100, timeout=5.0), clock=lambda: now[0])

    synced = asyncio.Event()

    async def on_pushed(pairs: list[tuple[str, BlockResult]]) -> None:
        sync.chain_advanced(chain.head, chain.head)
        if sync.head >= 3:
            synced.set()

    async def main() -> tuple[list[Action], tuple[str, int] | None]:
        applier = BlockApplier(chain, on_pushed)
        assert sync.peer_position("a", lib=3, head=3) == [FetchRange("a", 1, 3)]
        for block in blocks(3):
            assert applier.add("a", block)
            sync.block_received("a", block.num)
        assert sync.ranges == [], "the range is delivered in full"
        task = asyncio.create_task(applier.run())
        await chain.pushing.wait()
        held = applier.lowest()
        now[0] += 1.0
        actions = sync.tick() + sync.applier_waits(held)
        chain.release.set()
        await within(synced.wait(), "the sync manager told of head 3")
        assert applier.lowest() is None, "applied: no longer held"
        task.cancel()
        return actions, held

    actions, held = asyncio.run(main())
    assert actions == [], "nothing is asked again"
    assert held == ("a", 1), "the batch in flight is held"
    assert sync.stage == Stage.IN_SYNC


def test_a_reader_waits_for_room_until_a_push_moves_the_head(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A block within LOOKAHEAD of the head has room at once; one further up waits until a
    pushed batch brings the head close enough, not for ROOM_WAIT."""
    monkeypatch.setattr(applier_module, "ROOM_WAIT", 30.0)
    chain = FakeChain()

    async def main() -> tuple[float, bool, float]:
        applier = BlockApplier(chain, pushed_nowhere)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await applier.room(LOOKAHEAD)
        at_once = loop.time() - started
        waiting = asyncio.create_task(applier.room(LOOKAHEAD + 2))
        await settle()
        waited = not waiting.done()
        for block in blocks(2):
            applier.add("p", block)
        task = asyncio.create_task(applier.run())
        started = loop.time()
        async with asyncio.timeout(5):
            await waiting
        task.cancel()
        return at_once, waited, loop.time() - started

    at_once, waited, after_push = asyncio.run(main())
    assert at_once < 0.1
    assert waited, "two blocks beyond LOOKAHEAD: no room before the head moves"
    assert after_push < 5 and chain.head == 2


def test_a_reader_waits_for_room_no_longer_than_room_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the chain not moving, a reader goes on after ROOM_WAIT (the peer's other
    messages, and its stall and silence clocks, are not held up longer)."""
    monkeypatch.setattr(applier_module, "ROOM_WAIT", 0.3)

    async def main() -> float:
        applier = BlockApplier(FakeChain(), pushed_nowhere)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await applier.room(LOOKAHEAD + 50)
        return loop.time() - started

    waited = asyncio.run(main())
    assert 0.25 <= waited < 3


def test_in_light_validation_a_reader_reads_one_batch_above_the_head(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In light validation, with the chain idle, a block up to BATCH above the head has room
    at once and the next one waits; in full validation LOOKAHEAD has room at once."""
    monkeypatch.setattr(applier_module, "ROOM_WAIT", 0.3)

    async def waited(light_upto: int, num: int) -> float:
        applier = BlockApplier(FakeChain(), pushed_nowhere, light_upto=lambda: light_upto)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await applier.room(num)
        return loop.time() - started

    assert asyncio.run(waited(10_000, BATCH)) < 0.1
    assert asyncio.run(waited(10_000, BATCH + 1)) >= 0.25
    assert asyncio.run(waited(0, LOOKAHEAD)) < 0.1
    assert asyncio.run(waited(0, LOOKAHEAD + 1)) >= 0.25


def test_in_light_validation_the_applier_waits_for_a_whole_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In light validation, BATCH - 1 blocks above the head are held while more come; the
    BATCH-th sends all of them to the chain in one push."""
    monkeypatch.setattr(applier_module, "FILL_QUIET", 30.0)
    monkeypatch.setattr(applier_module, "FILL_WAIT", 30.0)
    chain = FakeChain()

    async def main() -> list[list[int]]:
        applier = BlockApplier(chain, pushed_nowhere, light_upto=lambda: 10_000)
        made = blocks(BATCH)
        for block in made[:-1]:
            applier.add("p", block)
        task = asyncio.create_task(applier.run())
        await settle()
        before = list(chain.pushes)
        applier.add("p", made[-1])
        await chain.until(lambda: chain.head >= BATCH, "the whole batch applied")
        task.cancel()
        return before

    assert asyncio.run(main()) == [], "nothing pushed short of a batch while blocks come"
    assert chain.pushes == [list(range(1, BATCH + 1))]


@pytest.mark.parametrize(("quiet", "most"), [(0.1, 30.0), (30.0, 0.3)])
def test_in_light_validation_a_short_batch_goes_once_blocks_stop_coming_or_at_fill_wait(
    monkeypatch: pytest.MonkeyPatch, quiet: float, most: float
) -> None:
    """In light validation, blocks short of a batch are pushed, in one batch, once none has
    come for FILL_QUIET or once FILL_WAIT has passed, whichever is first, and not before."""
    monkeypatch.setattr(applier_module, "FILL_QUIET", quiet)
    monkeypatch.setattr(applier_module, "FILL_WAIT", most)
    chain = FakeChain()

    async def main() -> float:
        applier = BlockApplier(chain, pushed_nowhere, light_upto=lambda: 10_000)
        for block in blocks(5):
            applier.add("p", block)
        loop = asyncio.get_running_loop()
        started = loop.time()
        task = asyncio.create_task(applier.run())
        await chain.until(lambda: chain.head >= 5, "the short batch applied")
        task.cancel()
        return loop.time() - started

    took = asyncio.run(main())
    assert min(quiet, most) * 0.8 <= took < 3
    assert chain.pushes == [[1, 2, 3, 4, 5]]


class SteppedChain(FakeChain):
    """A fake chain that, like the chain thread, tells of each block of a batch as it is done
    with it (on the event loop) but publishes its head only when the whole batch is done; it
    holds the rest of a batch until ``release`` once it has taken the batch's first block."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.published = 0

    def position(self) -> ChainPosition:
        zero = BlockId(bytes(32))
        return ChainPosition(0, zero, self.published, zero)

    async def push_blocks(
        self,
        blocks: Sequence[SignedBlock],
        light_upto: int,
        ahead: Sequence[SignedBlock] = (),
        taken: Callable[[int], None] | None = None,
    ) -> list[BlockResult]:
        results = await super().push_blocks(blocks, light_upto, ahead)
        for i, block in enumerate(blocks):
            if taken is not None:
                asyncio.get_running_loop().call_soon(taken, block.num)
            if i == 0:
                await self.release.wait()
        self.published = self.head
        await self._notify()
        return results


def test_a_reader_gets_room_as_each_block_of_a_batch_is_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reader one block beyond LOOKAHEAD gets room as soon as the chain is done with the
    first block of the batch being pushed, while the rest of the batch (and the head the
    chain publishes) still waits; and room is measured from the head again after it."""
    monkeypatch.setattr(applier_module, "ROOM_WAIT", 30.0)
    chain = SteppedChain()

    async def main() -> tuple[bool, int, bool]:
        applier = BlockApplier(chain, pushed_nowhere)
        waiting = asyncio.create_task(applier.room(LOOKAHEAD + 1))
        await settle()
        held_before = not waiting.done()
        for block in blocks(3):
            applier.add("p", block)
        task = asyncio.create_task(applier.run())
        async with asyncio.timeout(5):
            await waiting
        published_then = chain.position().head_num
        chain.release.set()
        await chain.until(lambda: chain.published >= 3, "the batch's head published")
        beyond = asyncio.create_task(applier.room(3 + LOOKAHEAD + 1))
        await settle()
        held_after = not beyond.done()
        beyond.cancel()
        task.cancel()
        return held_before, published_then, held_after

    held_before, published_then, held_after = asyncio.run(main())
    assert held_before, "no block taken yet: no room"
    assert published_then == 0, "let in before the batch was done"
    assert held_after, "after the batch, room counts from the published head (3)"


def test_in_light_validation_a_reader_waits_while_a_batch_is_applied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In light validation a reader has no room while the chain applies a batch, not even
    for the block after it, and a whole batch above the new head once the chain is done."""
    monkeypatch.setattr(applier_module, "ROOM_WAIT", 30.0)
    monkeypatch.setattr(applier_module, "FILL_QUIET", 0.01)
    chain = SteppedChain()

    async def main() -> tuple[bool, float]:
        applier = BlockApplier(chain, pushed_nowhere, light_upto=lambda: 10_000)
        for block in blocks(3):
            applier.add("p", block)
        task = asyncio.create_task(applier.run())
        await chain.until(lambda: bool(chain.pushes), "the first push")
        waiting = asyncio.create_task(applier.room(4))
        await settle()
        held = not waiting.done()
        chain.release.set()
        async with asyncio.timeout(5):
            await waiting
        loop = asyncio.get_running_loop()
        started = loop.time()
        await applier.room(3 + BATCH)
        task.cancel()
        return held, loop.time() - started

    held, then = asyncio.run(main())
    assert held, "no room while the batch is applied"
    assert then < 0.1, "a batch above the published head has room at once"


def test_only_batches_with_signatures_to_recover_are_told_of_block_by_block() -> None:
    """A batch above the light-validation bound is pushed with a ``taken`` callback; one
    within it (no signature worker to keep busy) without."""
    chain = FakeChain()
    light = [2]

    async def on_pushed(pairs: list[tuple[str, BlockResult]]) -> None:
        light[0] = 0

    async def main() -> None:
        applier = BlockApplier(chain, on_pushed, light_upto=lambda: light[0])
        task = asyncio.create_task(applier.run())
        for block in blocks(2):
            applier.add("p", block)
        await chain.until(lambda: chain.head >= 2, "blocks 1 and 2 applied")
        applier.add("p", blocks(3)[2])
        await chain.until(lambda: chain.head >= 3, "block 3 applied")
        task.cancel()

    asyncio.run(main())
    assert chain.pushes == [[1, 2], [3]]
    assert chain.told == [False, True]
