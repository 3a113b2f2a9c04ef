"""Every command the README and docs/*.md show in ```sh blocks names a real subcommand and
real flags of `bor-node` / `bor-wallet` / `bor-contract` (asked of the installed commands'
--help), and every script they run exists. It does not run the commands themselves: the
README's devnet, wallet and contract steps are run by the integration tests."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
TOOLS = ("bor-node", "bor-wallet", "bor-contract")


def shell_lines(path: Path) -> list[str]:
    """The commands of the file's ```sh blocks, continuation lines joined."""
    lines: list[str] = []
    for block in re.findall(r"^```sh\n(.*?)^```", path.read_text(), re.M | re.S):
        lines += [line.strip() for line in block.replace("\\\n", " ").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def commands() -> list[tuple[str, str]]:
    return [(path.name, line) for path in DOCS for line in shell_lines(path)]


@cache
def help_text(tool: str, path: tuple[str, ...]) -> str:
    done = subprocess.run(
        [str(BIN / tool), *path, "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"{tool} {' '.join(path)} --help: {done.stderr.strip()}"
    return done.stdout


def subcommands(help: str) -> set[str]:
    choices = re.search(r"positional arguments:\s*\n\s*\{([\w,-]+)\}", help)
    return set(choices.group(1).split(",")) if choices else set()


def check_tool(tool: str, args: list[str]) -> None:
    path: tuple[str, ...] = ()
    while args and args[0] in subcommands(help_text(tool, path)):
        path, args = (*path, args[0]), args[1:]
    help = help_text(tool, path)
    assert path, f"{tool} {' '.join(args[:1])}: not a subcommand"
    for arg in args:
        flag = arg.strip("[]").split("=")[0]
        if flag.startswith("--"):
            assert re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", help), f"{tool} {path}: {flag}"


def check(line: str) -> None:
    words = [w for w in shlex.split(line, comments=True) if w != "sudo"]
    for command in " ".join(shlex.quote(w) for w in words).split(" '&&' "):
        args = shlex.split(command)
        if not args:
            continue
        name = Path(args[0]).name
        if name in TOOLS:
            check_tool(name, args[1:])
        elif args[0].startswith(("./scripts/", "scripts/")):
            assert (ROOT / args[0]).exists(), args[0]
        elif name.startswith("python") and len(args) > 1 and args[1].startswith("scripts/"):
            assert (ROOT / args[1]).exists(), args[1]


@pytest.mark.parametrize(("doc", "line"), commands())
def test_the_documented_command_exists(doc: str, line: str) -> None:
    """A documented bor-node/bor-wallet line names a real subcommand and real flags; a
    documented script exists."""
    check(line)


def test_the_readme_shows_commands_of_both_tools() -> None:
    """The extraction finds the README's commands, so the test above is not vacuous."""
    lines = shell_lines(ROOT / "README.md")
    assert any(line.startswith("bor-node run") for line in lines)
    assert any(line.startswith("bor-wallet transfer") for line in lines)


def test_a_made_up_flag_is_caught() -> None:
    """A flag the command does not have fails the check."""
    with pytest.raises(AssertionError):
        check("bor-node run --no-such-flag 1")
    with pytest.raises(AssertionError):
        check("bor-node no-such-command")
