"""bench_commitment records a real light import's blocks and times both implementations of
the commitment and the changes list on them, failing where the two disagree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chain.core.execution import engine
from scripts.bench_commitment import main
from scripts.make_history import make_history


@pytest.mark.skipif(not engine.available(), reason="the compiled core is not built")
def test_a_small_history_gives_every_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three blocks of 100 transfers, two rounds: the report counts their transfers and has
    a median and a range for each implementation of each."""
    make_history(tmp_path, txs=600, per_block=100, accounts=40)
    assert main([str(tmp_path), "--skip", "2", "--blocks", "3", "--rounds", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["blocks"] == 3 and report["transfers"] > 0
    for what in ("moved", "changes"):
        for name in ("native", "python"):
            low, high = report[f"{what}_{name}_range_us"]
            assert 0 < low <= report[f"{what}_{name}_us"] <= high
