"""The cores a benchmark reports: those it may run on, and those its measured processes used."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from scripts.benchtools import busiest_thread_cpu, cores, cores_used, process_cpu, tree_cpu
from tests.support.wait import hold


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
    hold(0.3, "asleep: the CPU a wait costs is what is measured")
    used = cores_used(tree_cpu(os.getpid()) - cpu0, time.perf_counter() - started)
    assert used < 0.2


def test_cores_used_is_cpu_over_wall_to_two_decimals() -> None:
    """Cores used is CPU seconds over wall seconds, rounded to 2 decimals."""
    assert cores_used(34.8, 13.1) == 2.66
    assert cores_used(0.0, 5.0) == 0.0
    assert cores_used(3.0, 2.0) == pytest.approx(1.5)


# A child whose main thread spends 0.2 CPU-s, then starts a thread that spends 0.4 CPU-s and
# stays alive until the test closes the child's stdin, and prints when both are done (CPU
# time, so a loaded machine only slows it).
TWO_THREADS = """
import sys, threading, time
def spend(s):
    end = time.thread_time() + s
    while time.thread_time() < end:
        pass
done, stop = threading.Event(), threading.Event()
def worker():
    spend(0.4)
    done.set()
    stop.wait()
spend(0.2)
thread = threading.Thread(target=worker)
thread.start()
done.wait()
print("ready", flush=True)
sys.stdin.read()
stop.set()
thread.join()
"""


def test_the_busiest_thread_is_the_one_that_worked_most() -> None:
    """Of a process whose threads spent 0.2 and 0.4 CPU-s, the busiest thread spent 0.4,
    not the process's total; a process that is gone has none."""
    child = subprocess.Popen(
        [sys.executable, "-c", TWO_THREADS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        busiest = busiest_thread_cpu(child.pid)
        total = process_cpu(child.pid)
    finally:
        child.communicate("")
    assert 0.38 <= busiest <= 0.5  # clock ticks of 10 ms
    assert total >= busiest + 0.15
    assert busiest_thread_cpu(child.pid) == 0.0
