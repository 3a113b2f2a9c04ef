"""The layout stays one a newcomer can live in: no room (package directory) of more than 15
modules, no module over 600 lines, no function over 80 lines but the declaration tables, and
unit tests that wait on events, not the clock."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The product's packages and the tests. scripts/ is left out: each of its files is a command
# that docs, CI and notes name by its path.
TREES = (
    "chain",
    "genesis",
    "p2p",
    "node",
    "wallet",
    "contract_tools",
    "bor_client",
    "bps",
    "tests",
)
MOST_MODULES = 15
MOST_LINES = 600
MOST_FUNCTION_LINES = 80
# Functions that are one table of declarations (routes, AsyncAPI messages): a list to read
# down, not logic to follow; splitting them would scatter the table.
DECLARATION_TABLES = {
    ("node/api/routes.py", "route_table"),
    ("node/api/stream/asyncapi.py", "_messages"),
}


def _modules() -> list[Path]:
    return [p for tree in TREES for p in sorted((ROOT / tree).rglob("*.py"))]


def test_no_room_holds_more_than_15_modules() -> None:
    """Every package directory holds at most 15 modules, ``__init__`` included."""
    rooms: dict[Path, int] = {}
    for path in _modules():
        rooms[path.parent] = rooms.get(path.parent, 0) + 1
    assert len(rooms) > 20, "the scan finds the packages"
    crowded = {str(d.relative_to(ROOT)): n for d, n in rooms.items() if n > MOST_MODULES}
    assert crowded == {}


def test_no_module_is_over_600_lines() -> None:
    """Every module, source or test, is at most 600 lines."""
    lines = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in _modules()}
    long = {where: n for where, n in lines.items() if n > MOST_LINES}
    assert long == {}


def test_no_function_is_over_80_lines_but_the_declaration_tables() -> None:
    """Every function is at most 80 lines, except the tables named in DECLARATION_TABLES,
    which must still exist and still be long (else they leave the list)."""
    long = set()
    for path in _modules():
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(), where)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                if node.end_lineno - node.lineno + 1 > MOST_FUNCTION_LINES:
                    long.add((where, node.name))
    assert long == DECLARATION_TABLES


UNIT_TESTS = (
    "chain",
    "genesis",
    "p2p",
    "node",
    "wallet",
    "contract_tools",
    "bor_client",
    "bps",
    "scripts",
)


def _sleeps(path: Path) -> list[int]:
    """Lines of ``path`` that call a ``sleep`` with anything but a literal 0."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        name = node.func.id if isinstance(node.func, ast.Name) else name
        zero = [ast.unparse(a) for a in node.args] == ["0"]
        if name == "sleep" and not zero:
            found.append(node.lineno)
    return found


def test_unit_tests_wait_on_events_not_the_clock() -> None:
    """No unit test sleeps: it waits on a condition, an event or an injected clock, and a delay
    that is itself under test (a slow peer's pace) goes through ``tests.support.wait``."""
    sleeping = {
        str(p.relative_to(ROOT)): lines
        for tree in UNIT_TESTS
        for p in sorted((ROOT / "tests" / tree).rglob("*.py"))
        if (lines := _sleeps(p))
    }
    assert _sleeps(ROOT / "tests" / "support" / "wait.py"), "the scan finds sleep calls"
    assert sleeping == {}
