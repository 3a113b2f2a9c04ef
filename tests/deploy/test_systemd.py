"""The systemd unit deploy/systemd/bor-node.service: ``systemd-analyze verify`` accepts it
without a warning (its ExecStart pointed at the bor-node installed here), and it keeps the
hardening and the settings an operator relies on."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.promql import DEPLOY

UNIT = DEPLOY / "systemd" / "bor-node.service"
INSTALLED = "/opt/bor/bin/bor-node"  # where the unit expects BoR (docs/operator.md)


def _bor_node() -> str:
    found = shutil.which("bor-node") or str(Path(sys.executable).parent / "bor-node")
    assert Path(found).exists(), "the project is installed (scripts/bootstrap.sh)"
    return found


def _verify(text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is missing (Debian's systemd package ships it)")
    unit = tmp_path / "bor-node.service"
    unit.write_text(text)
    return subprocess.run(
        [analyze, "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_systemd_analyze_verifies_the_unit_without_a_warning(tmp_path: Path) -> None:
    """The unit, its ExecStart on the installed bor-node, verifies cleanly; the same unit with
    a mistyped setting draws a warning, so the check is not blind."""
    text = UNIT.read_text()
    assert INSTALLED in text
    done = _verify(text.replace(INSTALLED, _bor_node()), tmp_path)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")
    broken = _verify(text.replace(INSTALLED, _bor_node()).replace("=strict", "=strickt"), tmp_path)
    assert "ProtectSystem" in broken.stderr or "protect system" in broken.stderr


def test_the_unit_runs_the_node_sandboxed_as_its_own_user() -> None:
    """Its own user, a read-only system but the state directory, no new privileges, restart
    on failure, a file-descriptor limit the block store needs, and the node on /var/lib/bor."""
    unit = configparser.ConfigParser(interpolation=None, strict=True)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string(UNIT.read_text())
    service = unit["Service"]
    assert service["User"] == "bor"
    assert service["ProtectSystem"] == "strict"
    assert service["NoNewPrivileges"] == "yes"
    assert service["StateDirectory"] == "bor"
    assert service["ReadWritePaths"] == "/var/lib/bor"
    assert service["Restart"] == "on-failure"
    assert int(service["LimitNOFILE"]) >= 4096
    assert service["ExecStart"] == f"{INSTALLED} run --data-dir /var/lib/bor"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
