"""Runs one QEMU guest of scripts/rdma-vm-test, and runs it again once if the guest never started.

Under software emulation a VM now and then ends before its kernel reaches the guest's first
command (a CI run lost a whole submission to one such boot, the next boot of the same phase
passed). That says nothing about the code under test, so it earns one retry, said loudly. A
guest that started and then failed, or was timed out, is a real result and is never retried.

The guest proves that it started by writing the marker file (in_vm.sh does so first thing).
The VM's stdout (the guest command's output) goes to LOG; its stderr, which holds QEMU's own
messages and the guest's kernel console (vng --verbose), to LOG with `-console` before the
suffix. A boot that failed keeps both logs under `.boot1` names, so the CI log can show why.

Usage: vm_boot.py --phase NAME --marker FILE --log FILE [--cwd DIR] -- COMMAND...
Exit code: COMMAND's, from its last attempt.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ATTEMPTS = 2  # the first boot and one retry: a second failed boot in a row is worth a look


@dataclass(frozen=True, slots=True)
class Attempt:
    """How one boot of the VM ended."""

    started: bool  # the guest wrote its marker
    returncode: int
    seconds: float


def console_log(log: Path) -> Path:
    return log.with_name(f"{log.stem}-console{log.suffix}")


def keep_failed_boot(log: Path, attempt: int) -> list[Path]:
    """Moves the logs of a boot that never reached the guest aside; returns their new paths."""
    kept = []
    for path in (log, console_log(log)):
        if path.exists():
            target = path.with_name(f"{path.stem}.boot{attempt}{path.suffix}")
            path.replace(target)
            kept.append(target)
    return kept


def copy(source: IO[bytes], target: IO[bytes]) -> None:
    for chunk in iter(lambda: source.read1(65536), b""):  # type: ignore[attr-defined]
        target.write(chunk)
        target.flush()


class Stopped(Exception):
    """We were told to stop (SIGTERM): the VM got the signal too, and is not booted again."""


def boot(command: list[str], marker: Path, log: Path, cwd: Path | None) -> Attempt:
    marker.unlink(missing_ok=True)
    started = time.monotonic()
    child: subprocess.Popen[bytes] | None = None
    stopped = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopped
        stopped = True
        if child is not None:
            child.send_signal(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with log.open("wb") as out, console_log(log).open("wb") as err:
            # Pipes, not the files: QEMU opens /proc/self/fd/1 and 2 once per chardev (the
            # console, the script's ports), and each open of a file there truncates it and
            # writes from offset 0 over the others' lines; a pipe keeps every line.
            child = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd
            )
            if stopped:
                child.terminate()
            assert child.stdout is not None and child.stderr is not None
            copies = [
                threading.Thread(target=copy, args=(child.stdout, out), daemon=True),
                threading.Thread(target=copy, args=(child.stderr, err), daemon=True),
            ]
            for thread in copies:
                thread.start()
            returncode = child.wait()
            for thread in copies:
                # A guest's grandchild may hold a pipe after the VM ended; its output is not
                # worth waiting for long.
                thread.join(timeout=10)
    finally:
        signal.signal(signal.SIGTERM, previous)
    attempt = Attempt(marker.exists(), returncode, time.monotonic() - started)
    if stopped:
        raise Stopped(attempt)
    return attempt


def run(phase: str, command: list[str], marker: Path, log: Path, cwd: Path | None) -> int:
    try:
        return retried(phase, command, marker, log, cwd)
    except Stopped as stop:
        say(f"{phase}: stopped by a signal; not booted again")
        attempt: Attempt = stop.args[0]
        return attempt.returncode


def retried(phase: str, command: list[str], marker: Path, log: Path, cwd: Path | None) -> int:
    attempt = boot(command, marker, log, cwd)
    for number in range(1, ATTEMPTS):
        if attempt.started:
            break
        kept = keep_failed_boot(log, number)
        say(
            f"{phase}: the VM ended before the guest started ({attempt.seconds:.0f} s, "
            f"exit {attempt.returncode}); retrying once"
        )
        for path in kept:
            say(f"{phase}: ----- {path.name} (tail)")
            for line in tail(path, 30):
                say(f"{phase}:   {line}")
        attempt = boot(command, marker, log, cwd)
    if attempt.started:
        say(f"{phase}: guest ran, the VM ended after {attempt.seconds:.0f} s")
    else:
        say(f"{phase}: the VM ended before the guest started again ({attempt.seconds:.0f} s)")
    return attempt.returncode


def tail(path: Path, lines: int) -> list[str]:
    return path.read_text(errors="replace").splitlines()[-lines:]


def say(line: str) -> None:
    print(f"rdma-vm-test: {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", required=True)
    parser.add_argument("--marker", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--cwd", type=Path)
    parser.add_argument("command", nargs="+")
    args = parser.parse_args(argv)
    return run(args.phase, args.command, args.marker, args.log, args.cwd)


if __name__ == "__main__":
    sys.exit(main())
