"""The node's event loop: uvloop where installed, asyncio's when BOR_EVENT_LOOP says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from genesis.testing import DevNet
from node.process import eventloop


async def _kind() -> str:
    return eventloop.running_loop_name()


def test_runs_on_uvloop_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BOR_EVENT_LOOP", raising=False)
    assert eventloop.loop_name() == eventloop.UVLOOP
    assert eventloop.run(_kind()) == eventloop.UVLOOP


def test_environment_selects_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOR_EVENT_LOOP", "asyncio")
    assert eventloop.loop_name() == eventloop.ASYNCIO
    assert eventloop.run(_kind()) == eventloop.ASYNCIO


def test_without_uvloop_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BOR_EVENT_LOOP", raising=False)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # its import fails
    assert eventloop.loop_name() == eventloop.ASYNCIO
    assert eventloop.run(_kind()) == eventloop.ASYNCIO


def test_another_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A misspelt loop is an error (one line from the CLI), not uvloop by default."""
    monkeypatch.setenv("BOR_EVENT_LOOP", "Asyncio")
    with pytest.raises(ValueError, match="BOR_EVENT_LOOP must be uvloop or asyncio"):
        eventloop.loop_name()


def test_the_node_refuses_a_misspelt_loop_in_one_line(tmp_path: Path) -> None:
    """``bor-node run`` with BOR_EVENT_LOOP=bogus: exit 2 and the reason on stderr, no
    traceback or warning."""
    (tmp_path / "genesis.json").write_text(json.dumps(DevNet.create(1).genesis.to_json()))
    env = os.environ | {"BOR_EVENT_LOOP": "bogus"}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "bor-node"), "run", "--data-dir", str(tmp_path),
         "--http-server-address", "127.0.0.1:0", "--admin-http-server-address", "",
         "--p2p-listen-endpoint", "127.0.0.1:0", "--log-level", "warning"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == "bor-node: BOR_EVENT_LOOP must be uvloop or asyncio, not 'bogus'"
