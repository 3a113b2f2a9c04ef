"""The RPC's contract routes: code, ABI, table rows and read-only calls.

Each request takes a frozen reader of the state on the chain thread (one LevelDB snapshot,
through the batched ``ChainReads``) and does its work on a worker thread, so a page of rows
or a contract call never holds the chain thread, and sees one state throughout. Work is
bounded per request (rows, bytes, time; fuel and time for a call) and in number: past
``MAX_IN_FLIGHT`` requests at work, the next is refused with 503 rather than queued.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from chain.abi import Abi
from chain.core.execution.contracts import ContractCall, TxTrace
from chain.core.execution.state import StateView
from chain.core.primitives.errors import EncodingError, NotFound
from chain.core.primitives.params import ChainParams, slot_time_s
from chain.core.primitives.types import AccountName
from node.api.antelope import (
    NATIVE_TOKEN_CODE,
    abi_fields,
    native_balance,
    native_stats,
    native_supply,
    token_balance,
    token_stats,
)
from node.api.contracts.reads import (
    MAX_ROWS,
    RowQuery,
    abi_of,
    code_of,
    table_rows,
    u64_of,
)
from node.api.fields import AnyOf, Boolean, Choice, Field, Hex, Integer, JsonObject, ListOf, Text
from node.api.payloads import action_data
from node.api.payloads import event_data as decoded_event
from node.api.reads import ChainReads, ReadsBusy
from node.api.routes import Handler, Route
from node.api.views import BOOLEAN, COUNT, STRING, json_object, nullable

if TYPE_CHECKING:
    from chain.controller import Chain
    from chain.storage.leveldb import FrozenReader

T = TypeVar("T")

# Requests at work on worker threads at once (each holds a LevelDB snapshot and a thread).
MAX_IN_FLIGHT = 8
# Wall time a read-only call may take before the RPC answers 503; the call itself stops at
# its fuel, so this only bounds how long a client waits behind a busy machine.
CALL_TIME_S = 2.0
MAX_AUTHORIZERS = 16


class ReadonlyHost(Protocol):
    """What ``chain.vm.ContractRuntime`` offers for read-only calls."""

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
        """Run ``call`` refusing every write; its trace, or ContractError/ResourceExceeded."""
        ...


@dataclass(frozen=True, slots=True)
class _Frozen:
    """What a request takes from the chain thread: the state and where it is."""

    reader: FrozenReader
    vm: Any
    params: ChainParams
    head_num: int
    head_slot: int


def _freeze(chain: Chain) -> _Frozen:
    head = chain.head
    return _Frozen(chain.store.frozen(), chain.vm, chain.params, head.num, head.slot)


class ContractApi:
    """The handlers of the contract routes."""

    def __init__(
        self,
        read: ChainReads,
        *,
        call_fuel: int,
        call_time_s: float = CALL_TIME_S,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        self.read = read
        self.call_fuel = call_fuel
        self.call_time_s = call_time_s
        self.max_in_flight = max_in_flight
        self._in_flight = 0  # worker threads at work (counted down by the thread itself)
        self._native_supply: int | None = None  # the native token's, the same at every block
        self._lock = threading.Lock()

    async def _at(self, work: Callable[[_Frozen], T], time_s: float | None = None) -> T:
        """``work`` on a worker thread, over a frozen state taken on the chain thread."""
        with self._lock:
            if self._in_flight >= self.max_in_flight:
                raise ReadsBusy(f"{self._in_flight} contract reads are at work")
            self._in_flight += 1
        started = False
        try:
            frozen = await self.read(_freeze)

            def run() -> T:
                try:
                    return work(frozen)
                finally:
                    frozen.reader.close()
                    self._done()

            task = asyncio.ensure_future(asyncio.to_thread(run))
            started = True
            try:
                async with asyncio.timeout(time_s):
                    return await asyncio.shield(task)
            except TimeoutError:
                raise ReadsBusy(f"the call took longer than {time_s} s") from None
        finally:
            if not started:
                self._done()

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    async def get_code(self, args: dict[str, Any]) -> dict[str, Any]:
        account = args["account"]
        code = await self._at(lambda f: code_of(f.reader, account))
        return {
            "account": account,
            "account_name": account,
            "code_hash": code.code_hash.hex(),
            "code_bytes": code.code_bytes,
            "wast": "",
            "wasm": code.wasm.hex(),
        } | abi_fields(code.abi_text)

    async def get_abi(self, args: dict[str, Any]) -> dict[str, Any]:
        account = args["account"]
        code = await self._at(lambda f: code_of(f.reader, account))
        return {"account": account, "account_name": account} | abi_fields(code.abi_text)

    async def get_currency_balance(self, args: dict[str, Any]) -> list[str]:
        code, account, symbol = args["code"], args["account"], args["symbol"]

        def work(frozen: _Frozen) -> list[str]:
            if code == NATIVE_TOKEN_CODE:
                now_s = slot_time_s(frozen.head_slot)
                return native_balance(frozen.reader, account, symbol, frozen.params, now_s)
            return token_balance(frozen.reader, abi_of(frozen.reader, code), code, account, symbol)

        return await self._at(work)

    async def get_currency_stats(self, args: dict[str, Any]) -> dict[str, Any]:
        code, symbol = args["code"], args["symbol"]

        def work(frozen: _Frozen) -> dict[str, Any]:
            if code == NATIVE_TOKEN_CODE:
                if self._native_supply is None:  # invariant: read once
                    self._native_supply = native_supply(frozen.reader)
                return native_stats(self._native_supply, symbol, frozen.params)
            return token_stats(frozen.reader, abi_of(frozen.reader, code), code, symbol)

        return await self._at(work)

    async def get_table_rows(self, args: dict[str, Any]) -> dict[str, Any]:
        code, table = args["code"], args["table"]
        scope = u64_of(args["scope"], "scope")
        lower = (
            0 if args["lower_bound"] in (None, "") else u64_of(args["lower_bound"], "lower_bound")
        )
        upper = (
            2**64 - 1
            if args["upper_bound"] in (None, "")
            else u64_of(args["upper_bound"], "upper_bound")
        )
        by_secondary = args["index_position"] in SECONDARY

        def work(frozen: _Frozen) -> dict[str, Any]:
            reader = frozen.reader
            abi = abi_of(reader, code) if args["json"] or by_secondary else None
            if abi is None:
                code_of(reader, code)  # an unknown contract is an error, not an empty table
            index_table = _index_table(abi, table) if abi is not None and by_secondary else None
            if abi is not None and table not in abi.tables:
                raise EncodingError("table", f"{code}'s ABI has no table {table!r}")
            query = RowQuery(
                code,
                scope,
                table,
                lower,
                upper,
                args["limit"],
                index_table,
                abi if args["json"] else None,
                reverse=args["reverse"],
                show_payer=args["show_payer"],
            )
            return table_rows(reader, query)

        return await self._at(work)

    async def call(self, args: dict[str, Any]) -> dict[str, Any]:
        contract, action = args["contract"], args["action"]
        authorization = tuple(AccountName(a) for a in args["authorization"])
        data_arg = b"" if args["data"] == "" else args["data"]
        fuel = self.call_fuel

        def work(frozen: _Frozen) -> dict[str, Any]:
            reader = frozen.reader
            code = code_of(reader, contract)
            abi = abi_of(reader, contract) if code.abi_text else None
            if isinstance(data_arg, bytes):
                data = data_arg
            elif abi is None:
                raise NotFound(f"{contract!r} has no ABI: give the data as hex")
            else:
                data = abi.encode_action(action, data_arg)
            host: ReadonlyHost | None = frozen.vm
            if host is None or not hasattr(host, "run_readonly"):
                raise NotFound("this node runs no contracts")
            trace = host.run_readonly(
                StateView(reader),
                ContractCall(AccountName(contract), action, authorization, data),
                params=frozen.params,
                block_time_s=slot_time_s(frozen.head_slot),
                block_num=frozen.head_num,
                fuel_left=fuel,
            )
            return call_result(trace, abi, action) | {"block_num": frozen.head_num}

        return await self._at(work, self.call_time_s)

    async def trace_json(self, trace: TxTrace) -> dict[str, Any]:
        """A pushed transaction's trace as JSON, decoded by the contracts' ABIs when they
        can be read now (hex always; a busy node answers with hex only, never fails the
        push)."""
        contracts = {a.call.contract for a in trace.actions}
        contracts |= {a.receiver for a in trace.actions if a.events or a.return_value}

        def abis(frozen: _Frozen) -> dict[str, Abi | None]:
            found: dict[str, Abi | None] = {}
            for contract in contracts:
                try:
                    found[contract] = abi_of(frozen.reader, contract)
                except (NotFound, EncodingError, RecursionError):  # structs nested deep
                    found[contract] = None
            return found

        try:
            by_contract = await self._at(abis)
        except ReadsBusy:
            by_contract = {}
        return trace_json(trace, by_contract)


def _index_table(abi: Abi, table: str) -> str:
    definition = abi.tables.get(table)
    if definition is None or not definition.secondary:
        raise EncodingError("index_position", f"table {table!r} has no secondary index in the ABI")
    return definition.secondary[0].table


def trace_json(trace: TxTrace, abis: dict[str, Abi | None]) -> dict[str, Any]:
    """Every contract action of a trace: its call, data, console, events, return value."""
    actions = []
    for a in trace.actions:
        abi = abis.get(a.call.contract)
        own = abis.get(a.receiver)  # the code that ran: a notified contract's events are its own
        call = a.call
        value: dict[str, Any] = {
            "contract": call.contract,
            "action": call.action,
            "receiver": a.receiver,  # not the contract: a notification (require_recipient)
            "authorization": list(call.authorization),
            "depth": a.depth,
            "hex": call.data.hex(),
            "console": a.console,
            "events": [{"name": n} | event_data(own, n, d) for n, d in a.events],
            "return_value_hex": a.return_value.hex(),
            "return_value": _result(own, call.action, a.return_value),
            "fuel": a.fuel,
        }
        decoded = action_data(abi, call.action, call.data)
        if decoded is not None:  # the hex is there
            value["data"] = decoded
        actions.append(value)
    return {"fuel": trace.fuel, "actions": actions}


def _result(abi: Abi | None, action: str, raw: bytes) -> Any:
    if abi is None or not raw or action not in abi.results:
        return None
    try:
        return abi.decode_result(action, raw)
    except EncodingError:
        return None  # the hex is there; a value the ABI mis-describes is not an error


def call_result(trace: TxTrace, abi: Abi | None, action: str) -> dict[str, Any]:
    """What a read-only call answers: the first action's return value (decoded when the ABI
    types it), every action's console joined, every event, the fuel used."""
    first = trace.actions[0] if trace.actions else None
    raw = first.return_value if first is not None else b""
    return {
        "return_value": _result(abi, action, raw),
        "return_value_hex": raw.hex(),
        "console": "".join(a.console for a in trace.actions),
        "events": trace_events(trace, abi),
        "fuel": trace.fuel,
    }


def trace_events(trace: TxTrace, abi: Abi | None) -> list[dict[str, Any]]:
    """Events of a trace as JSON: decoded when the emitting contract's ABI types them (the
    ABI given is the first action's contract's: events of other contracts stay hex)."""
    events = []
    for a in trace.actions:
        own = abi if first_contract(trace) == a.call.contract else None
        for name, data in a.events:
            events.append({"contract": a.call.contract, "name": name} | event_data(own, name, data))
    return events


def first_contract(trace: TxTrace) -> str | None:
    return trace.actions[0].call.contract if trace.actions else None


def event_data(abi: Abi | None, name: str, data: bytes) -> dict[str, Any]:
    """``{"data": decoded}`` when the ABI types the event, else ``{"hex": ...}``."""
    decoded = decoded_event(abi, name, data)
    return {"hex": data.hex()} if decoded is None else {"data": decoded}


# --- routes ---------------------------------------------------------------------------------

NAME = Text("[a-z1-5.]{0,11}[a-z1-5]", 12, "an account name (a-z, 1-5, '.')")
_KEY_KINDS = (
    Integer(0, 2**64 - 1),
    Text("[0-9]{1,19}", 19, "digits"),  # 19 digits always fit a u64; more, as a number
    NAME,
    Text("[A-Z]{1,7}", 7, "a symbol code"),
)
KEY = AnyOf(_KEY_KINDS, "a u64 number (or its digits), a name or a symbol code (TOK)")
BOUND = AnyOf((*_KEY_KINDS, Text("", 0, "empty")), "a key as for scope, or empty: no bound")
_ROW = {
    "description": "json=true: the row decoded by the ABI (its hex if the ABI does not describe"
    " it); json=false: its hex; show_payer=true: {data: the row, payer}"
}
# index_position as Antelope's clients send it: eosjs a number, WharfKit a word.
# "" is what a client sends for "the default" (nodeos reads it as the primary key).
PRIMARY, SECONDARY = (1, "1", "primary", ""), (2, "2", "secondary")
TABLE_FIELDS = (
    Field("code", NAME, "the contract"),
    Field("scope", KEY, "the scope: a name, a u64 or a symbol code"),
    Field("table", NAME, "the table"),
    Field("json", Boolean(), "decode rows by the ABI", required=False, default=True),
    Field("lower_bound", BOUND, "first key (inclusive)", required=False, default=None),
    Field("upper_bound", BOUND, "last key (inclusive)", required=False, default=None),
    Field("limit", Integer(1, MAX_ROWS), "rows at most", required=False, default=10),
    Field(
        "key_type",
        Choice(("", "i64", "name")),
        "BoR's keys are u64: as a number (i64) or a name; other key types are refused",
        required=False,
        default="",
    ),
    Field(
        "index_position",
        AnyOf(
            (Integer(1, 2), Choice(("1", "primary", "", "2", "secondary"))),
            "1, 2, primary or secondary",
        ),
        "1 (primary): by primary key; 2 (secondary): the table's secondary index in the ABI",
        required=False,
        default="primary",
    ),
    Field(
        "encode_type",
        Choice(("", "dec", "hex")),
        "accepted as Antelope's clients send it; u64 keys are always decimal strings",
        required=False,
        default="dec",
    ),
    Field("reverse", Boolean(), "from the upper bound down", required=False, default=False),
    Field("show_payer", Boolean(), "each row as {data, payer}", required=False, default=False),
)
_EVENT = json_object(
    {"contract": STRING, "name": STRING, "data": {}, "hex": STRING}, optional=("data", "hex")
)
CALL_SCHEMA = json_object(
    {
        "return_value": {"description": "decoded by the ABI's action_results, else null"},
        "return_value_hex": STRING,
        "console": STRING,
        "events": {"type": "array", "items": _EVENT},
        "fuel": COUNT,
        "block_num": COUNT,
    }
)
_ABIS = {
    "abi": nullable(
        {"type": "object", "description": "the contract's ABI in Antelope's form (eosio::abi/1.2)"}
    ),
    "bor_abi": nullable(
        {
            "type": "object",
            "description": "the contract's ABI as setcode stored it (bor::abi/1: with events)",
        }
    ),
}
# account_name: the account again, under Antelope's name for it.
_CODE_SCHEMA = json_object(
    {
        "account": STRING,
        "account_name": STRING,
        "code_hash": STRING,
        "code_bytes": COUNT,
        "wast": STRING,
        "wasm": {"type": "string", "description": "hex of the module"},
        **_ABIS,
    }
)


def contract_routes(
    contracts: ContractApi, paced: Callable[[Handler], Handler], max_data_bytes: int
) -> dict[str, Route]:
    account = (Field("account", NAME, "the contract's account", alias="account_name"),)
    return currency_routes(contracts, paced) | {
        "/v1/chain/get_code": Route(
            paced(contracts.get_code),
            "The code hash, size and ABI of the contract at an account",
            _CODE_SCHEMA,
            account,
            (404,),
        ),
        "/v1/chain/get_abi": Route(
            paced(contracts.get_abi),
            "The ABI of the contract at an account (null if it was deployed without one)",
            json_object({"account": STRING, "account_name": STRING, **_ABIS}),
            account,
            (404,),
        ),
        "/v1/chain/get_table_rows": Route(
            paced(contracts.get_table_rows),
            "A page of a contract table's rows, by primary key or the table's secondary index,"
            " in Antelope's form; bounded in rows, bytes and time: page on with next_key as"
            " lower_bound (as upper_bound in reverse)",
            json_object(
                {"rows": {"type": "array", "items": _ROW}, "more": BOOLEAN, "next_key": STRING}
            ),
            TABLE_FIELDS,
            (404, 422),
        ),
        "/v1/chain/call": Route(
            paced(contracts.call),
            "Run a contract action read-only (every write refused) on the head state: its"
            " return value, console and events, with the node's own fuel cap",
            CALL_SCHEMA,
            (
                Field("contract", NAME, "the contract"),
                Field("action", NAME, "the action"),
                Field(
                    "data",
                    AnyOf((JsonObject(), Hex(0, max_data_bytes)), "a JSON object or hex"),
                    "the arguments: JSON (encoded by the ABI) or hex of their binary form",
                    required=False,
                    default="",
                ),
                Field(
                    "authorization",
                    ListOf(NAME, 0, MAX_AUTHORIZERS, unique=True),
                    "accounts the call runs as authorized by (nothing is signed)",
                    required=False,
                    default=[],
                ),
            ),
            (404, 422),
        ),
    }


def currency_routes(
    contracts: ContractApi, paced: Callable[[Handler], Handler]
) -> dict[str, Route]:
    """Antelope's token reads: the native token's, and eosio.token-like contracts'."""
    symbol = Text("[A-Z]{1,7}", 7, "a symbol code (TOK)")
    code = Field("code", NAME, f"the token contract ({NATIVE_TOKEN_CODE}: the native token)")
    return {
        "/v1/chain/get_currency_balance": Route(
            paced(contracts.get_currency_balance),
            'An account\'s balances of a token, as asset strings ("2.0000 BOR"): the native'
            f" token's liquid balance under {NATIVE_TOKEN_CODE}, else the contract's accounts"
            " table (eosio.token's convention)",
            {"type": "array", "items": STRING},
            (
                code,
                Field("account", NAME, "the holder"),
                Field("symbol", symbol, "only this token", required=False, default=None),
            ),
            (404, 422),
        ),
        "/v1/chain/get_currency_stats": Route(
            paced(contracts.get_currency_stats),
            "A token's supply, maximum supply and issuer, keyed by its symbol code: the native"
            f" token's under {NATIVE_TOKEN_CODE}, else the contract's stat table",
            {
                "type": "object",
                "additionalProperties": json_object(
                    {"supply": STRING, "max_supply": STRING, "issuer": STRING}
                ),
            },
            (code, Field("symbol", symbol, "the token's symbol code")),
            (404, 422),
        ),
    }
