"""The README's BPS walk-through, taken from the README and run as written in a scratch
directory: ``bor-bps up`` (on free ports) starts a devnet, the contract and three brokers, and
each command then prints what its comment says; then docs/bps.md's Python example runs against
the same deployment and prints the next message and its proof."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.conftest import free_ports
from tests.support.wait import SLOWDOWN

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## BPS") :]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def run(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    args = shlex.split(line)
    assert args[0] == "bor-bps"
    return subprocess.run(
        [str(BIN / "bor-bps"), *args[1:]], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def settled(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``line`` run again while it answers "not yet" (exit 4: the anchor not irreversible)."""
    deadline = time.monotonic() + 30 * SLOWDOWN
    while True:
        done = run(line, cwd)
        if done.returncode != 4 or time.monotonic() > deadline:
            return done
        time.sleep(0.5)


def python_example(cwd: Path, rpc: int) -> str:
    """docs/bps.md's Python block, pointed at the deployment's node, run in ``cwd``."""
    doc = (ROOT / "docs/bps.md").read_text()
    code = re.findall(r"```python\n(.*?)```", doc, re.S)[0]
    code = code.replace("http://127.0.0.1:8888", f"http://127.0.0.1:{rpc}")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_readme_bps_walkthrough(tmp_path: Path) -> None:
    up, *lines = readme_commands()
    assert up == "bor-bps up &"
    rpc, first = free_ports(3), free_ports(12)
    with (tmp_path / "up.log").open("w") as log:
        deployment = subprocess.Popen(
            [str(BIN / "bor-bps"), "up", "--rpc-port", str(rpc), "--first-port", str(first)],
            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120 * SLOWDOWN
        while "BPS is up" not in (tmp_path / "up.log").read_text():
            assert deployment.poll() is None, (tmp_path / "up.log").read_text()
            assert time.monotonic() < deadline, "bor-bps up did not come up"
            time.sleep(0.3)
        outputs = []
        for line in lines:
            done = settled(line, tmp_path) if " verify " in line else run(line, tmp_path)
            outputs.append(done)
            if "carol" not in line:
                assert done.returncode == 0, (line, done.stderr)
        by = dict(zip(lines, outputs, strict=True))
        produce = next(o for line, o in by.items() if " produce " in line)
        assert produce.stdout.split() == ["1", "2"]
        consume = next(o for line, o in by.items() if "bob consume" in line)
        assert consume.stdout.splitlines() == ["1\tfirst", "2\tsecond"]
        refused = next(o for line, o in by.items() if "carol consume" in line)
        assert refused.returncode == 1
        assert (
            refused.stderr.strip() == "bor-bps: forbidden: carol may not consume from acme/orders"
        )
        assert "Traceback" not in refused.stderr
        verify = next(o for line, o in by.items() if " verify " in line)
        assert verify.stdout.startswith("verified: offset 2 is in anchor")
        audit = next(o for line, o in by.items() if " audit " in line)
        assert '"ok": true' in audit.stdout and '"covered": {"0": 2}' in audit.stdout
        printed = python_example(tmp_path, rpc)
        assert printed.splitlines()[0] == "3 b'third'", printed
        assert "'anchor'" in printed.splitlines()[1] and "'first': 3" in printed, printed
    finally:
        if deployment.poll() is None:
            os.killpg(deployment.pid, signal.SIGINT)
        try:
            deployment.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(deployment.pid, signal.SIGKILL)
