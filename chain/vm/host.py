"""The host functions a contract imports from ``env``, and the running action they act for.

The functions are defined once, on the process's one ``Linker``; each finds the action it
serves through a per-thread "current action" (the chain thread runs transactions while RPC
threads run read-only calls). Every call is charged fuel before it does any work: a fixed
cost plus a cost per byte moved, so a contract pays for what the host does on its behalf.

Calls go through ``chain.vm.raw`` (wasmtime's unchecked C interface): a host function that
refuses raises our error, which is recorded on the action and becomes a trap.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Mapping
from typing import Any

import wasmtime

from chain.core.execution.actions import MAX_MEMO, Transfer
from chain.core.execution.contracts import ActionTrace, ContractCall, name_to_u64, u64_to_name
from chain.core.execution.state import StateView
from chain.core.primitives.errors import (
    ContractError,
    ContractMissingAuthority,
    OutOfFuel,
    ResourceExceeded,
)
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName
from chain.vm import raw
from chain.vm.hostapi import I64, Category, HostApi, HostFunction
from chain.vm.raw import ADDRESS_SPACE
from chain.vm.tables import Tables

# Fuel per host call and per byte it moves. A host call costs the node a few microseconds of
# Python, about what 10,000 wasm instructions cost in compiled code.
HOST_CALL_FUEL = 10_000
BYTE_FUEL = 10
# Fuel per byte of trace output (console, event data, return values): those bytes are kept
# with the block, sent to stream subscribers and answered to clients, so they cost ten times
# a byte moved; a block of max_block_fuel (400 M) then holds at most about 4 MB of them.
OUTPUT_BYTE_FUEL = 100
# Trace output bytes one transaction may produce, all its actions together.
MAX_TRACE_BYTES = 64 * 1024

MAX_CONSOLE = 4096  # bytes of console per action; the rest is cut
MAX_RETURN_VALUE = 8192
MAX_EVENT_DATA = 4096
MAX_EVENTS = 64  # per action
MAX_INLINE = 64  # actions one action may send inline
# Accounts one action may notify (require_recipient), its notified handlers' included: each
# runs the action's handler or is recorded in the trace with the action's data.
MAX_RECIPIENTS = 16
MAX_AUTHORIZATION = 16
MAX_ASSERT_MESSAGE = 512  # bytes of an assertion's message that are kept
# The account an inline action names to move the chain's own token, as Antelope's contracts
# call eosio.token::transfer: no contract runs there, the node transfers natively.
NATIVE_TOKEN = AccountName("eosio.token")
ACTIVE = AccountName("active")

_U32 = 0xFFFFFFFF
_U64 = (1 << 64) - 1
_LE64 = struct.Struct("<Q")


def signed64(value: int) -> int:
    """A u64 as the i64 wasm passes it."""
    return value - (1 << 64) if value >= 1 << 63 else value


class Action:
    """One running contract action: what the host functions read and where they write."""

    __slots__ = (
        "auth_ids",
        "authorized",
        "block_num",
        "block_time_us",
        "call",
        "console",
        "error",
        "fuel",
        "inline",
        "max_tx_fuel",
        "memory",
        "notified",
        "output",
        "params",
        "readonly",
        "receiver",
        "receiver_name",
        "recipients",
        "tables",
        "trace",
        "view",
        "where",
    )

    def __init__(
        self,
        view: StateView,
        call: ContractCall,
        trace: ActionTrace,
        params: ChainParams,
        *,
        block_time_s: int,
        block_num: int,
        readonly: bool,
        output: int = 0,
    ) -> None:
        self.view = view
        self.call = call
        self.trace = trace
        self.params = params
        self.block_time_us = block_time_s * 1_000_000
        self.block_num = block_num
        self.readonly = readonly
        # The account whose code runs: the contract, or one it notified (trace.receiver).
        self.receiver_name = trace.receiver
        self.notified = trace.receiver != call.contract
        self.where = f"{call.contract}::{call.action}"
        if self.notified:
            self.where = f"{trace.receiver} (notified of {self.where})"
        self.receiver = name_to_u64(trace.receiver)
        self.authorized = frozenset(call.authorization)
        self.auth_ids = frozenset(map(name_to_u64, call.authorization))
        self.tables = Tables(
            view,
            self.receiver,
            trace.receiver,
            self.auth_ids,
            params,
            readonly=readonly,
            where=self.where,
        )
        self.console = bytearray()
        self.inline: list[ContractCall] = []
        self.recipients: list[AccountName] = []  # require_recipient's, in order, once each
        # Trace output bytes of the transaction so far, this action's included.
        self.output = output
        # Set by the runtime once the action's store and instance exist.
        self.fuel: raw.Fuel | None = None
        self.memory: raw.RawMemory | None = None
        # Why a host function stopped the action (see chain.vm.raw): our error, or a bug.
        self.error: BaseException | None = None

    def abort(self, reason: str) -> ContractError:
        return ContractError(f"{self.where}: {reason}")

    def exceeded(self, reason: str) -> ResourceExceeded:
        return ResourceExceeded(f"{self.where}: {reason}")

    def charge(self, nbytes: int = 0, per_byte: int = BYTE_FUEL) -> None:
        fuel = self.fuel
        assert fuel is not None, "fuel is set before apply runs"
        if not fuel.take(HOST_CALL_FUEL + per_byte * nbytes):
            raise self.out_of_fuel()

    def out_of_fuel(self) -> OutOfFuel:
        return OutOfFuel(f"{self.where}: out of fuel (max_tx_fuel {self.params.max_tx_fuel})")

    def add_output(self, nbytes: int) -> None:
        """Count ``nbytes`` more of trace output against the transaction's cap (negative:
        output replaced)."""
        if self.output + nbytes > MAX_TRACE_BYTES:
            raise self.exceeded(
                f"trace output of {self.output + nbytes} bytes, past {MAX_TRACE_BYTES} per "
                "transaction (console, events, return values)"
            )
        self.output += nbytes

    def _span(self, ptr: int, length: int) -> int:
        """The address of ``length`` bytes at ``ptr`` in the contract's memory, checked."""
        memory = self.memory
        assert memory is not None, "memory is set before apply runs"
        ptr &= _U32
        end = ptr + length
        if end > memory.size and end > memory.grown():
            raise self.abort(f"out of bounds memory access ({length} bytes at {ptr})")
        return memory.base + ptr

    def read(self, ptr: int, length: int) -> bytes:
        start = self._span(ptr, length)
        return bytes(ADDRESS_SPACE[start : start + length])

    def write(self, ptr: int, data: bytes) -> None:
        start = self._span(ptr, len(data))
        ADDRESS_SPACE[start : start + len(data)] = data

    def write_u64(self, ptr: int, value: int) -> None:
        _LE64.pack_into(ADDRESS_SPACE, self._span(ptr, 8), value)

    def read_u64(self, ptr: int) -> int:
        value: int = _LE64.unpack_from(ADDRESS_SPACE, self._span(ptr, 8))[0]
        return value


_current = threading.local()


def current() -> Action:
    action: Action | None = getattr(_current, "action", None)
    assert action is not None, "host functions run only inside an action"
    return action


def set_current(action: Action | None) -> Action | None:
    """Make ``action`` this thread's running action; returns the one it replaces."""
    previous: Action | None = getattr(_current, "action", None)
    _current.action = action
    return previous


# --- the host functions ----------------------------------------------------------------------
# Each: charge, then check, then act. Arguments arrive as wasm passes them: i32 and i64 signed.
# The database's are in ``chain.vm.host_tables``, the hashes and keys in ``chain.vm.host_crypto``.

API = HostApi()


@API.function(Category.ACTION, "-> i32")
def action_data_size(act: Action) -> int:
    act.charge()
    return len(act.call.data)


@API.function(Category.ACTION, "ptr: usize, len: i32 -> i32")
def read_action_data(act: Action, ptr: int, length: int) -> int:
    data = act.call.data
    n = min(length & _U32, len(data))
    act.charge(n)
    act.write(ptr, data[:n])
    return len(data)


@API.function(Category.CONTEXT, "-> u64")
def current_receiver(act: Action) -> int:
    act.charge()
    return signed64(act.receiver)


@API.function(Category.AUTHORIZATION, "name: u64 -> void")
def require_auth(act: Action, name: int) -> None:
    act.charge()
    if name & _U64 not in act.auth_ids:
        shown = u64_to_name(name & _U64) or f"#{name & _U64}"
        raise ContractMissingAuthority(f"{act.where}: missing authority of {shown}")


@API.function(Category.AUTHORIZATION, "name: u64 -> i32")
def has_auth(act: Action, name: int) -> int:
    act.charge()
    return int(name & _U64 in act.auth_ids)


@API.function(Category.AUTHORIZATION, "name: u64 -> i32")
def is_account(act: Action, name: int) -> int:
    act.charge()
    account = u64_to_name(name & _U64)
    return int(account is not None and act.view.account(account) is not None)


@API.function(Category.SYSTEM, "test: i32, msg: usize, len: i32 -> void")
def eosio_assert(act: Action, test: int, ptr: int, length: int) -> None:
    if test != 0:
        act.charge()
        return
    n = min(length & _U32, MAX_ASSERT_MESSAGE)
    act.charge(n)
    message = act.read(ptr, n).decode("utf-8", errors="replace")
    raise act.abort(f"assertion failed: {message}")


@API.function(Category.SYSTEM, "test: i32, code: u64 -> void")
def eosio_assert_code(act: Action, test: int, code: int) -> None:
    act.charge()
    if test == 0:
        raise act.abort(f"assertion failed with code {code & _U64}")


@API.function(Category.CONSOLE, "ptr: usize, len: i32 -> void")
def prints_l(act: Action, ptr: int, length: int) -> None:
    # Cut, not refused, at the action's and the transaction's room, as Antelope cuts console.
    n = min(length & _U32, MAX_CONSOLE - len(act.console), MAX_TRACE_BYTES - act.output)
    act.charge(n, OUTPUT_BYTE_FUEL)
    act.console += act.read(ptr, n)
    act.output += n


@API.function(Category.CONTEXT, "-> i64")
def current_time(act: Action) -> int:
    act.charge()
    return act.block_time_us


@API.function(Category.CONTEXT, "-> i32")
def get_block_num(act: Action) -> int:
    act.charge()
    return act.block_num


@API.function(Category.ACTION, "ptr: usize, len: i32 -> void")
def set_action_return_value(act: Action, ptr: int, length: int) -> None:
    length &= _U32
    if length > MAX_RETURN_VALUE:
        raise act.exceeded(f"return value of {length} bytes, past {MAX_RETURN_VALUE}")
    act.charge(length, OUTPUT_BYTE_FUEL)
    act.add_output(length - len(act.trace.return_value))
    act.trace.return_value = act.read(ptr, length)


@API.function(Category.ACTION, "name: u64, ptr: usize, len: i32 -> void")
def emit_event(act: Action, name: int, ptr: int, length: int) -> None:
    length &= _U32
    if length > MAX_EVENT_DATA:
        raise act.exceeded(f"event of {length} bytes, past {MAX_EVENT_DATA}")
    if len(act.trace.events) >= MAX_EVENTS:
        raise act.exceeded(f"more than {MAX_EVENTS} events")
    act.charge(length, OUTPUT_BYTE_FUEL)
    event = u64_to_name(name & _U64)
    if event is None:
        raise act.abort(f"event name #{name & _U64} is not a name")
    act.add_output(length)
    act.trace.events.append((event, act.read(ptr, length)))


@API.function(Category.TRANSACTION, "ptr: usize, len: i32 -> void")
def send_inline(act: Action, ptr: int, length: int) -> None:
    length &= _U32
    if act.readonly:
        raise act.abort("send_inline is not allowed in a read-only call")
    limit = act.params.max_tx_bytes + 256  # the data, and a header of at most 154 bytes
    if length > limit:
        raise act.exceeded(f"inline action of {length} bytes, past {limit}")
    if len(act.inline) >= MAX_INLINE:
        raise act.exceeded(f"more than {MAX_INLINE} inline actions")
    act.charge(length)
    call = parse_inline(act, act.read(ptr, length))
    act.inline.append(call)


@API.function(Category.ACTION, "name: u64 -> void")
def require_recipient(act: Action, name: int) -> None:
    """Antelope's notification: once this action's handler returns, ``name``'s contract (if
    it has one) runs it too, as receiver ``name`` with code = this contract."""
    act.charge()
    account = u64_to_name(name & _U64)
    if account is None or act.view.account(account) is None:
        shown = account or f"#{name & _U64}"
        raise act.abort(f"require_recipient: no account {shown}")
    if act.readonly:
        return  # a read-only call runs the called action alone: no handler runs, none is owed
    if account == act.receiver_name or account in act.recipients:
        return  # Antelope notifies each account once, never the receiver itself
    if len(act.recipients) >= MAX_RECIPIENTS:
        raise act.exceeded(f"more than {MAX_RECIPIENTS} accounts notified")
    act.recipients.append(AccountName(account))


def parse_inline(act: Action, raw: bytes) -> ContractCall:
    """Antelope's action layout: contract u64, action u64, varuint32 n, n permission levels
    (actor u64, permission u64), varuint32 len, data (little-endian). BoR accounts have one
    key, their active permission: a level names ``active``."""
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(raw):
            raise act.abort("send_inline: truncated action")
        pos += n
        return raw[pos - n : pos]

    def varuint() -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise act.abort("send_inline: bad varuint32")

    def name(what: str) -> AccountName:
        value = int.from_bytes(take(8), "little")
        text = u64_to_name(value)
        if text is None:
            raise act.abort(f"send_inline: {what} #{value} is not a name")
        return AccountName(text)

    contract = name("contract")
    action = name("action")
    count = varuint()
    if not 1 <= count <= MAX_AUTHORIZATION:
        raise act.abort(f"send_inline: {count} authorizers, must be 1..{MAX_AUTHORIZATION}")
    actors = []
    for _ in range(count):
        actors.append(name("actor"))
        permission = name("permission")
        if permission != ACTIVE:
            raise act.abort(f"send_inline: permission {actors[-1]}@{permission}: only active")
    if len(set(actors)) != count:
        raise act.abort("send_inline: an actor is named twice")
    for actor in actors:
        # A notified contract acts as itself only: the action's authorizers called the
        # contract that notified it, not it.
        if actor != act.receiver_name and (act.notified or actor not in act.authorized):
            raise act.abort(f"send_inline: {actor} did not authorize {act.where}")
    size = varuint()
    data = take(size)
    if pos != len(raw):
        raise act.abort("send_inline: bytes after the action")
    return ContractCall(contract, action, tuple(actors), data)


def native_transfer(call: ContractCall, params: ChainParams) -> Transfer:
    """The native transfer an inline ``eosio.token::transfer`` asks for: its data in
    eosio.token's layout (from, to, quantity as an asset of the chain's token, memo), moved
    from an account that authorizes it (the contract, or one that authorized its action)."""
    where = f"{call.contract}::{call.action}"
    if call.action != "transfer":
        raise ContractError(f"{where}: transfer is the only native action a contract may send")
    data = call.data
    if len(data) < 33:
        raise ContractError(f"{where}: data of {len(data)} bytes is no transfer")
    sender_u64, recipient_u64, amount, symbol = struct.unpack_from("<QQqQ", data)
    size, at, shift, more = 0, 32, 0, True
    while more and at < len(data) and shift < 35:
        size |= (data[at] & 0x7F) << shift
        more = bool(data[at] & 0x80)
        at, shift = at + 1, shift + 7
    memo = data[at:]
    if more or size != len(memo) or size > MAX_MEMO:
        raise ContractError(f"{where}: memo must be its length and at most {MAX_MEMO} bytes")
    expected = params.token_precision | int.from_bytes(params.token_symbol.encode(), "little") << 8
    if symbol != expected or amount <= 0:
        raise ContractError(
            f"{where}: quantity must be a positive amount of {params.token_precision},"
            f"{params.token_symbol}"
        )
    sender, recipient = u64_to_name(sender_u64), u64_to_name(recipient_u64)
    if sender is None or recipient is None:
        raise ContractError(f"{where}: from and to must be account names")
    if sender not in call.authorization:
        raise ContractMissingAuthority(f"{where}: missing authority of {sender}")
    try:
        text = memo.decode("utf-8")
    except UnicodeDecodeError:
        raise ContractError(f"{where}: memo is not UTF-8") from None
    return Transfer(AccountName(sender), AccountName(recipient), amount, text)


def make_linker(
    engine: wasmtime.Engine, table: Mapping[str, HostFunction]
) -> tuple[wasmtime.Linker, list[Any]]:
    """A linker with every host function of ``table`` (``chain.vm.validate.HOST_API``), each
    with its exact signature, and the C callbacks to keep alive with it."""
    linker = wasmtime.Linker(engine)
    keep = []
    for name, fn in table.items():
        params, results = fn.wasm
        ty = wasmtime.FuncType(list(params), list(results))
        keep.append(raw.define(linker, "env", name, ty, _body(fn.body, params, results)))
    return linker, keep


def _body(
    fn: Callable[..., int | None],
    params: tuple[wasmtime.ValType, ...],
    results: tuple[wasmtime.ValType, ...],
) -> raw.HostCallback:
    """``fn`` as a raw host callback: arguments unpacked from the raw values by type in one
    step, the result packed back, and any exception recorded on the action and turned into
    a trap (one Python frame between wasmtime and ``fn``)."""
    slots = "".join(("q" if p == I64 else "i") + ("8x" if p == I64 else "12x") for p in params)
    unpack = struct.Struct("<" + slots).unpack_from
    pack = struct.Struct("<q" if results[0] == I64 else "<i").pack_into if results else None
    local = _current
    space = ADDRESS_SPACE

    failed = raw.failed

    def body(env: int, caller: int, args: raw.Args, nargs: int) -> int | None:
        act: Action = local.action
        try:
            value = fn(act, *unpack(space, args))
        except BaseException as err:
            if act.error is None:
                act.error = err
            return failed()
        if pack is not None:
            pack(space, args, value)
        return None

    return body
