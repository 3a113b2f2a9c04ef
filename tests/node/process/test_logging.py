"""Log events are snake_case names with key-values, never prose."""

from __future__ import annotations

import ast
import re
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[3]
_PACKAGES = ("chain", "genesis", "node", "p2p", "wallet")
_LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "msg"}


def _events(path: Path) -> list[tuple[int, str]]:
    """(line, event) of every log call in ``path`` whose event is a string literal."""
    found = []
    for call in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            continue
        receiver = ast.unparse(call.func.value)
        if call.func.attr not in _LEVELS or "log" not in receiver.lower():
            continue
        first = call.args[0] if call.args else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.append((call.lineno, first.value))
    return found


def test_log_events_are_snake_case() -> None:
    """Every literal log event of ours is a snake_case name (``snapshot_written``, not
    "snapshot written"), so that logs can be filtered by event."""
    events = [
        (f"{path.relative_to(_ROOT)}:{line}", event)
        for package in _PACKAGES
        for path in sorted((_ROOT / package).rglob("*.py"))
        for line, event in _events(path)
    ]
    assert any(event == "node_started" for _, event in events)  # the scan finds log calls
    prose = [(where, e) for where, e in events if re.fullmatch("[a-z][a-z0-9_]*", e) is None]
    assert prose == []
