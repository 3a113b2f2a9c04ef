"""Inline actions as Antelope encodes them (permission levels), and the one native action a
contract may send: a transfer of the chain's token, as eosio.token::transfer."""

from __future__ import annotations

import struct

import pytest

from chain.core.execution.contracts import name_to_u64
from chain.core.execution.state import Account, StateView
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.errors import ContractError, ContractMissingAuthority
from chain.core.primitives.types import AccountName
from chain.testing import MemoryKV
from chain.vm import ContractRuntime
from tests.chain.vm.wat import contract, deploy, run

BOR = 4 | int.from_bytes(b"BOR", "little") << 8  # the default chain's token: 4,BOR
KEY = PrivateKey(b"\x05" * 32).public_key


@pytest.fixture(scope="module")
def runtime() -> ContractRuntime:
    return ContractRuntime()


def u64(name: str) -> bytes:
    return name_to_u64(name).to_bytes(8, "little")


def action(contract_: str, name: str, levels: list[tuple[str, str]], data: bytes) -> bytes:
    """Antelope's packed action: account, name, permission levels, data."""
    out = u64(contract_) + u64(name) + bytes([len(levels)])
    for actor, permission in levels:
        out += u64(actor) + u64(permission)
    return out + bytes([len(data)]) + data


def transfer(sender: str, to: str, amount: int, memo: bytes = b"hi", symbol: int = BOR) -> bytes:
    return u64(sender) + u64(to) + struct.pack("<qQ", amount, symbol) + bytes([len(memo)]) + memo


def sender(packed: bytes) -> bytes:
    """A contract that sends ``packed`` inline."""
    hexed = "".join(f"\\{b:02x}" for b in packed)
    return contract(
        f"(call $send_inline (i32.const 0) (i32.const {len(packed)}))",
        data=f'(data (i32.const 0) "{hexed}")',
    )


def chain_with(runtime: ContractRuntime, packed: bytes) -> StateView:
    view = StateView(MemoryKV())
    for name, balance in (("payer", 50_000), ("bob", 0), ("alice", 20_000)):
        view.put_account(Account(AccountName(name), KEY, balance=balance))
    deploy(view, runtime, "payer", sender(packed))
    return view


def test_a_contract_pays_in_the_chains_token(runtime: ContractRuntime) -> None:
    """An inline eosio.token::transfer from the contract's own account moves native BOR,
    and shows in the trace one level deeper, for an action's fuel."""
    packed = action(
        "eosio.token", "transfer", [("payer", "active")], transfer("payer", "bob", 10_000)
    )
    view = chain_with(runtime, packed)
    trace = run(runtime, view, "payer")
    balances = {n: view.account(AccountName(n)).balance for n in ("payer", "bob")}  # type: ignore[union-attr]
    assert balances == {"payer": 40_000, "bob": 10_000}
    native = trace.actions[1]
    assert (native.call.contract, native.call.action, native.depth) == (
        "eosio.token",
        "transfer",
        1,
    )
    assert native.call.authorization == ("payer",)
    assert trace.fuel == sum(a.fuel for a in trace.actions)


def test_an_authorizer_of_the_action_may_pay_too(runtime: ContractRuntime) -> None:
    """The actor may be an account that authorized the running action (alice here)."""
    packed = action("eosio.token", "transfer", [("alice", "active")], transfer("alice", "bob", 5))
    view = chain_with(runtime, packed)
    run(runtime, view, "payer", auth=("alice",))
    assert view.account(AccountName("bob")).balance == 5  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("packed", "error", "match"),
    [
        (
            action("eosio.token", "transfer", [("alice", "active")], transfer("alice", "bob", 5)),
            ContractError,
            "send_inline: alice did not authorize payer::go",
        ),
        (
            action("eosio.token", "transfer", [("payer", "active")], transfer("alice", "bob", 5)),
            ContractMissingAuthority,
            "eosio.token::transfer: missing authority of alice",
        ),
        (
            action("eosio.token", "transfer", [("payer", "owner")], transfer("payer", "bob", 5)),
            ContractError,
            "permission payer@owner: only active",
        ),
        (
            action(
                "eosio.token", "transfer", [("payer", "active")], transfer("payer", "bob", 10**6)
            ),
            ContractError,
            "eosio.token::transfer: .*payer",
        ),
        (
            action(
                "eosio.token",
                "transfer",
                [("payer", "active")],
                transfer("payer", "bob", 5, symbol=BOR + 1),
            ),
            ContractError,
            "quantity must be a positive amount of 4,BOR",
        ),
        (
            action("eosio.token", "transfer", [("payer", "active")], transfer("payer", "bob", 0)),
            ContractError,
            "positive amount",
        ),
        (
            action("eosio.token", "stake", [("payer", "active")], transfer("payer", "bob", 5)),
            ContractError,
            "transfer is the only native action",
        ),
        (
            action(
                "eosio.token", "transfer", [("payer", "active")], transfer("payer", "bob", 5)[:-1]
            ),
            ContractError,
            "memo must be its length",
        ),
        (
            action(
                "eosio.token",
                "transfer",
                [("payer", "active")],
                transfer("payer", "bob", 5, memo=b"\xff"),
            ),
            ContractError,
            "memo is not UTF-8",
        ),
        (
            action(
                "eosio.token", "transfer", [("payer", "active")], transfer("payer", "nobody", 5)
            ),
            ContractError,
            "nobody",
        ),
    ],
    ids=[
        "foreign-actor",
        "from-not-an-actor",
        "owner-permission",
        "overdrawn",
        "wrong-symbol",
        "zero",
        "other-native",
        "short-memo",
        "bad-utf8",
        "no-recipient",
    ],
)
def test_bad_native_transfers_abort_and_move_nothing(
    runtime: ContractRuntime, packed: bytes, error: type[Exception], match: str
) -> None:
    """Every way an inline native transfer can be wrong aborts the transaction by name."""
    view = chain_with(runtime, packed)
    child = view.child()
    with pytest.raises(error, match=match):
        run(runtime, child, "payer", auth=("carol",))
    assert view.account(AccountName("payer")).balance == 50_000  # type: ignore[union-attr]
