"""Waiting with a deadline: the one way a test waits for something to happen.

Unit tests wait on the code's own events (an ``asyncio.Event``, a future, a queue) where it
has them; ``until`` and ``wait_until`` poll a condition for what only shows from outside (a
real process, a thread, a socket's state), and fail naming what never happened. ``settle``
lets every task that can run, run, for a test that checks something did *not* happen.
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
