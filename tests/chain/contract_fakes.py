"""A scripted ``ContractHost`` for tests of the core's contract rules, where the WebAssembly
runtime is not the point (``chain.vm`` has its own tests, with real modules).

A call's data is a script of ``;``-separated steps:
``put:KEY=VALUE`` writes a row (key under schema.ROW, so it is contract state),
``burn:N`` uses N fuel (OutOfFuel past what is left), ``emit:NAME`` emits an event, ``fail``
raises ContractError, ``ram`` raises ResourceExceeded for a storage limit.
"""

from __future__ import annotations

from chain.core.execution.contracts import ActionTrace, ContractCall, TxTrace
from chain.core.execution.state import StateView
from chain.core.primitives import schema
from chain.core.primitives.crypto import sha256
from chain.core.primitives.errors import ContractError, OutOfFuel, ResourceExceeded
from chain.core.primitives.params import ChainParams


class ScriptedHost:
    """Runs scripts instead of WebAssembly; counts the calls it ran."""

    def __init__(self) -> None:
        self.runs = 0

    def validate(self, code: bytes, params: ChainParams) -> bytes:
        if code.startswith(b"bad"):
            raise ContractError("module is not valid WebAssembly")
        return sha256(code)

    def validate_abi(self, abi: str) -> None:
        if abi.startswith("bad"):
            raise ContractError("setcode: the ABI is refused: abi: bad")

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
        self.runs += 1
        where = f"{call.contract}::{call.action}"
        action = ActionTrace(call, depth=0)
        trace.actions.append(action)
        for step in call.data.decode().split(";"):
            verb, _, arg = step.partition(":")
            if verb == "put":
                key, _, value = arg.partition("=")
                view.put_raw(schema.ROW + key.encode(), value.encode())
            elif verb == "burn":
                if int(arg) > fuel_left - action.fuel:
                    raise OutOfFuel(f"{where}: out of fuel (max_tx_fuel {fuel_left})")
                action.fuel += int(arg)
                trace.fuel += int(arg)
            elif verb == "emit":
                action.events.append((arg, block_num.to_bytes(4, "big")))
            elif verb == "fail":
                raise ContractError(f"{where}: assertion failed: told to")
            elif verb == "ram":
                raise ResourceExceeded(f"{where}: alice uses 2000 bytes, past max_ram_bytes 1000")


def script(*steps: str) -> bytes:
    return ";".join(steps).encode()
