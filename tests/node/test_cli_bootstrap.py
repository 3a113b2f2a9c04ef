"""Starting a data dir from a snapshot with the real ``bor-node`` commands: an empty or
``init``-ed data dir, the genesis given once and kept, and one line on stderr for what
cannot be done."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chain.storage.blocklog import BlockLog, BlockLogWriter
from genesis.devnet import write_dev_genesis
from genesis.model import load_genesis
from scripts.make_history import make_history

BIN = Path(sys.executable).parent


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "bor-node"), *map(str, args)], capture_output=True, text=True, timeout=120
    )


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("bor-node: ")
    return lines[0]


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """A small history's data dir, its snapshot file and the snapshot's block."""
    out = tmp_path_factory.mktemp("bootstrap")
    made = make_history(out / "history", txs=200, per_block=5, accounts=40)
    snap = out / "snap.bin"
    created = _cli("snapshot", "create", "--data-dir", out / "history", "--to", snap)
    assert created.returncode == 0, created.stderr
    return out / "history", snap, int(made["lib"])  # type: ignore[call-overload]


def test_import_snapshot_keeps_the_genesis_given_once(
    chain: tuple[Path, Path, int], tmp_path: Path
) -> None:
    """``import-snapshot`` into a data dir that does not exist yet, with ``--genesis-json``,
    keeps that genesis in the data dir: the next command on it needs no flag."""
    history, snap, block = chain
    fresh = tmp_path / "fresh"
    genesis = history / "genesis.json"
    imported = _cli("import-snapshot", snap, "--data-dir", fresh, "--genesis-json", genesis)
    assert imported.returncode == 0, imported.stderr
    assert f"starts at block {block}" in imported.stdout
    assert (fresh / "genesis.json").read_bytes() == genesis.read_bytes()
    again = _cli("import-snapshot", snap, "--data-dir", fresh)  # no flag: the kept genesis
    assert again.returncode == 0, again.stderr
    assert f"starts at block {block}" in again.stdout


def test_import_snapshot_into_an_initialised_data_dir(
    chain: tuple[Path, Path, int], tmp_path: Path
) -> None:
    """A data dir made by ``bor-node init`` (the genesis block only) takes a snapshot, as
    ``--state-sync on`` takes it, instead of being refused as holding a chain."""
    history, snap, block = chain
    inited = tmp_path / "inited"
    init = _cli("init", "--genesis", history / "genesis.json", "--data-dir", inited)
    assert init.returncode == 0, init.stderr
    imported = _cli("import-snapshot", snap, "--data-dir", inited)
    assert imported.returncode == 0, imported.stderr
    assert f"starts at block {block}" in imported.stdout


def test_a_data_dir_without_genesis_says_how_to_give_one(
    chain: tuple[Path, Path, int], tmp_path: Path
) -> None:
    """Without a genesis anywhere, ``import-snapshot`` says in one line how to give one,
    instead of ``genesis field '(file)': cannot read …``."""
    _, snap, _ = chain
    line = _one_line(_cli("import-snapshot", snap, "--data-dir", tmp_path / "empty"))
    assert "has no genesis.json" in line and "--genesis-json" in line and "init" in line


def test_a_data_dir_of_another_history_is_refused(
    chain: tuple[Path, Path, int], tmp_path: Path
) -> None:
    """A data dir holding more than the genesis block is refused in one line, and keeps
    its chain."""
    history, snap, _ = chain
    line = _one_line(_cli("import-snapshot", snap, "--data-dir", history))
    assert "holds a chain already" in line
    assert _cli("export", "--data-dir", history, "--to", tmp_path / "h.log").returncode == 0


def test_export_of_a_data_dir_started_from_a_snapshot_names_its_first_block(
    chain: tuple[Path, Path, int], tmp_path: Path
) -> None:
    """Export from a data dir that starts at a snapshot's block, with nothing irreversible
    above it, says so in one line instead of ``block 1 is missing from the block store``."""
    history, snap, block = chain
    fresh = tmp_path / "fresh"
    genesis = history / "genesis.json"
    made = _cli("import-snapshot", snap, "--data-dir", fresh, "--genesis-json", genesis)
    assert made.returncode == 0, made.stderr
    line = _one_line(_cli("export", "--data-dir", fresh, "--to", tmp_path / "out.log"))
    assert f"block {block}" in line and "snapshot" in line and "missing" not in line


def test_a_history_that_continues_a_snapshot_is_refused_by_a_genesis_data_dir(
    chain: tuple[Path, Path, int], tmp_path: Path
) -> None:
    """``import`` of a block log that starts above block 1 into a data dir at genesis says
    which snapshot the log continues."""
    history, _, _ = chain
    full = tmp_path / "full.log"
    assert _cli("export", "--data-dir", history, "--to", full).returncode == 0
    source = BlockLog(full)
    cut = tmp_path / "cut.log"
    writer = BlockLogWriter(cut, source.chain_id, 11)
    for _, raw in source.blocks(11):
        writer.append(raw)
    writer.close()
    source.close()
    inited = tmp_path / "inited"
    init = _cli("init", "--genesis", history / "genesis.json", "--data-dir", inited)
    assert init.returncode == 0, init.stderr
    line = _one_line(_cli("import", cut, "--data-dir", inited))
    assert "continues the snapshot of block 10" in line


@pytest.mark.parametrize("command", ["import-snapshot", "run"])
def test_a_snapshot_refused_for_its_genesis_leaves_the_data_dir_for_the_right_one(
    command: str, chain: tuple[Path, Path, int], tmp_path: Path
) -> None:
    """A snapshot of another chain than --genesis-json is refused before that genesis is
    kept: the message names the file and the chain to pass, and the retry with the right
    genesis succeeds."""
    history, snap, block = chain
    wrong, _ = write_dev_genesis(tmp_path / "other", 1)
    fresh = tmp_path / "fresh5"
    snapshot = [snap] if command == "import-snapshot" else ["--snapshot", snap]
    refused = _cli(command, *snapshot, "--data-dir", fresh, "--genesis-json", wrong)
    of = load_genesis(history / "genesis.json").chain_id.hex()[:16]
    other = load_genesis(wrong).chain_id.hex()[:16]
    assert _one_line(refused) == (
        f"bor-node: {snap.name} is a snapshot of chain {of}…; {wrong} is the genesis of"
        f" {other}…: pass the genesis of chain {of}…"
    )
    assert not (fresh / "genesis.json").exists()
    retried = _cli(
        "import-snapshot", snap, "--data-dir", fresh, "--genesis-json", history / "genesis.json"
    )
    assert retried.returncode == 0, retried.stderr
    assert f"starts at block {block}" in retried.stdout
