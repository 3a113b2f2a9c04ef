"""The few wasmtime C calls the runtime makes directly, past wasmtime-py's wrappers.

wasmtime-py converts every argument and result through ``Val`` objects and looks up the
function's type on each call: a call of an empty ``apply`` took 190 us through
``Func.__call__`` against 10 us through ``wasmtime_func_call_unchecked``, and a host call
pays the same toll in its trampoline. So ``apply`` is called unchecked (its signature was
checked at setcode), host functions are defined unchecked, and an instance's two exports are
fetched by name rather than by wrapping every export. wasmtime is pinned exactly
(pyproject), so these bindings cannot move.

A host callback is a plain C function of integers: it gets the address of the raw argument
array (16 bytes a value) and reads it, and the contract's memory, through ``ADDRESS_SPACE``,
a view of the process's memory; ``ctypes.string_at`` or a ctypes array per access cost a
microsecond each, which a contract's dozen host calls per action paid several times over.
Every address used with it comes from wasmtime (an argument array, a memory's base) and a
contract's offsets are checked against its memory's size first.

A host function that fails returns a trap it made itself, rather than raising into
wasmtime-py's trampoline: wasmtime-py passes a host exception back through one process-wide
slot, which two threads running contracts at once (the chain thread, a read-only RPC call)
would overwrite.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any, cast

import wasmtime
from wasmtime import _ffi as ffi

Args = int  # address of the wasmtime_val_raw_t array: the arguments, then the results
# (env, caller, args, nargs) -> a trap (``failed``) or None: what wasmtime calls, unwrapped.
HostCallback = Callable[[int, int, Args, int], int | None]

VALUE_BYTES = 16  # sizeof(wasmtime_val_raw_t): every argument slot, whatever its type

_dll = ffi.dll


def _fn(name: str, restype: Any, *argtypes: Any) -> Any:
    f = _dll[name]
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_vp, _u64 = ctypes.c_void_p, ctypes.c_uint64
_get_fuel = _fn("wasmtime_context_get_fuel", _vp, _vp, ctypes.POINTER(_u64))
_set_fuel = _fn("wasmtime_context_set_fuel", _vp, _vp, _u64)
# The same two as bare C prototypes of integers, for the host calls' fuel charge: no argtypes
# conversion and no result object, about a third cheaper a call. Neither fails on an engine
# that meters fuel (``engine.make_config``), so the error they return is not read.
_get_fuel_bare = ctypes.CFUNCTYPE(None, _vp, _vp)(ctypes.cast(_get_fuel, _vp).value or 0)
_set_fuel_bare = ctypes.CFUNCTYPE(None, _vp, _u64)(ctypes.cast(_set_fuel, _vp).value or 0)
_memory_data = _fn("wasmtime_memory_data", _vp, _vp, _vp)
_memory_size = _fn("wasmtime_memory_data_size", ctypes.c_size_t, _vp, _vp)
_trap_new = _fn("wasmtime_trap_new", _vp, ctypes.c_char_p, ctypes.c_size_t)
_instantiate = _fn(
    "wasmtime_instance_pre_instantiate",
    _vp,
    _vp,
    _vp,
    ctypes.POINTER(ffi.wasmtime_instance_t),
    ctypes.POINTER(_vp),
)
_export_get = _fn(
    "wasmtime_instance_export_get",
    ctypes.c_bool,
    _vp,
    ctypes.POINTER(ffi.wasmtime_instance_t),
    ctypes.c_char_p,
    ctypes.c_size_t,
    ctypes.POINTER(ffi.wasmtime_extern_t),
)
_call = _fn(
    "wasmtime_func_call_unchecked",
    _vp,
    _vp,
    ctypes.POINTER(ffi.wasmtime_func_t),
    ctypes.POINTER(ffi.wasmtime_val_raw_t),
    ctypes.c_size_t,
    ctypes.POINTER(_vp),
)

# (env, caller, args, nargs) -> trap or NULL; integers only, the cheapest callback ctypes has.
_CALLBACK = ctypes.CFUNCTYPE(_vp, _vp, _vp, _vp, ctypes.c_size_t)
_NO_FINALIZER = ctypes.CFUNCTYPE(None, _vp)(0)
_EXTERN_FUNC = ffi.WASMTIME_EXTERN_FUNC.value
_EXTERN_MEMORY = ffi.WASMTIME_EXTERN_MEMORY.value

_FAILED = b"host function failed"

# The process's memory as bytes: user space on x86-64 (2**47) and AArch64 (2**48), unless a
# program asks the kernel for addresses above them, which neither Python nor wasmtime does.
ADDRESS_SPACE = memoryview((ctypes.c_char * (1 << 48)).from_address(0)).cast("B")


_store_new = _fn("wasmtime_store_new", _vp, _vp, _vp, _vp)
_store_context = _fn("wasmtime_store_context", _vp, _vp)
_store_delete = _fn("wasmtime_store_delete", None, _vp)
_i64 = ctypes.c_int64
_store_limiter = _fn("wasmtime_store_limiter", None, _vp, _i64, _i64, _i64, _i64, _i64)


class Store:
    """A wasmtime store for one action, made and deleted here rather than through
    wasmtime-py's ``Store`` (whose construction, limits and fuel calls cost several
    microseconds more). Closed explicitly, so that its instance slot goes back to the pool
    as soon as the action returns."""

    __slots__ = ("_ptr", "ctx")

    def __init__(self, engine: int, *, memory_bytes: int, table_elements: int, fuel: int) -> None:
        self._ptr: int | None = _store_new(engine, None, None)
        self.ctx: int = _store_context(self._ptr)
        _store_limiter(self._ptr, memory_bytes, table_elements, 1, 1, 1)
        err = _set_fuel(self.ctx, fuel)
        assert not err, "the engine meters fuel"

    def close(self) -> None:
        if self._ptr is not None:
            _store_delete(self._ptr)
            self._ptr = None


def engine_pointer(engine: wasmtime.Engine) -> int:
    return ctypes.cast(engine.ptr(), _vp).value or 0


class Fuel:
    """Reads and sets one store's fuel (one per action: its cell is not shared). ``ctx``
    is the store's context, the same pointer wasmtime hands a host function as its caller's
    context, so host functions use it instead of asking wasmtime for it on every call."""

    __slots__ = ("_addr", "_cell", "_ref", "ctx")

    def __init__(self, ctx: int) -> None:
        self.ctx = ctx
        self._cell = _u64(0)
        self._ref = ctypes.byref(self._cell)
        self._addr = ctypes.addressof(self._cell)

    def take(self, cost: int) -> bool:
        """Take ``cost`` fuel if the store has that much left (True); else leave it none
        (False). What every host call does first, so it is one Python call, not two."""
        ctx = self.ctx
        _get_fuel_bare(ctx, self._addr)
        left = self._cell.value
        if left < cost:
            _set_fuel_bare(ctx, 0)
            return False
        _set_fuel_bare(ctx, left - cost)
        return True

    def left(self) -> int:
        _get_fuel(self.ctx, self._ref)
        return self._cell.value

    def set(self, value: int) -> None:
        _set_fuel(self.ctx, value)


class RawMemory:
    """A contract's exported memory. Its base never moves (the engine pins memories in
    place, ``engine.make_config``) and it only grows, so the size last read bounds every
    access; it is read again only when an access goes past it."""

    __slots__ = ("_ctx", "_handle", "_ref", "base", "size")

    def __init__(self, ctx: int, handle: Any) -> None:
        self._ctx = ctx
        self._handle = handle  # a wasmtime_memory_t, valid while its store lives
        self._ref = ctypes.addressof(handle)
        self.base: int = _memory_data(ctx, self._ref) or 0
        self.size: int = _memory_size(ctx, self._ref)

    def grown(self) -> int:
        """The memory's size now (after a ``memory.grow``)."""
        self.size = _memory_size(self._ctx, self._ref)
        return self.size


class Instance:
    """An instantiated contract: its ``apply`` and its memory."""

    __slots__ = ("apply", "memory")

    def __init__(self, apply: Any, memory: RawMemory) -> None:
        self.apply = apply
        self.memory = memory


def instantiate(pre: wasmtime.InstancePre, ctx: int) -> Instance:
    """Instantiate ``pre`` in the store of ``ctx``; raises wasmtime's Trap or WasmtimeError.
    The module exports ``apply`` and ``memory`` (checked at setcode)."""
    instance = ffi.wasmtime_instance_t()
    trap = _vp()
    err = _instantiate(pre.ptr(), ctx, ctypes.byref(instance), ctypes.byref(trap))
    _raise(err, trap)
    apply, memory = ffi.wasmtime_extern_t(), ffi.wasmtime_extern_t()
    found_apply = _export_get(ctx, ctypes.byref(instance), b"apply", 5, ctypes.byref(apply))
    found_memory = _export_get(ctx, ctypes.byref(instance), b"memory", 6, ctypes.byref(memory))
    # ctypes reads a c_uint8 field as an int.
    assert found_apply and cast(int, apply.kind) == _EXTERN_FUNC, "setcode checked apply"
    assert found_memory and cast(int, memory.kind) == _EXTERN_MEMORY, "setcode checked memory"
    return Instance(apply.of.func, RawMemory(ctx, memory.of.memory))


def call_apply(ctx: int, func: Any, a: int, b: int, c: int) -> None:
    """Call ``apply(a, b, c)`` (i64s); raises wasmtime's Trap or WasmtimeError."""
    args = (ffi.wasmtime_val_raw_t * 3)()
    args[0].i64 = a
    args[1].i64 = b
    args[2].i64 = c
    trap = _vp()
    err = _call(ctx, ctypes.byref(func), args, 3, ctypes.byref(trap))
    _raise(err, trap)


def _raise(err: int | None, trap: ctypes.c_void_p) -> None:
    if err:
        raise wasmtime.WasmtimeError._from_ptr(
            ctypes.cast(err, ctypes.POINTER(ffi.wasmtime_error_t))
        )
    if trap.value:
        raise wasmtime.Trap._from_ptr(ctypes.cast(trap, ctypes.POINTER(ffi.wasm_trap_t)))


def failed() -> int:
    """A new trap for a host function that failed (the runtime learns why from the action)."""
    return _trap_new(_FAILED, len(_FAILED))  # type: ignore[no-any-return]


def define(
    linker: wasmtime.Linker,
    module: str,
    name: str,
    ty: wasmtime.FuncType,
    body: HostCallback,
) -> Any:
    """Define ``module.name`` on ``linker`` as ``body``, called with wasmtime's arguments
    as they come; returns the C callback, which the caller keeps alive as long as the linker.
    ``body`` returns None, or ``failed()`` to trap (after recording why on the running
    action); it must not raise, which ctypes could only print."""
    c_callback = _CALLBACK(body)
    raw_name = name.encode()
    raw_module = module.encode()
    err = ffi.wasmtime_linker_define_func_unchecked(
        linker.ptr(),
        ctypes.create_string_buffer(raw_module),
        len(raw_module),
        ctypes.create_string_buffer(raw_name),
        len(raw_name),
        ty.ptr(),
        ctypes.cast(c_callback, ffi.wasmtime_func_unchecked_callback_t),
        None,
        _NO_FINALIZER,
    )
    if err:
        raise wasmtime.WasmtimeError._from_ptr(err)
    return c_callback
