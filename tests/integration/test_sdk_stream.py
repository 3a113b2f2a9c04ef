"""bor_client's stream against a real node that stops and starts again: the async iterator
reconnects by itself, resumes from the cursor it stored (in memory and in its file), and the
application sees every block once, in order, across the restart."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bor_client import AsyncClient
from bor_client.frames import BlockFrame
from tests.integration.conftest import Nodes
from tests.support.wait import SLOWDOWN

# Blocks seen before the node stops, and after it is back, at two a second.
BEFORE, AFTER = 4, 4


async def _follow(url: str, cursor_file: Path, seen: list[int], stop_at: asyncio.Event) -> int:
    """Blocks' numbers into ``seen`` until ``stop_at`` is set and AFTER more came; the
    number of subscriptions the stream made."""
    async with AsyncClient(url) as node, node.stream("blocks", cursor_file=cursor_file) as stream:
        async for frame in stream:
            if isinstance(frame, BlockFrame):
                seen.append(frame.cursor.num)
            if stop_at.is_set() and stream.subscriptions > 1 and len(seen) >= BEFORE + AFTER:
                return stream.subscriptions
    raise AssertionError("the stream ended")


def test_the_stream_resumes_across_a_node_restart_with_no_block_missed_or_repeated(
    nodes: Nodes, tmp_path: Path
) -> None:
    """A follower of a node that is stopped and started again sees consecutive block numbers
    from its first to its last, each once, over two or more subscriptions, and its cursor
    file holds the last block it processed."""
    node = nodes.devnet().start(wait_head=2)
    cursor_file = tmp_path / "cursor.json"
    seen: list[int] = []

    async def scenario() -> int:
        restarted = asyncio.Event()
        follower = asyncio.create_task(_follow(node.url, cursor_file, seen, restarted))
        while len(seen) < BEFORE:
            await asyncio.sleep(0.1)
        await asyncio.to_thread(node.stop)
        await asyncio.to_thread(node.start)
        restarted.set()
        return await asyncio.wait_for(follower, 60 * SLOWDOWN)

    subscriptions = asyncio.run(scenario())
    assert subscriptions >= 2
    assert seen == list(range(seen[0], seen[0] + len(seen))), seen
    stored = json.loads(cursor_file.read_text())
    assert stored["num"] == seen[-2]  # the last one is yielded, not yet processed
