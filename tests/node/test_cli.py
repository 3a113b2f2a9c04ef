"""``bor-node``'s process set-up: every command starts on the node's collector thresholds."""

from __future__ import annotations

import gc

from node.app import GC_THRESHOLDS
from node.cli import tune_gc


def test_tune_gc_sets_the_nodes_thresholds() -> None:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        tune_gc()
        assert gc.get_threshold() == GC_THRESHOLDS
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
