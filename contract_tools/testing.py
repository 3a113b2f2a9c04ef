"""Testing contracts: a chain in the test's process that runs a built contract with the node's
own runtime (wasmtime, fuel, limits) and its own ``setcode`` and ``call`` rules.

    # the fixture is a pytest plugin of the installed package (entry point "bor_contract")
    def test_transfer(contract_chain: LocalChain) -> None:
        token = contract_chain.deploy("token", "contracts/examples/token")  # builds it
        contract_chain.push("token", "create", {...}, auth="token")
        result = contract_chain.push("token", "transfer", {...}, auth="alice")
        assert result.events == [("transfer", {...})] and result.fuel < 400_000
        assert contract_chain.rows("token", "bob", "accounts") == [{"balance": "1.0000 TOK"}]

A push runs as a transaction's ``call`` action: in a child of the state, kept only when the
action (and what it sent inline) succeeded, so a test sees the same state a node would. What
is left out is the rest of a node: signatures (``auth`` names the authorizers), blocks and the
RPC; a test of those uses a devnet.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chain.abi import Abi, parse_abi
from chain.core.execution.actions import Call, SetCode
from chain.core.execution.contracts import ContractCall, TxTrace, name_to_u64
from chain.core.execution.state import Account, StateView
from chain.core.execution.transition import Context, process_call, process_setcode
from chain.core.primitives import schema
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName
from chain.testing import MemoryKV
from chain.vm import ContractRuntime
from contract_tools.build import Built, build

BLOCK_TIME_S = 1_700_000_000  # the block time a test's actions see (currentTime())
_LAST_KEY = 2**64 - 1


@dataclass(frozen=True, slots=True)
class Result:
    """What one pushed action did: its events and return value decoded by the contract's ABI
    (inline actions' too, in the order they ran), its console, and the fuel it used."""

    events: list[tuple[str, Any]]
    console: str
    return_value: Any
    fuel: int
    trace: TxTrace = field(repr=False)


class LocalChain:
    """A state with accounts, contracts deployed on it, and the node's runtime to run them."""

    def __init__(self, params: ChainParams | None = None, block_num: int = 2) -> None:
        self.params = params or ChainParams()
        self.view = StateView(MemoryKV())
        self.runtime = ContractRuntime()
        self.ctx = Context(self.params, BLOCK_TIME_S, self.runtime, block_num)
        self.abis: dict[str, Abi] = {}
        self._key = PrivateKey.generate().public_key

    def create_accounts(self, *names: str) -> None:
        """Accounts that may authorize actions and be named in them (no balance)."""
        for name in names:
            if self.view.account(name) is None:
                self.view.put_account(Account(AccountName(name), self._key))

    def deploy(self, account: str, contract: Path | str | Built) -> Built:
        """Build ``contract`` (a contract directory) unless it is built already, create
        ``account`` if need be, and ``setcode`` it there as a node would: the module and the
        ABI are checked, the storage is billed."""
        built = contract if isinstance(contract, Built) else build(Path(contract))
        abi = built.abi.read_text(encoding="utf-8")
        self.create_accounts(account)
        child = self.view.child()
        process_setcode(
            child, SetCode(AccountName(account), built.wasm.read_bytes(), abi), self.ctx
        )
        child.merge_into_parent()
        self.abis[account] = parse_abi(abi)
        return built

    def push(
        self, contract: str, action: str, args: dict[str, Any], auth: str | list[str]
    ) -> Result:
        """Run ``action`` with ``args`` (JSON, encoded by the ABI) authorized by ``auth``;
        raises the chain's error (``ContractError`` with the contract's message,
        ``ResourceExceeded``, ...) and leaves the state as it was when it fails."""
        actors = [auth] if isinstance(auth, str) else auth
        data = self.abis[contract].encode_action(action, args)
        call = Call(AccountName(contract), action, tuple(AccountName(a) for a in actors), data)
        child = self.view.child()
        trace = TxTrace()
        process_call(child, call, self.ctx, trace, self.params.max_block_fuel)
        child.merge_into_parent()
        return self._result(trace)

    def call(self, contract: str, action: str, args: dict[str, Any]) -> Any:
        """A read-only action's result (what ``bor-wallet call`` answers); nothing is kept."""
        abi = self.abis[contract]
        call = ContractCall(AccountName(contract), action, (), abi.encode_action(action, args))
        trace = self.runtime.run_readonly(
            self.view, call, params=self.params, block_time_s=BLOCK_TIME_S,
            block_num=self.ctx.block_num, fuel_left=self.params.max_tx_fuel,
        )  # fmt: skip
        return abi.decode_result(action, trace.actions[0].return_value)

    def row(self, contract: str, scope: str | int, table: str, primary: int) -> Any:
        """The row of ``table`` with key ``primary``, decoded by the ABI, or None."""
        key = schema.row_key(*self._table_ids(contract, scope, table), primary)
        stored = self.view.raw(key)
        return None if stored is None else self.abis[contract].decode_table_row(table, stored[8:])

    def rows(self, contract: str, scope: str | int, table: str) -> list[Any]:
        """Every row of ``table`` in ``scope``, in primary key order, decoded by the ABI."""
        return [row for _, row in self._scan(contract, scope, table)]

    def _scan(self, contract: str, scope: str | int, table: str) -> Iterator[tuple[int, Any]]:
        ids = self._table_ids(contract, scope, table)
        start, stop = schema.row_key(*ids, 0), schema.row_key(*ids, _LAST_KEY) + b"\xff"
        abi = self.abis[contract]
        while (found := self.view.next_raw(start, stop)) is not None:
            key, value = found
            yield int.from_bytes(key[-8:], "big"), abi.decode_table_row(table, value[8:])
            start = key + b"\x00"

    @staticmethod
    def _table_ids(contract: str, scope: str | int, table: str) -> tuple[int, int, int]:
        scope_id = scope if isinstance(scope, int) else name_to_u64(scope)
        return name_to_u64(contract), scope_id, name_to_u64(table)

    def _result(self, trace: TxTrace) -> Result:
        events: list[tuple[str, Any]] = []
        for action in trace.actions:
            abi = self.abis.get(action.receiver)  # a notified contract emits by its own ABI
            for name, data in action.events:
                events.append((name, data if abi is None else abi.decode_event(name, data)))
        first = trace.actions[0]
        abi = self.abis[first.call.contract]
        value = None
        if first.return_value and first.call.action in abi.results:
            value = abi.decode_result(first.call.action, first.return_value)
        return Result(events, first.console, value, trace.fuel, trace)


@pytest.fixture
def contract_chain() -> LocalChain:
    """A fresh ``LocalChain`` with the dev accounts alice, bob and carol."""
    chain = LocalChain()
    chain.create_accounts("alice", "bob", "carol")
    return chain
