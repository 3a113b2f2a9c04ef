"""``ContractRuntime``: the ``ContractHost`` the chain hands to its state transition.

Each action runs in a fresh ``Store`` (its own memory, at most ``max_memory_pages``, in a slot
of the engine's instance pool, reset to the module's initial state) with the transaction's
remaining fuel, through the process's one linker; the store is closed when the action
returns, and the inline actions it sent then run, one level deeper, on the same view and
fuel. Whatever the contract does wrong leaves as ``ContractError`` or ``ResourceExceeded``
naming the contract and action; the caller drops the view, so a failed transaction leaves
nothing behind. What goes wrong with this node (wasmtime failing to instantiate for a reason
that is no trap) leaves as ``RuntimeFault``, which is no verdict on the transaction.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, NamedTuple

import structlog
import wasmtime

from chain.abi_check import check_abi
from chain.core.execution.contracts import (
    ActionTrace,
    ContractCall,
    TxTrace,
    name_to_u64,
    read_only_actions,
)
from chain.core.execution.state import StateView
from chain.core.execution.transition import Context, process_transfer
from chain.core.primitives import schema
from chain.core.primitives.encoding import unpack
from chain.core.primitives.errors import (
    ChainError,
    ContractError,
    EncodingError,
    OutOfFuel,
    ReadOnlyAction,
    ResourceExceeded,
    TransactionError,
)
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName
from chain.vm import host, raw
from chain.vm.artefacts import ArtefactDir
from chain.vm.cache import Compiled, ModuleCache
from chain.vm.engine import MAX_MEMORY_PAGES, MAX_TABLE_ELEMENTS, PAGE, POOL_INSTANCES, engine
from chain.vm.errors import RuntimeFault
from chain.vm.validate import (
    HOST_API,
    check_bytes,
    check_interface,
    check_links,
    code_hash,
    compile_module,
)

log = structlog.get_logger("contracts")

# Fuel for making an action's store and instance, charged before they are made (inline
# actions too): about what 50,000 wasm instructions cost, as a warm pooled instantiation
# and the store around it take a few tens of microseconds of the node's time.
ACTION_FUEL = 50_000

_TRAPS: dict[wasmtime.TrapCode, str] = {
    wasmtime.TrapCode.STACK_OVERFLOW: "stack overflow",
    wasmtime.TrapCode.MEMORY_OUT_OF_BOUNDS: "out of bounds memory access",
    wasmtime.TrapCode.HEAP_MISALIGNED: "misaligned memory access",
    wasmtime.TrapCode.TABLE_OUT_OF_BOUNDS: "undefined table element",
    wasmtime.TrapCode.INDIRECT_CALL_TO_NULL: "uninitialized table element",
    wasmtime.TrapCode.BAD_SIGNATURE: "indirect call type mismatch",
    wasmtime.TrapCode.INTEGER_OVERFLOW: "integer overflow",
    wasmtime.TrapCode.INTEGER_DIVISION_BY_ZERO: "integer divide by zero",
    wasmtime.TrapCode.BAD_CONVERSION_TO_INTEGER: "invalid conversion to integer",
    wasmtime.TrapCode.UNREACHABLE: "unreachable",
}


# Verdicts of ``check_bytes`` remembered (about 80 bytes each).
CHECKED_KEPT = 4096

# Read-only calls (RPC threads) running at once: every other slot of the instance pool, so
# the chain thread always finds one free.
_READONLY_SLOTS = threading.BoundedSemaphore(POOL_INSTANCES - 1)


class _Run(NamedTuple):
    """What every action of one run shares: its fuel budget (the trace's total may reach it),
    the chain's limits, the block, and whether it is a read-only call."""

    budget: int
    params: ChainParams
    block_time_s: int
    block_num: int
    readonly: bool


class _Parts(NamedTuple):
    engine: wasmtime.Engine
    engine_ptr: int
    linker: wasmtime.Linker
    callbacks: Any  # the host functions' ctypes callbacks, kept alive with the linker


class ContractRuntime:
    """Validates, compiles (once per code hash) and runs contracts; safe to share between
    the chain thread and read-only RPC threads."""

    def __init__(
        self, cache: ModuleCache | None = None, artefacts: ArtefactDir | None = None
    ) -> None:
        self._parts: _Parts | None = None
        self._start_lock = threading.Lock()
        self._cache = cache if cache is not None else ModuleCache()
        self._artefacts = artefacts
        self._lock = threading.Lock()  # one compilation of a module at a time
        # (code hash, max_code_bytes, max_memory_pages) whose bytes passed ``check_bytes``:
        # a pure function of them, so a module checked at admission is not read again when
        # its block is applied.
        self._checked: OrderedDict[tuple[bytes, int, int], None] = OrderedDict()

    def _ready(self) -> _Parts:
        """The engine and linker, made on first use: a node that never meets a contract
        never reserves the instance pool's address space (``engine``)."""
        parts = self._parts
        if parts is None:
            with self._start_lock:
                if self._parts is None:
                    eng = engine()
                    linker, callbacks = host.make_linker(eng, HOST_API)
                    self._parts = _Parts(eng, raw.engine_pointer(eng), linker, callbacks)
                parts = self._parts
        return parts

    # --- ContractHost ----------------------------------------------------------------------

    def validate(self, code: bytes, params: ChainParams) -> bytes:
        digest = self._check(code, params)
        self._try_instantiate(self._compiled(digest, code).pre, params)
        return digest

    def validate_abi(self, abi: str) -> None:
        if not abi:
            return
        try:
            check_abi(abi)
        except EncodingError as err:
            raise ContractError(f"setcode: the ABI is refused: {err}") from None

    def precompile(self, code: bytes, params: ChainParams) -> None:
        """Check and compile a module that a transaction offers to ``setcode``, so that its
        ``validate`` on the chain thread (at admission, and when its block is applied) finds
        it compiled. For a thread other than the chain's; a module that ``validate`` would
        refuse is left for it to refuse."""
        try:
            self._check(code, params)
        except ContractError:
            return
        except RuntimeFault as err:
            log.warning("precompile_failed", why=str(err))

    def _check(self, code: bytes, params: ChainParams) -> bytes:
        """``code``'s hash once it passed setcode's checks but the trial instantiation,
        compiling it if it was not; ContractError if it does not."""
        parts = self._ready()
        digest = code_hash(code)
        key = (digest, params.max_code_bytes, params.max_memory_pages)
        with self._lock:
            checked = key in self._checked
        if not checked:
            check_bytes(parts.engine, code, params)
        check_interface(self._compiled(digest, code).module, params)
        if not checked:
            with self._lock:
                self._checked[key] = None
                if len(self._checked) > CHECKED_KEPT:
                    self._checked.popitem(last=False)
        return digest

    def _compiled(self, digest: bytes, code: bytes) -> Compiled:
        """``code`` compiled: from the cache, from the artefacts on disk, or compiled now
        (and kept on disk); ContractError if the engine refuses it."""
        compiled = self._cache.get(digest)
        if compiled is not None:
            return compiled
        parts = self._ready()
        with self._lock:
            compiled = self._cache.get(digest)
            if compiled is not None:
                return compiled
            module = self._artefacts.load(parts.engine, digest) if self._artefacts else None
            fresh = module is None
            if module is None:
                module = compile_module(parts.engine, code)
            check_links(module)  # before linking, which would refuse it less clearly
            try:
                pre = parts.linker.instantiate_pre(module)
            except wasmtime.WasmtimeError as err:
                raise RuntimeFault(f"could not link a module: {err}") from err
            compiled = Compiled(module, pre)
            self._cache.put(digest, compiled)
        if fresh and self._artefacts is not None:
            self._artefacts.store(digest, module)
        return compiled

    def _try_instantiate(self, pre: wasmtime.InstancePre, params: ChainParams) -> None:
        """Instantiate once, in a store of its own with the chain's limits, so that a module
        whose data or element segments do not fit is refused at setcode rather than failing
        every action later. Instantiation runs no code of the contract (no start function)
        and spends no fuel; a store needs some to begin with."""
        store = raw.Store(
            self._ready().engine_ptr,
            memory_bytes=params.max_memory_pages * PAGE,
            table_elements=MAX_TABLE_ELEMENTS,
            fuel=ACTION_FUEL,
        )
        try:
            raw.instantiate(pre, store.ctx)
        except wasmtime.Trap as err:
            raise ContractError(
                f"module cannot be instantiated (a data or element segment does not fit): "
                f"{_trap_name(err)}"
            ) from None
        except wasmtime.WasmtimeError as err:
            raise RuntimeFault(f"could not instantiate a module to check it: {err}") from err
        finally:
            store.close()

    def run(
        self,
        view: StateView,
        call: ContractCall,
        trace: TxTrace,
        *,
        params: ChainParams,
        block_time_s: int,
        block_num: int,
        fuel_left: int,
    ) -> None:
        budget = trace.fuel + fuel_left
        output = sum(map(_output_bytes, trace.actions))
        run = _Run(budget, params, block_time_s, block_num, False)
        self._action(view, call, 0, trace, run, output)

    def run_readonly(
        self,
        view: StateView,
        call: ContractCall,
        *,
        params: ChainParams,
        block_time_s: int,
        block_num: int,
        fuel_left: int,
    ) -> TxTrace:
        """Run ``call`` refusing every write (tables, inline actions, notifications), on a
        child of ``view`` that is dropped; the trace holds its console, events and return
        value."""
        if not _READONLY_SLOTS.acquire(blocking=False):
            raise ResourceExceeded(f"{call.contract}::{call.action}: every read-only slot is busy")
        try:
            trace = TxTrace()
            child = view.child()
            run = _Run(fuel_left, params, block_time_s, block_num, True)
            self._action(child, call, 0, trace, run, 0)
            return trace
        finally:
            _READONLY_SLOTS.release()

    # --- one action ------------------------------------------------------------------------

    def _action(
        self,
        view: StateView,
        call: ContractCall,
        depth: int,
        trace: TxTrace,
        run: _Run,
        output: int,
    ) -> int:
        """Run ``call``, then the accounts it notified, then the inline actions all of them
        sent, each one level deeper (Antelope's order); ``output`` is the transaction's trace
        output before it, and the total after it is returned."""
        if depth > 0 and call.contract == host.NATIVE_TOKEN:  # an inline native transfer
            where, limit = f"{call.contract}::{call.action}", run.params.max_inline_depth
            if depth > limit:
                raise ResourceExceeded(f"{where}: inline depth {depth} past the limit {limit}")
            if run.budget - trace.fuel - ACTION_FUEL < 0:
                raise OutOfFuel(f"{where}: out of fuel (max_tx_fuel {run.params.max_tx_fuel})")
            self._native(view, call, depth, trace, run.params, run.block_time_s, run.block_num)
            return output
        act = self._execute(view, call, call.contract, depth, trace, run, output)
        assert act is not None, "the contract's own code runs or _execute raised"
        output = act.output
        inline = list(act.inline)
        recipients = list(act.recipients)
        seen = {call.contract, *recipients}
        i = 0
        while i < len(recipients):  # grows as notified handlers notify more (each once)
            notified = self._execute(view, call, recipients[i], depth + 1, trace, run, output)
            i += 1
            if notified is None:
                continue  # no contract there: recorded in the trace only
            output = notified.output
            inline += notified.inline
            for account in notified.recipients:
                if account not in seen:
                    seen.add(account)
                    recipients.append(account)
            if len(recipients) > host.MAX_RECIPIENTS:
                raise ResourceExceeded(
                    f"{call.contract}::{call.action}: more than {host.MAX_RECIPIENTS} "
                    "accounts notified"
                )
        for sent in inline:
            output = self._action(view, sent, depth + 1, trace, run, output)
        return output

    def _execute(
        self,
        view: StateView,
        call: ContractCall,
        receiver: AccountName,
        depth: int,
        trace: TxTrace,
        run: _Run,
        output: int,
    ) -> host.Action | None:
        """Run ``receiver``'s code for ``call`` (a notification where it is not the
        contract) and append its trace; None for a notified account without a contract,
        which is only recorded."""
        params = run.params
        where = f"{call.contract}::{call.action}"
        if receiver != call.contract:
            where = f"{receiver} (notified of {where})"
        entry = _code_entry(view, receiver)
        if entry is None:
            if receiver == call.contract:
                raise ContractError(f"{where}: no contract is deployed at {receiver}")
            trace.actions.append(ActionTrace(call, depth, receiver=receiver))
            return None
        if params.max_memory_pages > MAX_MEMORY_PAGES:
            raise ContractError(
                f"{where}: max_memory_pages {params.max_memory_pages} is past the runtime's "
                f"{MAX_MEMORY_PAGES}"
            )
        if depth > params.max_inline_depth:
            raise ResourceExceeded(
                f"{where}: inline depth {depth} past max_inline_depth {params.max_inline_depth}"
            )
        if depth > 0 and receiver == call.contract and not run.readonly:
            _refuse_read_only(call, entry[1], "sent inline")
        fuel = run.budget - trace.fuel - ACTION_FUEL
        if fuel < 0:
            raise OutOfFuel(f"{where}: out of fuel (max_tx_fuel {params.max_tx_fuel})")
        try:
            action_u64 = name_to_u64(call.action)
        except ChainError:
            raise ContractError(f"{where}: {call.action!r} is not an action name") from None
        pre = self._load(view, receiver, entry[0], where)
        atrace = ActionTrace(call, depth, receiver=receiver)
        trace.actions.append(atrace)
        act = host.Action(
            view,
            call,
            atrace,
            params,
            block_time_s=run.block_time_s,
            block_num=run.block_num,
            readonly=run.readonly,
            output=output,
        )
        used = self._apply(pre, act, action_u64, fuel, params)
        atrace.fuel = ACTION_FUEL + used
        atrace.console = act.console.decode("utf-8", errors="replace")
        trace.fuel += ACTION_FUEL + used
        return act

    @staticmethod
    def _native(
        view: StateView,
        call: ContractCall,
        depth: int,
        trace: TxTrace,
        params: ChainParams,
        block_time_s: int,
        block_num: int,
    ) -> None:
        """An inline transfer of the chain's token (``host.native_transfer``), made as the
        native action is, for the fuel of an action; refused as the contract's error."""
        transfer = host.native_transfer(call, params)
        try:
            process_transfer(view, transfer, Context(params, block_time_s, None, block_num))
        except TransactionError as err:
            raise ContractError(f"{call.contract}::{call.action}: {err}") from None
        trace.actions.append(ActionTrace(call, depth, ACTION_FUEL))
        trace.fuel += ACTION_FUEL

    def _apply(
        self,
        pre: wasmtime.InstancePre,
        act: host.Action,
        action_u64: int,
        fuel: int,
        params: ChainParams,
    ) -> int:
        """Run the contract's ``apply`` for ``act`` in a store of its own holding ``fuel``, and
        return the fuel it used; whatever the contract does wrong leaves as our error."""
        store = raw.Store(
            self._ready().engine_ptr,
            memory_bytes=params.max_memory_pages * PAGE,
            table_elements=MAX_TABLE_ELEMENTS,
            fuel=fuel,
        )
        act.fuel = fuel_meter = raw.Fuel(store.ctx)
        previous = host.set_current(act)
        try:
            instance = self._instantiate(pre, store.ctx, act)
            act.memory = instance.memory
            receiver = host.signed64(act.receiver)
            code = host.signed64(name_to_u64(act.call.contract))
            raw.call_apply(store.ctx, instance.apply, receiver, code, host.signed64(action_u64))
            return fuel - fuel_meter.left()
        except RuntimeFault:
            raise
        except Exception as err:
            raise self._error(err, act, params) from None
        finally:
            host.set_current(previous)
            store.close()

    @staticmethod
    def _instantiate(pre: wasmtime.InstancePre, ctx: int, act: host.Action) -> raw.Instance:
        """The action's instance. A trap here (the module's segments, checked at setcode, or
        its fuel) is the contract's and the same on every node; any other failure is this
        node's (no pool slot, no memory) and must not judge the transaction."""
        try:
            return raw.instantiate(pre, ctx)
        except wasmtime.Trap:
            raise
        except wasmtime.WasmtimeError as err:
            raise RuntimeFault(f"{act.where}: could not instantiate the contract: {err}") from err

    def _load(
        self, view: StateView, contract: str, digest: bytes, where: str
    ) -> wasmtime.InstancePre:
        compiled = self._cache.get(digest)
        if compiled is not None:
            return compiled.pre
        wasm = view.raw(schema.wasm_key(contract))
        assert wasm is not None, "setcode writes the module with its code entry"
        try:
            return self._compiled(digest, wasm).pre
        except ContractError as err:
            # Validated at setcode: compiling is all that is left to do, and a failure to is
            # this node's (out of memory), not the contract's.
            raise RuntimeFault(f"{where}: could not compile the contract: {err}") from err

    @staticmethod
    def _error(err: Exception, act: host.Action, params: ChainParams) -> ChainError:
        """Our error for what stopped the action: the host function's own, recorded on the
        action, before whatever wasmtime-py raised; a trap named by its code."""
        if act.error is not None:
            if isinstance(act.error, ChainError):
                return act.error
            raise act.error  # our own bug in a host function: let it show
        if isinstance(err, ChainError):
            return err
        where = act.where
        if not isinstance(err, wasmtime.WasmtimeError | wasmtime.Trap):
            raise err  # our own bug: let it show
        code = err.trap_code if isinstance(err, wasmtime.Trap) else None
        if code == wasmtime.TrapCode.OUT_OF_FUEL:
            return act.out_of_fuel()
        what = _trap_name(err) if isinstance(err, wasmtime.Trap) else "trap"
        memory = act.memory
        if memory is None:
            return ContractError(f"{where}: instantiation: {what}")
        if memory.grown() >= params.max_memory_pages * PAGE:
            # The module trapped with its memory at the cap (after memory.grow returned -1,
            # as the limit makes it).
            return ResourceExceeded(
                f"{where}: memory limit (max_memory_pages {params.max_memory_pages}): {what}"
            )
        return ContractError(f"{where}: {what}")


def _code_entry(view: StateView, account: str) -> tuple[bytes, str] | None:
    """``account``'s code hash and ABI text, or None when it has no contract."""
    entry = view.raw(schema.code_key(account))
    if entry is None:
        return None
    digest, abi = unpack(entry, "contract code entry")
    return bytes(digest), abi


def _refuse_read_only(call: ContractCall, abi: str, how: str) -> None:
    if call.action in read_only_actions(abi):
        raise ReadOnlyAction(
            f"{call.contract}::{call.action}: a read-only action (its ABI says so) cannot be "
            f"{how}; run it with call"
        )


def _trap_name(err: wasmtime.Trap) -> str:
    code = err.trap_code
    return _TRAPS.get(code, "trap") if code is not None else "trap"


def _output_bytes(action: ActionTrace) -> int:
    """Trace output bytes of an action that ran (as ``host.Action.output`` counts them)."""
    console = len(action.console.encode("utf-8", errors="replace"))
    return console + sum(len(data) for _, data in action.events) + len(action.return_value)
