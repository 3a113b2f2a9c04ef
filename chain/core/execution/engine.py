"""Which executor runs a block's native transactions, and which decoder reads a block's
transactions: the compiled core with the Python reference behind it, or the reference alone.

The compiled core (``_fastcore``, Cython) is built by the install when a C compiler is at
hand; where it is not built, or ``BOR_NATIVE=0`` is set, the reference alone runs. The
environment is read here, once, rather than by ``node``: the chain's tests, the benchmarks
and every node process must all honour it, and it changes how fast, never what, a block
computes (the differential tests hold the two to the same state roots, undo records and
refusals). This module is the only one that imports the extension.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

ENV = "BOR_NATIVE"
NATIVE = "native"
PYTHON = "python"

TransferPass = Callable[[Any, list[Any], int, Any, bool], int]
"""``(view, txs, start, ctx, check_auth) -> stop``: applies ``txs[start:stop]``, each one
transfer every rule admits, and leaves ``txs[stop]`` to the reference."""


Decoder = Callable[[list[Any], dict[bytes, Any], Callable[[Any], Any]], tuple[Any, ...]]
"""``(wire, kept, reference) -> transactions``: a block's signed transactions from their
wire form, each that it does not decode itself (or that is not valid) by ``reference``."""


def _compiled() -> tuple[TransferPass, Decoder] | None:
    try:
        from chain.core.execution import _fastcore, _fastdecode
    except ImportError:
        return None
    return _fastcore.apply_transfers, _fastdecode.decode_transactions


_available = _compiled()
_active: tuple[TransferPass, Decoder] | None = None


def available() -> bool:
    """Whether the compiled core was built and imports."""
    return _available is not None


def select(native: bool) -> str:
    """Use the compiled core (when built) or the reference alone; the name of the one used."""
    global _active
    _active = _available if native else None
    return name()


def name() -> str:
    """``native`` or ``python``: what runs native transactions now (for the log and metrics)."""
    return NATIVE if _active is not None else PYTHON


def transfer_pass() -> TransferPass | None:
    """The compiled transfer pass, or None on the reference alone."""
    return None if _active is None else _active[0]


def decoder() -> Decoder | None:
    """The compiled transaction decoder, or None on the reference alone."""
    return None if _active is None else _active[1]


select(os.environ.get(ENV, "1") != "0")
