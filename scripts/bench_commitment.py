"""Measure the compiled state commitment (``StateHash.moved``) and changes list
(``StateView.changes``) against the Python reference, on a real history's blocks.

    python scripts/bench_commitment.py HISTORY_DIR [--skip 100] [--blocks 40] [--rounds 9]

HISTORY_DIR holds history.log and genesis.json (``scripts/make_history.py`` makes one). The
history is imported, light, into a temporary data dir, recording each block's changes, the
committed value of each changed key and the parent's commitment. Then, in this one process,
the two implementations alternate (``--rounds`` each, the first of each round swapped every
round) over blocks ``skip+1 .. skip+blocks``: ``moved`` with this thread's memo emptied and
filled again by the 10 blocks before them, and ``changes`` of views holding those blocks'
writes (accounts and producers decoded from the recorded changes). Every round checks that
both give the same commitments, each the next block's parent's, and the same changes. One
JSON line: microseconds a transfer, median and range of each.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.core import block_transition
from chain.core.execution import engine, state_hash
from chain.core.execution.state import Changes, StateView, decode_account, decode_producer
from chain.core.execution.state_hash import StateHash
from chain.core.primitives import schema
from node.cli import main as bor_node

WARM = 10  # blocks before the measured ones, to fill the memo as a running node has it

Block = tuple[StateHash, Changes, dict[bytes, bytes | None]]


def record(history: Path) -> list[Block]:
    """Every block's (parent commitment, changes, committed values) of a light import."""
    blocks: list[Block] = []
    moved = block_transition.next_state_hash

    def recording(
        parent: StateHash, changes: Changes, originals: Mapping[bytes, bytes | None]
    ) -> StateHash:
        blocks.append((parent, list(changes), {k: originals[k] for k, _ in changes}))
        return moved(parent, changes, originals)

    data = Path(tempfile.mkdtemp(prefix="bench-commitment-"))
    try:
        shutil.copy(history / "genesis.json", data / "genesis.json")
        block_transition.next_state_hash = recording
        args = ["import", str(history / "history.log"), "--data-dir", str(data)]
        with contextlib.redirect_stdout(sys.stderr):  # stdout: the report alone
            bor_node([*args, "--validation-mode", "light"])
    finally:
        block_transition.next_state_hash = moved
        shutil.rmtree(data)
    return blocks


def _view(changes: Changes) -> StateView:
    """A view holding ``changes`` as a block's writes: accounts and producers decoded."""
    view = StateView({}.get)  # type: ignore[arg-type]  # never read: only its writes
    decoders = {schema.ACCOUNT: decode_account, schema.PRODUCER: decode_producer}
    for key, value in changes:
        decode = next((d for p, d in decoders.items() if key.startswith(p)), None)
        view.written()[key] = value if value is None or decode is None else decode(value)
    return view


def _transfers(blocks: list[Block]) -> int:
    return sum(
        len(value) // schema.TX_BLOCK_ITEM
        for _, changes, _ in blocks
        for key, value in changes
        if key.startswith(schema.TX_BLOCK) and value is not None
    )


def _moving(warm: list[Block], timed: list[Block], after: StateHash | None) -> float:
    """Seconds to move the commitment through ``timed`` (the memo emptied, then ``warm``)."""
    state_hash._scratch.memo.clear()
    for parent, changes, before in warm:
        parent.moved(changes, before)
    start = time.perf_counter()
    out = [parent.moved(changes, before) for parent, changes, before in timed]
    seconds = time.perf_counter() - start
    parents = [parent for parent, _, _ in timed[1:]] + ([] if after is None else [after])
    assert out[: len(parents)] == parents, "a commitment is not the next block's parent's"
    return seconds


def _listing(views: list[StateView], blocks: list[Block], native: bool) -> float:
    changes_of = engine.changes_of() if native else None
    listed: Callable[[StateView], Changes] = StateView.changes if changes_of is None else changes_of
    start = time.perf_counter()
    out = [listed(view) for view in views]
    seconds = time.perf_counter() - start
    assert out == [changes for _, changes, _ in blocks], "the changes differ"
    return seconds


def measure(blocks: list[Block], skip: int, count: int, rounds: int) -> dict[str, Any]:
    """Both implementations alternated ``rounds`` times over ``blocks[skip:skip+count]``."""
    timed = blocks[skip : skip + count]
    warm = blocks[max(0, skip - WARM) : skip]
    after = blocks[skip + count][0] if skip + count < len(blocks) else None
    views = [_view(changes) for _, changes, _ in timed]
    transfers = _transfers(timed)
    was = engine.name() == engine.NATIVE
    seen: dict[str, list[float]] = {}
    try:
        for r in range(rounds):
            for native in (True, False) if r % 2 == 0 else (False, True):
                engine.select(native)
                name = "native" if native else "python"
                for what, seconds in (
                    ("moved", _moving(warm, timed, after)),
                    ("changes", _listing(views, timed, native)),
                ):
                    seen.setdefault(f"{what}_{name}", []).append(seconds / transfers * 1e6)
    finally:
        engine.select(was)
    report: dict[str, Any] = {"blocks": len(timed), "transfers": transfers, "rounds": rounds}
    for key, values in seen.items():
        report[f"{key}_us"] = round(statistics.median(values), 3)
        report[f"{key}_range_us"] = [round(min(values), 3), round(max(values), 3)]
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("history", type=Path, help="a dir with history.log and genesis.json")
    parser.add_argument("--skip", type=int, default=100, help="blocks before the measured")
    parser.add_argument("--blocks", type=int, default=40, help="blocks measured")
    parser.add_argument("--rounds", type=int, default=9, help="runs of each implementation")
    args = parser.parse_args(argv)
    if not engine.available():
        print("the compiled core is not built (pip install -e .)", file=sys.stderr)
        return 1
    blocks = record(args.history)
    if len(blocks) <= args.skip:
        print(f"the history has {len(blocks)} blocks, not more than --skip", file=sys.stderr)
        return 1
    print(json.dumps(measure(blocks, args.skip, args.blocks, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
