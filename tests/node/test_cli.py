"""``bor-node``'s process set-up and its command line: every command starts on the node's
collector thresholds; bad input fails in one line; options have help; init writes the whole
commented config."""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from node.app import GC_THRESHOLDS
from node.cli import build_parser, tune_gc
from node.config.file import commented_config, read_ini
from node.config.model import OPTION_SECTIONS

BIN = Path(sys.executable).parent


def test_tune_gc_sets_the_nodes_thresholds() -> None:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        tune_gc()
        assert gc.get_threshold() == GC_THRESHOLDS
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def _bor_node(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "bor-node"), *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a command that failed as it should: no traceback."""
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr.strip()


def test_version() -> None:
    """``bor-node --version`` prints the installed package's version and exits 0."""
    done = _bor_node("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"bor-node {importlib.metadata.version('bor')}"


def test_an_unknown_run_flag_shows_runs_usage() -> None:
    """A flag ``run`` does not know is reported with run's usage, not the top level's, with
    the nearest flag it knows."""
    done = _bor_node("run", "--producer-nme", "x")
    assert done.returncode == 2
    usage, error = done.stderr.strip().splitlines()
    assert usage.startswith("usage: bor-node run ")
    assert error == (
        "bor-node run: error: unrecognized arguments: --producer-nme x"
        " (did you mean --producer-name?)"
    )


def test_every_option_of_every_command_has_help() -> None:
    """Every option and argument of every (sub)command says what it is in --help."""

    def walk(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, str]]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    yield from walk(child, f"{path} {name}")
            elif not action.help:
                yield path, action.dest

    assert list(walk(build_parser(), "bor-node")) == []


def test_a_producer_without_a_key_fails_in_one_line(tmp_path: Path) -> None:
    """``run --producer-name`` without a key fails in one line that says how to give it."""
    error = _one_line_error(_bor_node("run", "--data-dir", str(tmp_path), "--producer-name", "x"))
    assert "producer-name x needs its signing key" in error and "KEYFILE:path" in error


def test_a_config_ini_that_is_not_utf8_fails_naming_file_and_line(tmp_path: Path) -> None:
    """A byte that is not UTF-8 in config.ini fails in one line naming the file and line."""
    (tmp_path / "config.ini").write_bytes(b"log-level = info\n# caf\xe9\n")
    error = _one_line_error(_bor_node("run", "--data-dir", str(tmp_path)))
    assert f"{tmp_path / 'config.ini'}:2" in error and "not UTF-8" in error


def test_a_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    """``run`` with a signature provider's key file of mode 0644 fails in one line saying
    what to run, as ssh does; the key is never on the command line."""
    key = PrivateKey.generate()
    key_file = tmp_path / "signing.key"
    key_file.write_text(key.to_text())
    key_file.chmod(0o644)
    spec = f"{public_key_to_text(key.public_key)}=KEYFILE:{key_file}"
    args = ("run", "--data-dir", str(tmp_path), "--producer-name", "producera")
    error = _one_line_error(_bor_node(*args, "--signature-provider", spec))
    assert error.endswith(f"key file {key_file} is readable by others (mode 0644); chmod 600 it")


def test_init_writes_the_whole_commented_config(tmp_path: Path) -> None:
    """``bor-node init`` writes config.ini with every option commented out under its
    section's title; the node reads it as setting nothing; ``genesis new``'s keys are 0600."""
    made = _bor_node("genesis", "new", "--out", str(tmp_path / "g"))
    assert made.returncode == 0, made.stderr
    assert stat.S_IMODE((tmp_path / "g" / "keys.json").stat().st_mode) == 0o600
    data = tmp_path / "data"
    done = _bor_node(
        "init", "--genesis", str(tmp_path / "g" / "genesis.json"), "--data-dir", str(data)
    )
    assert done.returncode == 0, done.stderr
    ini = (data / "config.ini").read_text()
    assert ini == commented_config()
    for title, options in OPTION_SECTIONS:
        assert f" {title} " in ini
        assert all(f"\n# {o.name} =" in ini for o in options)
    assert read_ini(data / "config.ini") == {}
