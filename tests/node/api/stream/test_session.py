"""One stream subscription without a socket: replay then live with no gap and no duplicate,
undo messages for a fork switch and for a cursor on an undone branch, irreversible-only
delivery, and lagged on a full inbox without the hub ever waiting."""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from chain.controller import Chain
from chain.core.consensus.block import SignedBlock
from chain.core.execution.actions import Transfer
from chain.core.primitives.types import AccountName, BlockId
from chain.events import ChainUpdate
from chain.testing import now_ms
from genesis.testing import DevNet
from node.api.stream import session as stream_session
from node.api.stream.frames import TRY_AGAIN_LATER, Cursor, IndexCache, Refused, Subscription
from node.api.stream.replay import ReplayCache, read_after
from node.api.stream.session import Session
from node.runner import ChainRunner
from tests.support import wait

A, B, C = AccountName("alice"), AccountName("bob"), AccountName("carol")


class Harness:
    """A session fed by a real chain thread the way the hub feeds it, and its frames."""

    def __init__(
        self,
        runner: ChainRunner,
        sub: Subscription,
        capacity: int = 4096,
        max_bytes: int = 0,
        replays: ReplayCache | None = None,
    ) -> None:
        self.runner = runner
        self.popped: OrderedDict[BlockId, tuple[int, BlockId]] = OrderedDict()
        self.session = Session(
            sub, capacity, IndexCache(runner.view.params), self.popped, max_bytes, replays
        )
        self.frames: list[dict[str, Any]] = []
        self.on_frame: Callable[[dict[str, Any]], Awaitable[None]] | None = None
        self.offers: list[bool] = []  # what each offer answered
        runner.subscribe(self.chain_updated)

    def chain_updated(self, update: ChainUpdate) -> None:
        for block in update.events.popped:
            self.popped[block.id] = (block.num, block.header.previous)
        self.offers.append(self.session.offer(update))

    async def send(self, frame: bytes) -> None:
        message = json.loads(frame)
        self.frames.append(message)
        if self.on_frame is not None:
            await self.on_frame(message)

    def start(self) -> asyncio.Task[stream_session.Ended]:
        return asyncio.create_task(self.session.run(self.runner, self.send))

    async def settle(self) -> None:
        """Wait until the session has sent what it was given: twice in a row, with the chain
        thread's queue run through (the session's reads answered, every update delivered)
        and the loop settled, its inbox is empty and no frame came."""

        async def quiet() -> None:
            calm = 0
            while calm < 2:
                sent = len(self.frames)
                await self.runner.call(lambda _: None)
                await wait.settle()
                calm = calm + 1 if len(self.frames) == sent and not self.session._inbox else 0

        await wait.within(quiet(), "the session idle")

    def blocks(self) -> list[tuple[str, int]]:
        """(type, block number) of every frame about a block."""
        out = []
        for f in self.frames:
            if f["type"] in ("block", "transactions", "actions", "undo"):
                num = f["block"]["num"]
                out.append((f["type"], num))
        return out


def _run(
    tmp_path: Path, net: DevNet, test: Callable[[ChainRunner], Coroutine[Any, Any, None]]
) -> None:
    runner = ChainRunner(net.open(tmp_path / "chain"))
    try:
        asyncio.run(test(runner))
    finally:
        runner.close()


def _ids(chain: Chain) -> dict[int, str]:
    return {n: chain.block_by_num(n).id.hex() for n in range(1, chain.head.num + 1)}


def test_a_block_produced_during_the_replay_is_sent_once_and_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resuming from block 3 of 12, with a block produced while each of the replay's reads
    is answered, the client gets blocks 4 to the head exactly once, in order, each the
    chain's block, and then the blocks produced live."""
    monkeypatch.setattr(stream_session, "REPLAY_BATCH", 2)
    net = DevNet.create(1)

    async def test(runner: ChainRunner) -> None:
        for _ in range(12):
            await runner.call(net.produce)
        third = await runner.call(lambda c: c.block_by_num(3))
        cursor = Cursor(3, third.id)
        harness = Harness(runner, Subscription("blocks", cursor=cursor))

        async def produce_while_replaying(frame: dict[str, Any]) -> None:
            if frame["type"] == "block" and frame["block"]["num"] < 14:
                await runner.call(net.produce)  # its update reaches the inbox mid-replay

        harness.on_frame = produce_while_replaying
        task = harness.start()
        await harness.settle()
        harness.on_frame = None
        for _ in range(2):
            await runner.call(net.produce)
        await harness.settle()
        task.cancel()
        head = runner.view.head.num
        assert harness.frames[0]["type"] == "subscribed"
        assert harness.frames[0]["resume_from"] == 4
        nums = [n for kind, n in harness.blocks() if kind == "block"]
        assert nums == list(range(4, head + 1))
        ids = await runner.call(_ids)
        sent = [f for f in harness.frames if f["type"] == "block"]
        assert all(f["block"]["id"] == ids[f["block"]["num"]] for f in sent)
        assert all(f["cursor"] == {"num": f["block"]["num"], "id": f["block"]["id"]} for f in sent)
        assert head >= 16

    _run(tmp_path, net, test)


def _fork(tmp_path: Path) -> tuple[DevNet, Chain, SignedBlock, list[SignedBlock]]:
    """x with a block of its own (a transfer to bob) and y's rival branch of three blocks
    (the first with a transfer to carol), which x switches to once it holds all three."""
    net = DevNet.create(3, blocks_per_turn=1)
    x, y = net.open(tmp_path / "x"), net.open(tmp_path / "y")
    for _ in range(3):
        y.push_block(net.produce(x), now_ms())
    base_slot = x.head.slot
    x.admit_transaction(net.tx(x, Transfer(A, B, 100)), now_ms())
    x_block = net.produce(x, base_slot + 1)
    y.admit_transaction(net.tx(y, Transfer(A, C, 7)), now_ms())
    y_blocks = [net.produce(y, base_slot + 2 + i) for i in range(3)]
    y.store.close()
    return net, x, x_block, y_blocks


def _push(block: SignedBlock) -> Callable[[Chain], object]:
    return lambda chain: chain.push_block(block, now_ms())


def test_a_fork_switch_is_sent_as_undo_then_the_new_branch(tmp_path: Path) -> None:
    """A live subscriber at x's block sees the switch to y's branch as one undo (cursor: the
    block's parent) followed by y's three blocks, in order."""
    _, x, x_block, y_blocks = _fork(tmp_path)
    runner = ChainRunner(x)

    async def test() -> None:
        harness = Harness(runner, Subscription("blocks"))
        task = harness.start()
        await harness.settle()
        for block in y_blocks:
            await runner.call(_push(block))
        await harness.settle()
        task.cancel()
        assert harness.blocks() == [("undo", x_block.num), *(("block", b.num) for b in y_blocks)]
        undo = next(f for f in harness.frames if f["type"] == "undo")
        parent = {"num": x_block.num - 1, "id": x_block.header.previous.hex()}
        assert undo["cursor"] == parent and undo["block"]["id"] == x_block.id.hex()
        assert harness.frames[-1]["type"] in ("block", "lib")

    try:
        asyncio.run(test())
    finally:
        runner.close()


def test_a_cursor_on_an_undone_branch_gets_undo_back_to_our_chain(tmp_path: Path) -> None:
    """A client whose cursor is x's block, popped by a switch it did not see, gets an undo
    of that block, then y's branch; subscribed says the stream resumes at the fork."""
    _, x, x_block, y_blocks = _fork(tmp_path)
    runner = ChainRunner(x)

    async def test() -> None:
        watcher = Harness(runner, Subscription("blocks"))  # keeps the popped ids, as the hub
        for block in y_blocks:
            await runner.call(_push(block))
        cursor = Cursor(x_block.num, x_block.id)
        harness = Harness(runner, Subscription("transactions", cursor=cursor))
        harness.popped.update(watcher.popped)
        task = harness.start()
        # subscribed, the undo and y's transactions (a replay read may still be on its way
        # when the loop looks idle), then nothing more.
        await wait.until(lambda: len(harness.frames) >= 3, "the undo and y's transactions")
        await harness.settle()
        task.cancel()
        assert harness.frames[0]["resume_from"] == x_block.num
        # y's first block holds the only transaction on the new branch.
        assert harness.blocks() == [("undo", x_block.num), ("transactions", y_blocks[0].num)]
        memos = harness.frames[2]["transactions"][0]["actions"][0]["data"]
        assert memos["recipient"] == "carol"

    try:
        asyncio.run(test())
    finally:
        runner.close()


def test_a_cursor_not_on_the_chain_and_not_remembered_is_refused(tmp_path: Path) -> None:
    """A cursor whose id is not ours at its number, and was not seen popped, is refused with
    "not on this chain"; one above the head with "above the head"."""
    net = DevNet.create(1)

    async def test(runner: ChainRunner) -> None:
        for _ in range(3):
            await runner.call(net.produce)
        stranger = BlockId((2).to_bytes(4, "big") + b"\x07" * 28)
        for cursor, why in (
            (Cursor(2, stranger), "not on this chain"),
            (Cursor(9, BlockId((9).to_bytes(4, "big") + b"\x07" * 28)), "above the head 3"),
        ):
            harness = Harness(runner, Subscription("blocks", cursor=cursor))
            with pytest.raises(Refused, match=why):
                await harness.session.run(runner, harness.send)
            assert harness.frames == []

    _run(tmp_path, net, test)


def test_irreversible_only_sends_each_final_block_once_and_no_undo(tmp_path: Path) -> None:
    """With three producers the LIB trails the head: an irreversible-only subscriber from
    genesis gets exactly the blocks up to the LIB, in order, all marked irreversible, and
    never an undo or a block above the LIB."""
    net = DevNet.create(3, blocks_per_turn=1)

    async def test(runner: ChainRunner) -> None:
        genesis = runner.view.head
        sub = Subscription("blocks", irreversible_only=True, cursor=Cursor(0, genesis.id))
        harness = Harness(runner, sub)
        for _ in range(4):
            await runner.call(net.produce)
        task = harness.start()
        await harness.settle()
        for _ in range(8):
            await runner.call(net.produce)
            await harness.settle()
        task.cancel()
        lib = runner.view.lib_num
        assert 0 < lib < runner.view.head.num
        assert harness.blocks() == [("block", n) for n in range(1, lib + 1)]
        assert all(f["irreversible"] for f in harness.frames if f["type"] == "block")

    _run(tmp_path, net, test)


def test_a_full_inbox_ends_the_session_lagged_without_blocking_the_hub(tmp_path: Path) -> None:
    """A session whose client takes nothing: offers past its capacity return at once (False
    once full), and the session ends with lagged, its cursor the last block sent, closed
    with 1013."""
    net = DevNet.create(1)

    async def test(runner: ChainRunner) -> None:
        stuck = asyncio.Event()
        harness = Harness(runner, Subscription("blocks"), capacity=4)

        async def never_returns(frame: dict[str, Any]) -> None:
            if frame["type"] == "block":
                await stuck.wait()  # the client stopped reading after its first block

        harness.on_frame = never_returns
        task = harness.start()
        await harness.settle()
        for _ in range(6):
            await runner.call(net.produce)
        await harness.settle()
        assert False in harness.offers, "the inbox filled"
        assert harness.session.ended
        stuck.set()
        ending = await asyncio.wait_for(task, 5)
        assert ending.code == TRY_AGAIN_LATER
        lagged = json.loads(ending.frame)
        first = harness.frames[1]
        assert lagged["type"] == "lagged" and lagged["cursor"] == first["cursor"]

    _run(tmp_path, net, test)


def test_an_inbox_over_its_bytes_ends_the_session_lagged(tmp_path: Path) -> None:
    """A session whose client takes nothing is cut with lagged naming
    http-stream-buffer-bytes once its inbox holds more bytes of blocks than allowed, though
    far below its message capacity."""
    net = DevNet.create(1)

    async def test(runner: ChainRunner) -> None:
        stuck = asyncio.Event()
        await runner.call(net.produce)
        size = len((await runner.call(lambda c: c.block_by_num(c.head.num))).encode())
        harness = Harness(runner, Subscription("blocks"), capacity=4096, max_bytes=3 * size)

        async def never_returns(frame: dict[str, Any]) -> None:
            if frame["type"] == "block":
                await stuck.wait()

        harness.on_frame = never_returns
        task = harness.start()
        await harness.settle()
        for _ in range(8):
            await runner.call(net.produce)
        await harness.settle()
        assert harness.session.ended and False in harness.offers
        stuck.set()
        ending = await asyncio.wait_for(task, 5)
        lagged = json.loads(ending.frame)
        assert lagged["type"] == "lagged" and "http-stream-buffer-bytes" in lagged["reason"]
        assert harness.session.heavy, "a cut session asks the hub to give memory back"

    _run(tmp_path, net, test)


def test_sessions_replaying_the_same_blocks_share_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four sessions resuming from block 1 together get the same frames as one alone, the
    store is read about once for all of them, and the shared cache is empty once they end."""
    monkeypatch.setattr(stream_session, "REPLAY_BATCH", 2)
    read: list[int] = []
    real = read_after

    def counting(*args: Any) -> Any:
        batch = real(*args)
        read.extend(b.num for b in batch.blocks)
        return batch

    monkeypatch.setattr(stream_session, "read_after", counting)
    net = DevNet.create(1)

    async def test(runner: ChainRunner) -> None:
        for _ in range(20):
            await runner.call(net.produce)
        first = await runner.call(lambda c: c.block_by_num(1))
        replays = ReplayCache(runner.view.params)
        harnesses = [
            Harness(runner, Subscription("blocks", cursor=Cursor(1, first.id)), replays=replays)
            for _ in range(4)
        ]
        tasks = [h.start() for h in harnesses]
        for _ in range(10):
            await harnesses[0].settle()
        for task in tasks:
            task.cancel()
        expected = harnesses[0].frames
        head, lib = runner.view.head.num, runner.view.lib_num
        assert [n for _, n in harnesses[0].blocks()] == list(range(2, head + 1))
        assert all(h.frames == expected for h in harnesses)
        assert lib > 10, lib
        final_reads = [n for n in read if n <= lib]
        assert len(final_reads) <= lib + 2 * 4, (lib, sorted(read))
        assert len(replays) == 0 and replays.replaying == 0

    _run(tmp_path, net, test)


def test_a_session_cancelled_mid_replay_keeps_no_frames_with_blocks(tmp_path: Path) -> None:
    """A session cancelled while it replays (its client left) raises a CancelledError whose
    traceback stops at ``run``, so no frame below it keeps a batch of blocks alive."""
    net = DevNet.create(1)

    async def test(runner: ChainRunner) -> None:
        for _ in range(6):
            await runner.call(net.produce)
        first = await runner.call(lambda c: c.block_by_num(1))
        harness = Harness(runner, Subscription("blocks", cursor=Cursor(1, first.id)))
        sending = asyncio.Event()

        async def stuck(frame: dict[str, Any]) -> None:
            if frame["type"] == "block":
                sending.set()
                await asyncio.Event().wait()

        harness.on_frame = stuck
        task = harness.start()
        await asyncio.wait_for(sending.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as raised:
            await task
        names = []
        tb = raised.value.__traceback__
        while tb is not None:
            names.append(tb.tb_frame.f_code.co_name)
            tb = tb.tb_next
        assert "run" in names and "_send_blocks" not in names and "_start" not in names, names

    _run(tmp_path, net, test)
