"""The contract actions in the state transition: deploying code (and who may), storage
billing for code, and calls that run in a child view (a scripted host stands in for wasmtime)."""

from __future__ import annotations

import dataclasses

import pytest

from chain.core.execution import ram
from chain.core.execution.actions import AllowCode, Call, SetCode, Transfer
from chain.core.execution.contracts import TxTrace
from chain.core.execution.state import Account, StateView
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.execution.transition import Context, apply_action, apply_transaction
from chain.core.primitives import schema
from chain.core.primitives.crypto import PrivateKey, sha256
from chain.core.primitives.encoding import unpack
from chain.core.primitives.errors import (
    BlockFuelExhausted,
    ContractError,
    InvalidAction,
    OversizedTransaction,
    ReadOnlyAction,
    ResourceExceeded,
    Unauthorized,
)
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName, BlockId, PublicKey
from chain.testing import MemoryKV
from tests.chain.contract_fakes import ScriptedHost, script

KEYS = {n: PrivateKey(bytes([i + 1]) * 32) for i, n in enumerate(["gov", "alice", "bob", "token"])}
PARAMS = ChainParams(governance=(AccountName("gov"),))
NOW = 1_000_000
GENESIS_ID = BlockId(bytes(4) + b"\x07" * 28)
CODE = b"\x00asm" + bytes(100)
A, T = AccountName("alice"), AccountName("token")


@pytest.fixture
def host() -> ScriptedHost:
    return ScriptedHost()


@pytest.fixture
def ctx(host: ScriptedHost) -> Context:
    return Context(PARAMS, NOW, host, 7)


@pytest.fixture
def view(ctx: Context) -> StateView:
    v = StateView(MemoryKV())
    for name, key in KEYS.items():
        v.put_account(Account(AccountName(name), key.public_key, balance=1000))
    v.set_block_summary(0, GENESIS_ID)
    apply_action(v, SetCode(T, CODE, "{}"), ctx)
    return v


def _stx(*actions: object, signers: list[str]) -> SignedTransaction:
    ref_num, ref_prefix = tapos_of(GENESIS_ID)
    tx = Transaction(NOW + 60, ref_num, ref_prefix, tuple(actions))  # type: ignore[arg-type]
    return SignedTransaction.sign(tx, b"chain", [KEYS[s] for s in signers])


def _keys(*names: str) -> frozenset[PublicKey]:
    return frozenset(KEYS[n].public_key for n in names)


def _call(*steps: str, auth: tuple[str, ...] = ("alice",)) -> Call:
    return Call(T, "run", tuple(AccountName(a) for a in auth), script(*steps))


# --- setcode and allowcode --------------------------------------------------------------------


def test_setcode_stores_hash_abi_and_module_and_bills_the_account(
    view: StateView, ctx: Context
) -> None:
    """setcode writes the code record (hash, ABI) and the module, and bills the account
    len(code) + len(abi) + 100 bytes of contract storage."""
    apply_action(view, SetCode(A, CODE, '{"v": 1}'), ctx)
    code_hash, abi = unpack(view.raw(schema.code_key(A)) or b"", "code")
    assert (code_hash, abi) == (sha256(CODE), '{"v": 1}')
    assert view.raw(schema.wasm_key(A)) == CODE
    assert ram.used(view, A) == len(CODE) + 8 + 100


def test_redeploying_refunds_the_old_code_and_the_same_code_is_refused(
    view: StateView, ctx: Context
) -> None:
    """New code replaces the old and the account pays for the new size only; deploying the
    code and ABI it already runs is refused and changes nothing."""
    apply_action(view, SetCode(A, CODE, ""), ctx)
    bigger = CODE + bytes(500)
    apply_action(view, SetCode(A, bigger, ""), ctx)
    assert ram.used(view, A) == len(bigger) + 100
    before = view.changes()
    with pytest.raises(InvalidAction, match="already runs this code"):
        apply_action(view, SetCode(A, bigger, ""), ctx)
    assert view.changes() == before


@pytest.mark.parametrize(
    ("code", "params", "error", "message"),
    [
        (b"bad module", PARAMS, ContractError, "not valid WebAssembly"),
        (
            CODE,
            dataclasses.replace(PARAMS, max_code_bytes=50),
            ResourceExceeded,
            "max_code_bytes 50",
        ),
        (
            CODE,
            dataclasses.replace(PARAMS, max_ram_bytes=150),
            ResourceExceeded,
            "alice uses 204 bytes of contract storage, past max_ram_bytes 150",
        ),
    ],
)
def test_refused_code_writes_nothing(
    view: StateView,
    host: ScriptedHost,
    code: bytes,
    params: ChainParams,
    error: type[Exception],
    message: str,
) -> None:
    """Code the runtime finds invalid, code over max_code_bytes and code its account cannot
    pay for are refused with a message naming the limit, and nothing is written."""
    before = view.changes()
    with pytest.raises(error, match=message):
        apply_action(view, SetCode(A, code, ""), Context(params, NOW, host, 7))
    assert view.changes() == before


def test_setcode_without_a_runtime_is_refused(view: StateView) -> None:
    """A node without a contract host refuses setcode rather than storing unchecked code."""
    with pytest.raises(ContractError, match="not enabled"):
        apply_action(view, SetCode(A, CODE, ""), Context(PARAMS, NOW))


def test_on_an_approved_chain_only_allowed_accounts_deploy(
    view: StateView, host: ScriptedHost
) -> None:
    """With contract_deploy = approved, alice may deploy only after a governance account
    allowed her; only governance may allow; allowing twice or disallowing the not allowed
    is refused; disallowing removes the entry."""
    ctx = Context(dataclasses.replace(PARAMS, contract_deploy="approved"), NOW, host, 7)
    with pytest.raises(Unauthorized, match="allowcode"):
        apply_action(view, SetCode(A, CODE, ""), ctx)
    with pytest.raises(Unauthorized):
        apply_action(view, AllowCode(AccountName("bob"), A, True), ctx)
    apply_action(view, AllowCode(AccountName("gov"), A, True), ctx)
    with pytest.raises(InvalidAction, match="already allowed"):
        apply_action(view, AllowCode(AccountName("gov"), A, True), ctx)
    apply_action(view, SetCode(A, CODE, ""), ctx)
    apply_action(view, AllowCode(AccountName("gov"), A, False), ctx)
    assert view.raw(schema.code_allowed_key(A)) is None
    with pytest.raises(InvalidAction, match="not allowed"):
        apply_action(view, AllowCode(AccountName("gov"), A, False), ctx)


# --- calls -------------------------------------------------------------------------------------


def test_a_native_transaction_has_no_trace_and_a_call_returns_its_trace(
    view: StateView, ctx: Context
) -> None:
    """apply_transaction returns None for native actions only, and for a call the trace the
    host filled: its actions, events (here carrying the context's block number) and fuel."""
    native = _stx(Transfer(A, AccountName("bob"), 1), signers=["alice"])
    assert apply_transaction(view, native, _keys("alice"), ctx) is None
    stx = _stx(_call("put:k=v", "burn:500", "emit:moved"), signers=["alice"])
    trace = apply_transaction(view, stx, _keys("alice"), ctx)
    assert isinstance(trace, TxTrace)
    assert trace.fuel == 500
    assert [a.call.action for a in trace.actions] == ["run"]
    assert trace.actions[0].events == [("moved", (7).to_bytes(4, "big"))]
    assert view.raw(schema.ROW + b"k") == b"v"
    assert view.tx_seen(stx.id)


def test_a_failing_call_leaves_nothing_of_its_transaction(view: StateView, ctx: Context) -> None:
    """A transaction whose transfer and first call succeed and whose second call fails leaves
    no balance change, no row and no record of the transaction."""
    before = view.changes()
    stx = _stx(
        Transfer(A, AccountName("bob"), 10), _call("put:k=v"), _call("put:j=w", "fail"),
        signers=["alice"],
    )  # fmt: skip
    with pytest.raises(ContractError, match="token::run: assertion failed"):
        apply_transaction(view, stx, _keys("alice"), ctx)
    assert view.changes() == before
    assert not view.tx_seen(stx.id)


@pytest.mark.parametrize(
    ("ctx_of", "call", "message"),
    [
        (lambda c: Context(PARAMS, NOW), _call("put:k=v"), "contracts are not enabled"),
        (lambda c: c, Call(A, "run", (A,), b""), "'alice' has no contract code"),
    ],
)
def test_calls_that_cannot_run(
    view: StateView, ctx: Context, ctx_of: object, call: Call, message: str
) -> None:
    """A call on a node without a contract host, and a call to an account without code, are
    refused as contract errors and write nothing."""
    before = view.changes()
    with pytest.raises(ContractError, match=message):
        apply_transaction(view, _stx(call, signers=["alice"]), _keys("alice"), ctx_of(ctx))  # type: ignore[operator]
    assert view.changes() == before


def test_a_transaction_carrying_a_read_only_action_is_refused(
    view: StateView, ctx: Context
) -> None:
    """An action that the ABI stored at setcode marks read_only is refused before any code
    runs, by its own error name, writing nothing; the contract's other actions still run."""
    abi = '{"version": "bor::abi/1", "actions": [{"name": "run", "type": "x", "read_only": true}]}'
    apply_action(view, SetCode(T, CODE, abi), ctx)
    before = view.changes()
    stx = _stx(_call("put:k=v"), signers=["alice"])
    with pytest.raises(
        ReadOnlyAction, match=r"^token::run: a read-only action .* run it with call"
    ):
        apply_transaction(view, stx, _keys("alice"), ctx)
    assert view.changes() == before
    other = (
        '{"version": "bor::abi/1", "actions": [{"name": "peek", "type": "x", "read_only": true}]}'
    )
    apply_action(view, SetCode(T, CODE, other), ctx)
    assert apply_transaction(view, stx, _keys("alice"), ctx) is not None


def test_fuel_is_shared_by_the_calls_of_a_transaction(view: StateView, host: ScriptedHost) -> None:
    """Each call gets what the transaction's max_tx_fuel has left after the calls before it:
    two calls of 600 fuel pass a limit of 1200 and fail one of 1000, naming max_tx_fuel."""
    stx = _stx(_call("burn:600"), _call("burn:600"), signers=["alice"])
    roomy = Context(dataclasses.replace(PARAMS, max_tx_fuel=1200), NOW, host, 7)
    assert apply_transaction(view.child(), stx, _keys("alice"), roomy) is not None
    tight = Context(dataclasses.replace(PARAMS, max_tx_fuel=1000), NOW, host, 7)
    with pytest.raises(ResourceExceeded, match="max_tx_fuel") as info:
        apply_transaction(view, stx, _keys("alice"), tight)
    assert not isinstance(info.value, BlockFuelExhausted)


def test_running_out_of_the_blocks_fuel_is_told_apart(view: StateView, ctx: Context) -> None:
    """When the block has less fuel left than max_tx_fuel and the call runs out, the error is
    BlockFuelExhausted (the transaction may fit the next block), naming max_block_fuel."""
    stx = _stx(_call("burn:600"), signers=["alice"])
    with pytest.raises(BlockFuelExhausted, match=r"block fuel.*max_block_fuel"):
        apply_transaction(view, stx, _keys("alice"), ctx, block_fuel=500)
    assert apply_transaction(view, stx, _keys("alice"), ctx, block_fuel=600) is not None


def test_only_running_out_of_fuel_is_blamed_on_the_block(view: StateView, ctx: Context) -> None:
    """A limit other than fuel (here RAM) hit in a nearly full block stays the transaction's
    own ResourceExceeded: it is dropped, not sent back to the mempool as BlockFuelExhausted."""
    stx = _stx(_call("burn:100;ram"), signers=["alice"])
    with pytest.raises(ResourceExceeded, match="max_ram_bytes") as info:
        apply_transaction(view, stx, _keys("alice"), ctx, block_fuel=500)
    assert not isinstance(info.value, BlockFuelExhausted)


# --- size -----------------------------------------------------------------------------------------


def test_a_setcode_transaction_may_be_as_large_as_max_tx_bytes_plus_max_code_bytes(
    view: StateView, ctx: Context
) -> None:
    """A setcode transaction over max_tx_bytes but within max_tx_bytes + max_code_bytes is
    admitted; a call of the same size is refused as too large, naming max_tx_bytes."""
    big = CODE + bytes(PARAMS.max_tx_bytes)
    apply_transaction(view, _stx(SetCode(A, big, ""), signers=["alice"]), _keys("alice"), ctx)
    call = Call(T, "run", (A,), b"put:k=" + bytes(PARAMS.max_tx_bytes))
    with pytest.raises(OversizedTransaction, match=f"limit {PARAMS.max_tx_bytes}$"):
        apply_transaction(view, _stx(call, signers=["alice"]), _keys("alice"), ctx)
    huge = bytes(PARAMS.max_tx_bytes + PARAMS.max_code_bytes)
    limit = PARAMS.max_tx_bytes + PARAMS.max_code_bytes
    with pytest.raises(OversizedTransaction, match=f"limit {limit}$"):
        apply_transaction(view, _stx(SetCode(A, huge, ""), signers=["alice"]), _keys("alice"), ctx)
