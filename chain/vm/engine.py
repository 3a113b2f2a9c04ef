"""The one wasmtime ``Engine`` of the process, configured so every node executes alike.

Consensus depends on every node computing the same result and the same fuel for the same
call, so everything that could differ by hardware or by wasmtime default is pinned here:
fuel metering on, NaNs canonicalized (a float operation's NaN bits otherwise depend on the
CPU), no threads, no SIMD (relaxed SIMD is nondeterministic by design), and none of the
proposals our contracts do not use (GC, exceptions, tail calls, memory64, multi-memory).
The stack limit is fixed so that "stack overflow" happens at the same depth on every node
(with the same wasmtime version and CPU architecture).
"""

from __future__ import annotations

import threading

import wasmtime
from wasmtime import _ffi as ffi

# Wasm stack one action may use. wasmtime's default is 512 KiB; a contract needs little
# (AssemblyScript keeps its data in linear memory), and a smaller stack makes a runaway
# recursion trap sooner and cheaper.
MAX_WASM_STACK = 256 * 1024

# The pooling allocator: instance slots made once and reused, so an action's instantiation is
# no mmap, and its teardown no munmap, of a fresh memory. Measured on a token transfer, the
# on-demand allocator spent about 120 us per action there (mapping, first-touch faults and
# unmapping); a warm slot takes about 10 us. wasmtime resets a slot's memory, globals and
# table to the module's initial state before reuse, so no action sees another's data.
#
# Instances alive at once: the chain thread runs one action at a time (a store is closed
# before the inline actions it sent run) and read-only calls each hold one, at most
# POOL_INSTANCES - 1 of them (``runtime``), so the chain thread never finds the pool full.
POOL_INSTANCES = 64
# Largest linear memory a slot holds: genesis admits max_memory_pages up to 256 (16 MiB); a
# chain's own, smaller limit is the store's.
MAX_MEMORY_PAGES = 256
PAGE = 64 * 1024
# Bytes of a slot's memory reset by memset rather than given back to the OS on reuse: a
# contract touches its first pages on every action, and re-faulting them costs more.
KEEP_RESIDENT = 128 * 1024
# Metadata of one instance (globals, function references, table pointers): 16 MiB leaves
# room for anything a 1 MiB module (genesis's max_code_bytes cap) can declare.
MAX_INSTANCE_BYTES = 16 << 20
# Table elements a contract may have (its function table, for indirect calls). AssemblyScript
# needs one entry per function called indirectly; this is far more than a contract has.
MAX_TABLE_ELEMENTS = 10_000

_lock = threading.Lock()
_engine: wasmtime.Engine | None = None


def make_config() -> wasmtime.Config:
    config = wasmtime.Config()
    config.consume_fuel = True
    config.cranelift_nan_canonicalization = True
    config.wasm_threads = False
    config.wasm_simd = False
    config.wasm_relaxed_simd = False
    # Reference types stay on: wasmtime's C API enables component-model-async by default,
    # which needs them, and they are deterministic (without GC there is nothing to collect).
    config.wasm_function_references = False
    config.wasm_gc = False
    config.wasm_exceptions = False
    config.wasm_memory64 = False
    config.wasm_multi_memory = False
    config.wasm_tail_call = False
    config.wasm_wide_arithmetic = False
    config.wasm_custom_page_sizes = False
    config.wasm_stack_switching = False
    config.max_wasm_stack = MAX_WASM_STACK
    config.cranelift_opt_level = "speed"
    # A memory never moves when it grows (it grows inside its reservation), so the host
    # functions may keep its base address for the whole action.
    config.memory_may_move = False
    _pooling(config)
    return config


def _pooling(config: wasmtime.Config) -> None:
    pool = ffi.wasmtime_pooling_allocation_config_new()
    try:
        ffi.wasmtime_pooling_allocation_config_total_core_instances_set(pool, POOL_INSTANCES)
        ffi.wasmtime_pooling_allocation_config_total_memories_set(pool, POOL_INSTANCES)
        ffi.wasmtime_pooling_allocation_config_total_tables_set(pool, POOL_INSTANCES)
        ffi.wasmtime_pooling_allocation_config_max_memories_per_module_set(pool, 1)
        ffi.wasmtime_pooling_allocation_config_max_tables_per_module_set(pool, 1)
        ffi.wasmtime_pooling_allocation_config_max_memory_size_set(pool, MAX_MEMORY_PAGES * PAGE)
        ffi.wasmtime_pooling_allocation_config_table_elements_set(pool, MAX_TABLE_ELEMENTS)
        ffi.wasmtime_pooling_allocation_config_max_core_instance_size_set(pool, MAX_INSTANCE_BYTES)
        ffi.wasmtime_pooling_allocation_config_linear_memory_keep_resident_set(pool, KEEP_RESIDENT)
        ffi.wasmtime_pooling_allocation_strategy_set(config.ptr(), pool)
    finally:
        ffi.wasmtime_pooling_allocation_config_delete(pool)


def engine() -> wasmtime.Engine:
    """The process's engine, made on first use (modules are tied to the engine that built
    them, so there is exactly one)."""
    global _engine
    with _lock:
        if _engine is None:
            _engine = wasmtime.Engine(make_config())
        return _engine
