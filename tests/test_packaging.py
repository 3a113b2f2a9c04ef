"""The repository's packaging: the license pyproject declares is the LICENSE file shipped,
its comments point at files that exist, and an editable install builds without warnings."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"


def test_the_declared_license_is_the_license_file() -> None:
    """pyproject declares Apache-2.0, and LICENSE holds that license's text."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert project["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_files_named_in_pyproject_exist() -> None:
    """Every file pyproject's text names (a comment's reference, a readme) is in the
    repository."""
    named = set(re.findall(r"[\w./-]+\.(?:py|md|sh)\b", PYPROJECT.read_text()))
    assert named, "the pattern finds pyproject's references"
    assert sorted(n for n in named if not (ROOT / n).exists()) == []


def test_an_editable_install_warns_of_nothing(tmp_path: Path) -> None:
    """pip install -e builds with a plain .pth file: no meta path finder and none of the
    warnings setuptools gives with it about the top-level package names."""
    source = tmp_path / "src"
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        (source / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    for package in ("chain", "genesis", "p2p", "node", "wallet", "bor_client"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--no-deps",
            "-v",
            "-e",
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert "meta path finder" not in output
    assert "name as your package" not in output
