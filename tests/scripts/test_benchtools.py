"""The cores a benchmark reports: those it may run on, and those its measured processes used."""

from __future__ import annotations

import os
import time

import pytest

from scripts.benchtools import cores, cores_used, tree_cpu


def busy(seconds: float) -> float:
    """Wall seconds of a busy loop on this process's one thread, run for ``seconds``."""
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        pass
    return time.perf_counter() - started


def test_available_cores_are_at_least_one_and_at_most_the_machines() -> None:
    """The cores available to this process are between one and the machine's total, and the
    line every benchmark prints names both."""
    machine = cores()
    assert 1 <= machine.available <= machine.machine
    assert (
        str(machine) == f"cores: {machine.available} available ({machine.machine} on the machine)"
    )


def test_a_busy_loop_uses_about_one_core() -> None:
    """A busy loop in a process without other threads keeps about one core busy, measured as
    its CPU seconds (``tree_cpu`` of itself) over its wall seconds."""
    cpu0 = tree_cpu(os.getpid())
    wall = busy(0.3)
    used = cores_used(tree_cpu(os.getpid()) - cpu0, wall)
    # Not above one core (clock ticks of 10 ms allow a little over); below it only as far as
    # a machine shared with other work (a loaded test run on two cores) takes the core away.
    assert 0.3 <= used <= 1.5


def test_a_sleeping_process_uses_no_core() -> None:
    """Waiting costs no CPU: a process asleep over the interval used next to no core."""
    cpu0 = tree_cpu(os.getpid())
    started = time.perf_counter()
    time.sleep(0.3)
    used = cores_used(tree_cpu(os.getpid()) - cpu0, time.perf_counter() - started)
    assert used < 0.2


def test_cores_used_is_cpu_over_wall_to_two_decimals() -> None:
    """Cores used is CPU seconds over wall seconds, rounded to 2 decimals."""
    assert cores_used(34.8, 13.1) == 2.66
    assert cores_used(0.0, 5.0) == 0.0
    assert cores_used(3.0, 2.0) == pytest.approx(1.5)
