"""bench_compile's modules: each shape at the largest size the limits admit, so the figure it
prints is for the slowest module setcode could meet."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chain.core.primitives.params import ChainParams
from chain.vm import structure
from scripts import bench_compile

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("shape", ["loops_nested", "ifs_live", "calls", "functions"])
def test_each_shape_is_the_largest_admitted(shape: str) -> None:
    """The module built for a shape passes every limit, and one unit more would not."""
    limit = ChainParams().max_code_bytes
    n = bench_compile.largest_units(shape, limit)
    s = structure.check_structure(bench_compile._build(shape, n))
    assert s.compile_cost <= structure.MAX_COMPILE_COST
    assert not bench_compile._admitted(bench_compile._build(shape, n + 1), limit)
    if shape == "functions":
        assert s.functions == structure.MAX_FUNCTIONS


def test_the_script_ends_with_one_json_line() -> None:
    """Run as a user would, it prints every shape's figures and a JSON line of them."""
    done = subprocess.run(
        [sys.executable, "scripts/bench_compile.py", "--repeat", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(summary["shapes"]) == set(bench_compile.SHAPES)
    assert summary["worst_ms"] == max(r["ms"] for r in summary["shapes"].values())
    assert all(r["cost"] <= structure.MAX_COMPILE_COST for r in summary["shapes"].values())
