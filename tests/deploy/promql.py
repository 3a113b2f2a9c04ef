"""What the deploy tests share: the metric names a PromQL expression reads, and promtool
(from Debian's ``prometheus`` package: scripts/bootstrap.sh --dev puts it in .venv/bin)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
# Every metric a node serves starts with one of these (its own, the process's, Python's).
METRIC = re.compile(r"\b(?:bor|process|python)_[a-z0-9_]+\b")


def metrics_read(expr: str) -> set[str]:
    """The metric names ``expr`` reads (label values and strings hold none of these)."""
    return set(METRIC.findall(expr))


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Run promtool; skip where it is missing, except in CI, which installs it."""
    beside = Path(sys.executable).parent / "promtool"  # where bootstrap.sh puts it
    tool = shutil.which("promtool") or (str(beside) if beside.exists() else None)
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool missing in CI: scripts/bootstrap.sh --dev installs it")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=60, check=False)
