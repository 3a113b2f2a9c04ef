"""Which executor runs a block's native transactions, decodes its transactions and moves the
state commitment: the compiled core with the Python reference behind it, or the reference
alone.

The compiled core (``_fastcore``, ``_fastdecode`` and ``_fasthash``, Cython) is built by the
install when a C compiler is at hand; where it is not built, or ``BOR_NATIVE=0`` is set, the
reference alone runs. The environment is read here, once, rather than by ``node``: the
chain's tests, the benchmarks and every node process must all honour it, and it changes how
fast, never what, a block computes (the differential tests hold the two to the same state
roots, undo records and refusals). This module is the only one that imports the extensions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

ENV = "BOR_NATIVE"
NATIVE = "native"
PYTHON = "python"

TransferPass = Callable[[Any, list[Any], int, Any, bool], int]
"""``(view, txs, start, ctx, check_auth) -> stop``: applies ``txs[start:stop]``, each one
transfer every rule admits, and leaves ``txs[stop]`` to the reference."""

StateMover = Callable[
    [Any, Sequence[tuple[bytes, bytes | None]], Any, Any, dict[bytes, bytes], int], None
]
"""``(lanes, changes, before, hasher, memo, bound) -> None``: ``StateHash.moved`` on a copy
of the lanes (1,024 ``uint16``, changed in place), with this thread's hasher and memo."""

StateSummer = Callable[[Any, Iterable[tuple[bytes, bytes]], Any], None]
"""``(lanes, entries, hasher) -> None``: adds the element of each entry to the lanes."""

ChangesOf = Callable[[Any], list[tuple[bytes, bytes | None]]]
"""``(view) -> changes``: ``StateView.changes``, accounts and producers encoded in C."""

FilterAdd = Callable[[bytearray, int, bytes], None]
"""``(bits, mask, value) -> None``: sets the bits of a ``TX_BLOCK`` value's ids
(``chain.storage.txfilter``)."""

BatchRecover = Callable[[list[tuple[bytes, bytes]]], list[Any]]
"""``(pairs) -> keys``: ``crypto.recover_many`` with the GIL released once for the batch."""

Decoder = Callable[[list[Any], dict[bytes, Any], Callable[[Any], Any]], tuple[Any, ...]]
"""``(wire, kept, reference) -> transactions``: a block's signed transactions from their
wire form, each that it does not decode itself (or that is not valid) by ``reference``."""


class Compiled(NamedTuple):
    """The compiled core's parts, each the reference's twin."""

    transfer_pass: TransferPass
    decoder: Decoder
    state_mover: StateMover
    state_summer: StateSummer
    changes_of: ChangesOf
    recover_batch: BatchRecover
    filter_add: FilterAdd


def _compiled() -> Compiled | None:
    try:
        from chain.core.execution import _fastcore, _fastdecode, _fasthash
        from chain.core.primitives import _fastrecover
    except ImportError:
        return None
    from chain.core.primitives.crypto import batch_recovery_parts, recover_many

    parts = batch_recovery_parts()
    return Compiled(
        _fastcore.apply_transfers,
        _fastdecode.decode_transactions,
        _fasthash.move,
        _fasthash.sum_into,
        _fasthash.changes,
        # Where coincurve lacks the internals it is reached through, the reference.
        recover_many if parts is None else _fastrecover.BatchRecovery(*parts, recover_many),
        _fastcore.filter_add,
    )


_available = _compiled()
_active: Compiled | None = None


def available() -> bool:
    """Whether the compiled core was built and imports (every part of it)."""
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
    return None if _active is None else _active.transfer_pass


def decoder() -> Decoder | None:
    """The compiled transaction decoder, or None on the reference alone."""
    return None if _active is None else _active.decoder


def state_mover() -> StateMover | None:
    """The compiled ``StateHash.moved``, or None on the reference alone."""
    return None if _active is None else _active.state_mover


def state_summer() -> StateSummer | None:
    """The compiled sum of entries' elements (``StateHash.of``), or None on the reference."""
    return None if _active is None else _active.state_summer


def changes_of() -> ChangesOf | None:
    """The compiled ``StateView.changes``, or None on the reference alone."""
    return None if _active is None else _active.changes_of


def filter_adder() -> FilterAdd | None:
    """The compiled adder of the store's transaction-id filter, where the compiled core is
    built (selected or not: the store keeps its filter whole while a test switches the
    selection), else None (and no filter: only the compiled pass asks one)."""
    return None if _available is None else _available.filter_add


def recover_batch() -> BatchRecover | None:
    """The compiled batch key recovery, or None on the reference alone."""
    return None if _active is None else _active.recover_batch


select(os.environ.get(ENV, "1") != "0")
