"""Waiting with a deadline: the one way a test waits for something to happen.

Unit tests wait on the code's own events (an ``asyncio.Event``, a future, a queue) where it
has them; ``until`` and ``wait_until`` poll a condition for what only shows from outside (a
real process, a thread, a socket's state), and fail naming what never happened. ``settle``
lets every task that can run, run, for a test that checks something did *not* happen.

Where the time itself is the point, a test says so by name: ``observe`` checks that a
condition stays true through a window, ``hold`` (``hold_async``) lets a window pass that a
rate or a level is measured over, ``pace`` is the speed of a slow peer the test plays. A
bare ``sleep`` is for none of these, so a grep for one finds a wait on a guess.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

# Timeouts scale by this factor where everything runs slower (the Soft-RoCE VM emulates its
# CPU: BOR_TEST_SLOWDOWN=10 there).
SLOWDOWN = float(os.environ.get("BOR_TEST_SLOWDOWN", "1"))

# How often a condition is looked at: short against the waits of the code under test (tens
# of milliseconds and up), long enough not to take the CPU from it.
POLL_SECONDS = 0.01

T = TypeVar("T")


def wait_until(
    condition: Callable[[], object],
    timeout: float,
    what: str,
    *,
    ignoring: tuple[type[BaseException], ...] = (),
    interval: float = POLL_SECONDS,
) -> None:
    """Return once ``condition()`` is true, within ``timeout`` seconds (times ``SLOWDOWN``);
    raise AssertionError naming ``what`` if it never is. Exceptions of the ``ignoring`` types
    count as not yet (a node coming up refuses connections)."""
    deadline = time.monotonic() + timeout * SLOWDOWN
    while True:
        try:
            if condition():
                return
        except ignoring:
            pass
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout * SLOWDOWN:g} s waiting for {what}")
        time.sleep(interval)


async def until(
    condition: Callable[[], object] | Callable[[], Awaitable[object]],
    what: str,
    timeout: float = 5.0,
    *,
    interval: float = POLL_SECONDS,
) -> None:
    """The event loop's ``wait_until``: return once ``condition()`` is true, within
    ``timeout`` seconds (times ``SLOWDOWN``), the loop running meanwhile; raise
    AssertionError naming ``what`` if it never is. ``condition`` may be a coroutine function
    (a probe that asks a server)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout * SLOWDOWN

    async def holds() -> bool:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        return bool(result)

    while not await holds():
        if loop.time() >= deadline:
            raise AssertionError(f"timed out after {timeout * SLOWDOWN:g} s waiting for {what}")
        await asyncio.sleep(interval)


async def within(awaitable: Awaitable[T], what: str, timeout: float = 5.0) -> T:
    """Await ``awaitable`` (an event's ``wait()``, a future, a task), ``timeout`` seconds
    (times ``SLOWDOWN``) at most; raise AssertionError naming ``what`` if it is not done by
    then."""
    deadline = asyncio.timeout(timeout * SLOWDOWN)
    try:
        async with deadline:
            return await awaitable
    except TimeoutError:
        if deadline.expired():
            raise AssertionError(
                f"timed out after {timeout * SLOWDOWN:g} s waiting for {what}"
            ) from None
        raise


async def settle(rounds: int = 20) -> None:
    """Let every task that is ready run until it blocks: ``rounds`` passes of the event loop,
    more than the steps any task here takes before it waits on something. For a check that
    something has not happened (yet) without a sleep that guesses how long "yet" is."""
    for _ in range(rounds):
        await asyncio.sleep(0)


def observe(
    seconds: float, condition: Callable[[], object], what: str, *, interval: float = POLL_SECONDS
) -> None:
    """Check that ``condition()`` stays true for ``seconds`` (not scaled: the window is the
    claim), looking every ``interval``; raise AssertionError naming ``what`` the first time
    it is false. For a test that pins something staying so (production paused, no new log
    line), where a single look at the end would miss a change and change back."""
    start = time.monotonic()
    end = start + seconds
    while True:
        if not condition():
            raise AssertionError(f"{what} no longer held after {time.monotonic() - start:.2f} s")
        if time.monotonic() >= end:
            return
        time.sleep(min(interval, max(0.0, end - time.monotonic())))


def hold(seconds: float, why: str) -> None:
    """Let ``seconds`` pass, for a window whose length is the point of the test: a rate
    measured over it (blocks made, LIB advanced), memory let settle before a baseline, load
    left running. Not scaled by ``SLOWDOWN``: the test's arithmetic counts on the length.
    ``why`` says what the window is for, in the test and in a traceback; never a wait for
    something to happen (that is ``wait_until``)."""
    del why  # documentation at the call site
    time.sleep(seconds)


async def hold_async(seconds: float, why: str) -> None:
    """``hold`` on the event loop: let ``seconds`` pass, the loop running meanwhile, for a
    window whose length is the point (a flood left running, a silence longer than a
    deadline)."""
    del why
    await asyncio.sleep(seconds)


async def pace(seconds: float) -> None:
    """The pace of a slow or chatty peer the test plays (a byte a second, a message every
    50 ms): the delay is what is under test, the code's deadlines and keepalives measured
    against it, not a wait for anything."""
    await asyncio.sleep(seconds)
