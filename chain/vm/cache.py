"""Compiled contracts by code hash: a bounded LRU, shared by the chain thread, the read-only
RPC threads and the admission's compiler thread.

A node only runs machine code it compiled itself from module bytes it checked: here, or kept
by it on disk (``chain.vm.artefacts``); nothing compiled comes from a peer.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple

import wasmtime

# Compiled modules held: a 256 KiB module compiles to a few MiB of machine code, so 64 hold
# the contracts a chain actually calls in well under a GiB even at the size limit.
MAX_MODULES = 64


class Compiled(NamedTuple):
    module: wasmtime.Module
    pre: wasmtime.InstancePre  # linked to the host functions, ready to instantiate


class ModuleCache:
    """code hash -> its compiled module."""

    def __init__(self, capacity: int = MAX_MODULES) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, Compiled] = OrderedDict()

    def get(self, code_hash: bytes) -> Compiled | None:
        with self._lock:
            pre = self._entries.get(code_hash)
            if pre is not None:
                self._entries.move_to_end(code_hash)
            return pre

    def put(self, code_hash: bytes, compiled: Compiled) -> None:
        with self._lock:
            self._entries[code_hash] = compiled
            self._entries.move_to_end(code_hash)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
