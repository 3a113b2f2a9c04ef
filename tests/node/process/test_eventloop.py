"""The node's event loop: uvloop where installed, asyncio's when BOR_EVENT_LOOP says so."""

from __future__ import annotations

import sys

import pytest

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
