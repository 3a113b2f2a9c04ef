"""The event loop the node runs on: uvloop (libuv) where it is installed, asyncio's own
otherwise or when ``BOR_EVENT_LOOP=asyncio`` asks for it.

The RPC's event loop is the node's busiest thread under many clients: uvloop's transports
and scheduler cost about a fifth less of it per request than asyncio's selector loop
(docs/benchmarks.md, single pushes), and the node uses nothing that only asyncio's loop has.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

UVLOOP = "uvloop"
ASYNCIO = "asyncio"


def loop_name() -> str:
    """The loop ``run`` will use: ``BOR_EVENT_LOOP`` if it names asyncio, else uvloop
    where it can be imported; ValueError (one line from the CLI) for another name."""
    asked = os.environ.get("BOR_EVENT_LOOP", UVLOOP)
    if asked not in (UVLOOP, ASYNCIO):
        raise ValueError(f"BOR_EVENT_LOOP must be {UVLOOP} or {ASYNCIO}, not {asked!r}")
    if asked == ASYNCIO:
        return ASYNCIO
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return ASYNCIO
    return UVLOOP


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop ``loop_name`` says (``main`` closed unstarted
    when it names none, so that the error is the one line said)."""
    try:
        name = loop_name()
    except ValueError:
        main.close()
        raise
    if name == UVLOOP:
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)


def running_loop_name() -> str:
    """The kind of loop running now (for the node's start line)."""
    module = type(asyncio.get_running_loop()).__module__
    return UVLOOP if module.startswith(UVLOOP) else ASYNCIO
