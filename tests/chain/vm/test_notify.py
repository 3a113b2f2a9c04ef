"""Notifications (``require_recipient``) and read-only actions in the runtime, with WAT
contracts: who runs, in which order and depth, as which receiver and code, on whose fuel and
tables, and what is refused."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from chain.core.execution.contracts import (
    ActionTrace,
    ContractCall,
    TxTrace,
    decode_traces,
    encode_traces,
    name_to_u64,
    read_only_actions,
)
from chain.core.execution.state import Account, StateView
from chain.core.primitives import schema
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.encoding import pack
from chain.core.primitives.errors import (
    ContractError,
    OutOfFuel,
    ReadOnlyAction,
    ResourceExceeded,
)
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName
from chain.testing import MemoryKV
from chain.vm import ContractRuntime
from chain.vm.host import MAX_RECIPIENTS, signed64
from chain.vm.runtime import ACTION_FUEL
from tests.chain.vm.wat import contract, deploy, le, run

KEY = PrivateKey.generate().public_key


@pytest.fixture(scope="module")
def runtime() -> ContractRuntime:
    return ContractRuntime()


def i64(name: str) -> str:
    return f"(i64.const {signed64(name_to_u64(name))})"


def notifier(*names: str) -> bytes:
    """A contract whose every action notifies ``names``, in order."""
    return contract("\n".join(f"(call $require_recipient {i64(n)})" for n in names))


# A handler that reports how it was called: an event "seen" of receiver, code and action (u64
# LE each), and a row in its own table "seen" (scope = code, primary key = action).
LISTENER = contract(
    f"""
    (i64.store (i32.const 0) (local.get $receiver))
    (i64.store (i32.const 8) (local.get $code))
    (i64.store (i32.const 16) (local.get $action))
    (call $emit_event {i64("seen")} (i32.const 0) (i32.const 24))
    (drop (call $db_store_i64 (local.get $code) {i64("seen")} (local.get $receiver)
      (local.get $action) (i32.const 0) (i32.const 24)))
    """
)


def chain_of(runtime: ContractRuntime, contracts: dict[str, bytes], *plain: str) -> StateView:
    """A state with ``contracts`` deployed and ``plain`` accounts without code (alice too)."""
    view = StateView(MemoryKV())
    for name in [*contracts, *plain, "alice"]:
        view.put_account(Account(AccountName(name), KEY))
    for name, code in contracts.items():
        deploy(view, runtime, name, code)
    return view


def seen(trace: ActionTrace) -> tuple[int, int, int]:
    (name, data) = trace.events[0]
    assert name == "seen"
    return struct.unpack("<QQQ", data)


def test_notified_contracts_run_after_the_action_as_receiver_with_its_code(
    runtime: ContractRuntime,
) -> None:
    """Each notified account, once and in order, never the receiver, runs the action one
    level deeper with receiver = itself and code = the contract; a plain one is recorded."""
    view = chain_of(
        runtime,
        {
            "token": notifier("bob", "carol", "bob", "token", "dave"),
            "bob": LISTENER,
            "dave": LISTENER,
        },
        "carol",
    )
    trace = run(runtime, view, "token", "transfer", data=b"\x07")
    shown = [(a.receiver, a.call.contract, a.call.action, a.depth) for a in trace.actions]
    assert shown == [
        ("token", "token", "transfer", 0),
        ("bob", "token", "transfer", 1),
        ("carol", "token", "transfer", 1),
        ("dave", "token", "transfer", 1),
    ]
    token, bob, transfer = name_to_u64("token"), name_to_u64("bob"), name_to_u64("transfer")
    assert seen(trace.actions[1]) == (bob, token, transfer)
    assert seen(trace.actions[3]) == (name_to_u64("dave"), token, transfer)
    assert all(a.call == trace.actions[0].call for a in trace.actions)  # data and authorization
    carol = trace.actions[2]
    assert (carol.fuel, carol.events, carol.notified) == (0, [], True)
    # The handler wrote its own table, not the notifying contract's.
    assert view.raw(schema.row_key(bob, token, name_to_u64("seen"), transfer)) is not None
    assert view.raw(schema.row_key(token, token, name_to_u64("seen"), transfer)) is None


def test_notifications_spend_the_transactions_fuel(runtime: ContractRuntime) -> None:
    """A handler's fuel (its instance included) is the transaction's: the total is the sum,
    and a budget that covers the action alone runs out in the handler."""
    contracts = {"token": notifier("bob"), "bob": LISTENER}
    trace = run(runtime, chain_of(runtime, contracts), "token")
    assert trace.fuel == sum(a.fuel for a in trace.actions)
    assert trace.actions[1].fuel > ACTION_FUEL
    alone = trace.actions[0].fuel
    with pytest.raises(OutOfFuel, match=r"^bob \(notified of token::go\): out of fuel"):
        run(runtime, chain_of(runtime, contracts), "token", fuel=alone + ACTION_FUEL)


def test_a_failing_handler_fails_the_action(runtime: ContractRuntime) -> None:
    """A notified contract that traps fails the whole action, naming itself and the action."""
    contracts = {"token": notifier("bob"), "bob": contract("unreachable")}
    with pytest.raises(ContractError, match=r"^bob \(notified of token::go\): unreachable$"):
        run(runtime, chain_of(runtime, contracts), "token")


def test_notifications_are_depth_limited_like_inline_actions(runtime: ContractRuntime) -> None:
    """A handler runs one level deeper, so it cannot run past max_inline_depth; an account
    without a contract, which runs nothing, is still recorded there."""
    shallow = dataclasses.replace(ChainParams(), max_inline_depth=0)
    view = chain_of(runtime, {"token": notifier("carol", "bob"), "bob": LISTENER}, "carol")
    with pytest.raises(ResourceExceeded, match=r"^bob \(notified of token::go\): inline depth 1"):
        run(runtime, view, "token", params=shallow)
    plain = chain_of(runtime, {"token": notifier("carol")}, "carol")
    assert [a.receiver for a in run(runtime, plain, "token", params=shallow).actions] == [
        "token",
        "carol",
    ]


def test_handlers_share_the_actions_recipients(runtime: ContractRuntime) -> None:
    """A handler's own require_recipient adds to the action's list (Antelope's): each account
    runs once, so two contracts notifying each other stop."""
    view = chain_of(runtime, {"token": notifier("bob"), "bob": notifier("carol", "token", "bob")})
    view.put_account(Account(AccountName("carol"), KEY))
    trace = run(runtime, view, "token")
    assert [(a.receiver, a.depth) for a in trace.actions] == [
        ("token", 0),
        ("bob", 1),
        ("carol", 1),
    ]


def test_notifying_too_many_or_no_account_is_refused(runtime: ContractRuntime) -> None:
    """At most MAX_RECIPIENTS accounts per action, and only accounts that exist."""
    names = [f"user{chr(ord('a') + i)}" for i in range(MAX_RECIPIENTS + 1)]
    view = chain_of(runtime, {"token": notifier(*names)}, *names)
    with pytest.raises(ResourceExceeded, match=rf"more than {MAX_RECIPIENTS} accounts notified"):
        run(runtime, view, "token")
    ghost = chain_of(runtime, {"token": notifier("nobody")})
    with pytest.raises(ContractError, match=r"^token::go: require_recipient: no account nobody$"):
        run(runtime, ghost, "token")


def test_a_read_only_call_runs_the_called_action_alone(runtime: ContractRuntime) -> None:
    """In a read-only call require_recipient checks the account and runs no handler: the
    trace holds the called action only (a dry run of a transfer reaches its own checks)."""
    view = chain_of(runtime, {"token": notifier("bob"), "bob": LISTENER})
    trace = runtime.run_readonly(
        view,
        ContractCall(AccountName("token"), "go", (), b""),
        params=ChainParams(),
        block_time_s=1_700_000_000,
        block_num=1,
        fuel_left=10_000_000,
    )
    assert [(a.receiver, a.call.contract) for a in trace.actions] == [("token", "token")]
    ghost = chain_of(runtime, {"token": notifier("nobody")})
    with pytest.raises(ContractError, match=r"require_recipient: no account nobody$"):
        runtime.run_readonly(
            ghost,
            ContractCall(AccountName("token"), "go", (), b""),
            params=ChainParams(),
            block_time_s=1_700_000_000,
            block_num=1,
            fuel_left=10_000_000,
        )


def inline_as(actor: str, target: str = "sink", action: str = "take") -> str:
    """WAT that sends ``target::action`` inline with ``actor``@active as its one permission
    level, no data (34 bytes)."""
    level = f"{le(name_to_u64(actor))}{le(name_to_u64('active'))}"
    body = f"{le(name_to_u64(target))}{le(name_to_u64(action))}\\01{level}\\00"
    return f'(data (i32.const 100) "{body}")'


def test_a_handler_sends_inline_as_itself_only(runtime: ContractRuntime) -> None:
    """A notified contract may send an inline action as itself, not as the authorizers of
    the action it was notified of (they called the notifying contract, not it)."""
    send = "(call $send_inline (i32.const 100) (i32.const 34))"
    as_self = contract(send, data=inline_as("bob"))
    view = chain_of(runtime, {"token": notifier("bob"), "bob": as_self, "sink": contract("")})
    trace = run(runtime, view, "token", auth=("alice",))
    assert [(a.receiver, a.call.action, a.depth) for a in trace.actions] == [
        ("token", "go", 0),
        ("bob", "go", 1),
        ("sink", "take", 1),
    ]
    as_alice = contract(send, data=inline_as("alice"))
    view = chain_of(runtime, {"token": notifier("bob"), "bob": as_alice, "sink": contract("")})
    with pytest.raises(ContractError, match="send_inline: alice did not authorize bob"):
        run(runtime, view, "token", auth=("alice",))


def deploy_with_abi(view: StateView, runtime: ContractRuntime, name: str, code: bytes) -> None:
    abi = '{"version": "bor::abi/1", "actions": [{"name": "peek", "type": "x", "read_only": true}]}'
    deploy(view, runtime, name, code)
    digest = runtime.validate(code, ChainParams())
    view.put_raw(schema.code_key(name), pack([digest, abi]))


def test_a_read_only_action_cannot_be_sent_inline(runtime: ContractRuntime) -> None:
    """An action the stored ABI marks read-only is refused inline in a transaction, while
    a read-only call still runs it."""
    relay = contract(
        "(call $send_inline (i32.const 100) (i32.const 34))",
        data=inline_as("relay", "reader", "peek"),
    )
    view = chain_of(runtime, {"relay": relay})
    view.put_account(Account(AccountName("reader"), KEY))
    deploy_with_abi(view, runtime, "reader", contract(""))
    with pytest.raises(ReadOnlyAction, match=r"^reader::peek: a read-only action .* sent inline"):
        run(runtime, view, "relay")
    trace = runtime.run_readonly(
        view,
        ContractCall(AccountName("reader"), "peek", (), b""),
        params=ChainParams(),
        block_time_s=1_700_000_000,
        block_num=1,
        fuel_left=10_000_000,
    )
    assert [a.call.action for a in trace.actions] == ["peek"]


@pytest.mark.parametrize(
    ("abi", "marked"),
    [
        ('{"actions": [{"name": "a", "read_only": true}, {"name": "b"}]}', {"a"}),
        ('{"actions": [{"name": "a", "read_only": 1}, {"name": "b", "read_only": "yes"}]}', set()),
        ("not json", set()),
        ('{"actions": 7}', set()),
        ("", set()),
    ],
)
def test_read_only_actions_are_read_leniently_from_the_stored_abi(
    abi: str, marked: set[str]
) -> None:
    """Only a literal true marks an action; an ABI that is no JSON marks none (no error)."""
    assert read_only_actions(abi) == marked


def test_a_notifications_receiver_survives_the_trace_store() -> None:
    """Traces keep a notification's receiver; a trace stored before notifications (nine
    items) decodes with the contract as receiver."""
    call = ContractCall(AccountName("token"), "transfer", (AccountName("alice"),), b"\x01")
    trace = TxTrace(
        [ActionTrace(call, 0, 5), ActionTrace(call, 1, 7, receiver=AccountName("bob"))], 12
    )
    [(_, back)] = decode_traces(encode_traces([(b"\x09" * 32, trace)]))
    assert back == trace
    assert [a.receiver for a in back.actions] == ["token", "bob"]
    assert len(trace.actions[0].encode()) == 9
    assert ActionTrace.decode(trace.actions[0].encode()).receiver == "token"
