"""vm_boot's decision, on fake VMs (shell commands, no QEMU): a VM that ended before its guest
wrote the marker is booted once more, loudly, with the failed boot's logs kept; a guest that
started and failed, or a second failed boot, is not retried; a stopped VM is not booted again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import vm_boot
from tests.support.wait import wait_until

SCRIPT = Path(vm_boot.__file__)


def fake_vm(tmp_path: Path, body: str) -> list[str]:
    """A 'VM' whose boots are counted in tmp_path/boots; BOOT is this boot's number."""
    script = tmp_path / "vm.sh"
    script.write_text(
        "set -e\n"
        f'echo x >>"{tmp_path}/boots"\n'
        f'BOOT=$(wc -l <"{tmp_path}/boots")\n'
        f'MARKER="{tmp_path}/guest-started"\n' + body
    )
    return ["bash", str(script)]


def boots(tmp_path: Path) -> int:
    return len((tmp_path / "boots").read_text().splitlines())


def run(tmp_path: Path, body: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = vm_boot.run(
        "forky", fake_vm(tmp_path, body), tmp_path / "guest-started", tmp_path / "vng.log", None
    )
    return code, capsys.readouterr().err


def test_a_boot_that_never_reached_the_guest_is_retried_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = (
        'if [ "$BOOT" = 1 ]; then echo "qemu: could not load kernel" >&2; exit 1; fi\n'
        'date >"$MARKER"; echo "57 passed"; exit 0\n'
    )
    code, err = run(tmp_path, body, capsys)
    assert code == 0
    assert boots(tmp_path) == 2
    assert "forky: the VM ended before the guest started" in err
    assert "retrying once" in err
    assert "qemu: could not load kernel" in err  # the failed boot's console, in the CI log
    assert (tmp_path / "vng-console.boot1.log").read_text() == "qemu: could not load kernel\n"
    assert (tmp_path / "vng.log").read_text() == "57 passed\n"


def test_a_guest_that_started_and_failed_is_not_retried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(tmp_path, 'date >"$MARKER"; echo "1 failed"; exit 3\n', capsys)
    assert code == 3
    assert boots(tmp_path) == 1
    assert "retrying" not in err
    assert not list(tmp_path.glob("*.boot1.*"))


def test_a_second_boot_that_never_reaches_the_guest_ends_the_phase(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(tmp_path, "exit 1\n", capsys)
    assert code == 1
    assert boots(tmp_path) == 2
    assert "before the guest started again" in err


def test_a_marker_left_by_an_earlier_run_does_not_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "guest-started").write_text("stale\n")
    code, _ = run(tmp_path, "exit 1\n", capsys)
    assert code == 1
    assert boots(tmp_path) == 2


def test_a_stopped_vm_is_not_booted_again(tmp_path: Path) -> None:
    """A VM stopped by a signal while it runs is not booted again, and the script says so."""
    command = [
        sys.executable,
        str(SCRIPT),
        "--phase",
        "two-hosts/host1",
        "--marker",
        str(tmp_path / "guest-started"),
        "--log",
        str(tmp_path / "vng.log"),
        "--",
        # Bounded (10 s), so that a failed run leaves no process behind.
        *fake_vm(tmp_path, 'trap "exit 143" TERM\nfor _ in $(seq 200); do sleep 0.05; done\n'),
    ]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    wait_until((tmp_path / "boots").exists, 10, "the fake VM booted")
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=10)
    assert boots(tmp_path) == 1
    assert "stopped by a signal" in err
    assert proc.returncode != 0
