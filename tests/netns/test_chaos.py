"""``scripts/chaos.py`` for a few minutes: random faults under load, every invariant held.

Runs only when ``BOR_CHAOS_MINUTES`` is set (CI: a few minutes; it needs root), since it takes
that long plus up to two minutes to converge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.netns.conftest import needs_netns

MINUTES = os.environ.get("BOR_CHAOS_MINUTES")
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "chaos.py"


@needs_netns
@pytest.mark.skipif(MINUTES is None, reason="set BOR_CHAOS_MINUTES to run the chaos script")
@pytest.mark.timeout(0)
def test_a_chaos_run_holds_every_invariant(tmp_path: Path) -> None:
    """Kills, pauses, restarts, cut links and partitions under commit-mode load: no LIB goes
    down, no two blocks are irreversible at one height, every acknowledged transaction is in
    the final chain, and the nodes converge after the last fault."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--minutes", str(MINUTES), "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["perturbations"] > 0 and result["acknowledged_txs"] > 0, done.stdout
    assert result["invariant_violations"] == 0, done.stdout
    assert result["lost_txs"] == 0, done.stdout
    assert result["converged"], done.stdout
    assert done.returncode == 0, done.stderr
