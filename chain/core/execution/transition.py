"""The state transition for transactions: one function per native action.

Every function takes a ``StateView`` and the action, checks one rule per line and raises a
typed ``TransactionError`` or writes the new objects. ``apply_transaction`` runs a
transaction's actions in a child view and merges it only if all of them succeed.

A ``call`` action runs contract code through the ``ContractHost`` in the ``Context``; a
transaction with one always runs in a child view, since a contract may fail after writing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chain.core.execution import indexes, ram
from chain.core.execution.actions import (
    Action,
    AllowCode,
    ApproveProducer,
    Call,
    NewAccount,
    RegProducer,
    SetCode,
    Stake,
    Transfer,
    UnregProducer,
    Unstake,
    UpdateKey,
    VoteProducer,
)
from chain.core.execution.contracts import (
    ContractCall,
    ContractHost,
    TxTrace,
    read_only_actions,
)
from chain.core.execution.sizes import min_block_bytes
from chain.core.execution.state import Account, Producer, StateView
from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives import schema
from chain.core.primitives.encoding import pack, unpack
from chain.core.primitives.errors import (
    BlockFuelExhausted,
    ContractError,
    DuplicateTransaction,
    ExpiredTransaction,
    InsufficientFunds,
    InvalidAction,
    MissingAuthority,
    OutOfFuel,
    OversizedTransaction,
    ReadOnlyAction,
    ResourceExceeded,
    TaposMismatch,
    Unauthorized,
    UnknownAccount,
)
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import MAX_AMOUNT, AccountName, PublicKey


@dataclass(frozen=True, slots=True)
class Context:
    """What a transaction may know about the block it runs in."""

    params: ChainParams
    block_time_s: int
    # What runs contract code; None where no contract can run (a call then fails).
    contracts: ContractHost | None = None
    block_num: int = 0  # the block being built, applied, or admitted into (head + 1)


# --- helpers ------------------------------------------------------------------------------


def settle(account: Account, now_s: int) -> Account:
    """Move unbonded stake whose delay has passed into the liquid balance."""
    if not account.unbonding or account.unbonding[0][0] > now_s:
        return account
    matured = sum(a for t, a in account.unbonding if t <= now_s)
    pending = tuple((t, a) for t, a in account.unbonding if t > now_s)
    return account._replace(balance=account.balance + matured, unbonding=pending)


def format_units(base_units: int, precision: int, symbol: str) -> str:
    """``base_units`` as the token amount a person reads and types: "10.5000 BOR"."""
    whole, fraction = divmod(abs(base_units), 10**precision)
    digits = f".{fraction:0{precision}d}" if precision else ""
    sign = "-" if base_units < 0 else ""
    return f"{sign}{whole}{digits} {symbol}"


def token_amount(base_units: int, params: ChainParams) -> str:
    """``base_units`` in the chain's token (its precision and symbol)."""
    return format_units(base_units, params.token_precision, params.token_symbol)


def _short_of(name: AccountName, has: int, needs: int, ctx: Context) -> InsufficientFunds:
    return InsufficientFunds(
        f"{name} has {token_amount(has, ctx.params)}, needs {token_amount(needs, ctx.params)}"
    )


def load_account(view: StateView, name: AccountName, ctx: Context) -> Account:
    account = view.account(name)
    if account is None:
        raise UnknownAccount(f"account {name!r} does not exist")
    return settle(account, ctx.block_time_s)


def _require_governance(actor: AccountName, ctx: Context) -> None:
    if actor not in ctx.params.governance:
        raise Unauthorized(f"{actor!r} is not a governance account")


def _shift_votes(view: StateView, producers: tuple[AccountName, ...], delta: int) -> None:
    for name in producers:
        producer = view.producer(name)
        assert producer is not None, "votes only ever name existing producers"
        view.put_producer(producer._replace(total_votes=producer.total_votes + delta))


# --- actions ------------------------------------------------------------------------------


def process_transfer(view: StateView, a: Transfer, ctx: Context) -> None:
    if a.sender == a.recipient:
        raise InvalidAction("cannot transfer to self")
    sender = load_account(view, a.sender, ctx)
    recipient = load_account(view, a.recipient, ctx)
    if sender.balance < a.amount:
        raise _short_of(a.sender, sender.balance, a.amount, ctx)
    if recipient.balance + a.amount > MAX_AMOUNT:
        raise InvalidAction("recipient balance would overflow")
    # Built directly rather than with _replace: this is the hottest path of block execution.
    s, r = sender, recipient
    view.put_account(Account(s.name, s.key, s.balance - a.amount, s.staked, s.unbonding, s.votes))
    view.put_account(Account(r.name, r.key, r.balance + a.amount, r.staked, r.unbonding, r.votes))


def process_newaccount(view: StateView, a: NewAccount, ctx: Context) -> None:
    _require_governance(a.creator, ctx)
    if view.account(a.name) is not None:
        raise InvalidAction(f"account {a.name!r} already exists")
    view.put_account(Account(a.name, a.key))


def process_updatekey(view: StateView, a: UpdateKey, ctx: Context) -> None:
    account = load_account(view, a.account, ctx)
    if account.key == a.key:
        raise InvalidAction("the new key is the current key")
    view.put_account(account._replace(key=a.key))


def process_stake(view: StateView, a: Stake, ctx: Context) -> None:
    account = load_account(view, a.account, ctx)
    if account.balance < a.amount:
        raise _short_of(a.account, account.balance, a.amount, ctx)
    view.put_account(
        account._replace(balance=account.balance - a.amount, staked=account.staked + a.amount)
    )
    _shift_votes(view, account.votes, a.amount)


def process_unstake(view: StateView, a: Unstake, ctx: Context) -> None:
    account = load_account(view, a.account, ctx)
    if account.staked < a.amount:
        raise InsufficientFunds(
            f"{a.account} has {token_amount(account.staked, ctx.params)} staked,"
            f" asks {token_amount(a.amount, ctx.params)}"
        )
    release = ctx.block_time_s + ctx.params.unbond_delay_s
    view.put_account(
        account._replace(
            staked=account.staked - a.amount,
            unbonding=(*account.unbonding, (release, a.amount)),
        )
    )
    _shift_votes(view, account.votes, -a.amount)


def process_regproducer(view: StateView, a: RegProducer, ctx: Context) -> None:
    load_account(view, a.account, ctx)
    existing = view.producer(a.account)
    if existing is None:
        view.put_producer(Producer(a.account, a.key, a.url))
    else:
        view.put_producer(existing._replace(key=a.key, url=a.url, registered=True))


def process_approveproducer(view: StateView, a: ApproveProducer, ctx: Context) -> None:
    _require_governance(a.governor, ctx)
    producer = view.producer(a.producer)
    if producer is None or not producer.registered:
        raise InvalidAction(f"{a.producer!r} is not a registered producer")
    if producer.approved:
        raise InvalidAction(f"{a.producer!r} is already approved")
    view.put_producer(producer._replace(approved=True))


def process_unregproducer(view: StateView, a: UnregProducer, ctx: Context) -> None:
    producer = view.producer(a.account)
    if producer is None or not producer.registered:
        raise InvalidAction(f"{a.account!r} is not a registered producer")
    view.put_producer(producer._replace(registered=False))


def process_voteproducer(view: StateView, a: VoteProducer, ctx: Context) -> None:
    voter = load_account(view, a.voter, ctx)
    if list(a.producers) != sorted(set(a.producers)):
        raise InvalidAction("producers must be sorted and unique")
    for name in a.producers:
        producer = view.producer(name)
        if producer is None or not producer.registered or not producer.approved:
            raise InvalidAction(f"{name!r} is not an approved, registered producer")
    _shift_votes(view, voter.votes, -voter.staked)
    _shift_votes(view, a.producers, voter.staked)
    view.put_account(voter._replace(votes=a.producers))


def deployed_code(view: StateView, account: str) -> tuple[bytes, str] | None:
    """``account``'s code hash and ABI text, or None if it has no code."""
    raw = view.raw(schema.code_key(account))
    if raw is None:
        return None
    code_hash, abi = unpack(raw, "code record")
    return bytes(code_hash), abi


def _host(ctx: Context) -> ContractHost:
    if ctx.contracts is None:
        raise ContractError("contracts are not enabled on this node")
    return ctx.contracts


def process_setcode(view: StateView, a: SetCode, ctx: Context) -> None:
    params = ctx.params
    load_account(view, a.account, ctx)
    if len(a.code) > params.max_code_bytes:
        raise ResourceExceeded(
            f"code is {len(a.code)} bytes, past max_code_bytes {params.max_code_bytes}"
        )
    approved = view.raw(schema.code_allowed_key(a.account)) is not None
    if params.contract_deploy == "approved" and not approved:
        raise Unauthorized(
            f"{a.account!r} may not deploy code: on this chain a governance account must "
            "allow it first (allowcode)"
        )
    code_hash = _host(ctx).validate(a.code, params)
    _host(ctx).validate_abi(a.abi)
    old = deployed_code(view, a.account)
    if old == (code_hash, a.abi):
        raise InvalidAction(f"{a.account!r} already runs this code with this ABI")
    indexes.check_new_indexes(view, a.account, "" if old is None else old[1], a.abi)
    old_wasm = view.raw(schema.wasm_key(a.account))
    old_bytes = 0 if old is None or old_wasm is None else ram.code_bytes(old_wasm, old[1])
    ram.charge(view, a.account, ram.code_bytes(a.code, a.abi) - old_bytes, params)
    view.put_raw(schema.code_key(a.account), pack([code_hash, a.abi]))
    view.put_raw(schema.wasm_key(a.account), a.code)


def process_allowcode(view: StateView, a: AllowCode, ctx: Context) -> None:
    _require_governance(a.governor, ctx)
    load_account(view, a.account, ctx)
    key = schema.code_allowed_key(a.account)
    allowed = view.raw(key) is not None
    if allowed == a.allowed:
        raise InvalidAction(f"{a.account!r} is already {'' if allowed else 'not '}allowed")
    view.put_raw(key, b"" if a.allowed else None)


def process_call(view: StateView, a: Call, ctx: Context, trace: TxTrace, block_fuel: int) -> None:
    """Run a contract action on ``view`` (a child view the caller drops on any error).

    ``block_fuel`` is the fuel the block has left; when it, not ``max_tx_fuel``, is what runs
    out (``OutOfFuel``), the error says so (BlockFuelExhausted), so that a producer tries it in
    the next block.
    """
    params = ctx.params
    host = _host(ctx)
    if len(a.data) > params.max_tx_bytes:
        raise ResourceExceeded(
            f"{a.contract}::{a.action_name}: data is {len(a.data)} bytes, "
            f"past max_tx_bytes {params.max_tx_bytes}"
        )
    deployed = deployed_code(view, a.contract)
    if deployed is None:
        raise ContractError(f"{a.contract}::{a.action_name}: {a.contract!r} has no contract code")
    if a.action_name in read_only_actions(deployed[1]):
        raise ReadOnlyAction(
            f"{a.contract}::{a.action_name}: a read-only action (its ABI says so) cannot be "
            "carried by a transaction; run it with call"
        )
    tx_left = params.max_tx_fuel - trace.fuel
    block_left = block_fuel - trace.fuel
    call = ContractCall(a.contract, a.action_name, a.authorization, a.data)
    try:
        host.run(
            view,
            call,
            trace,
            params=params,
            block_time_s=ctx.block_time_s,
            block_num=ctx.block_num,
            fuel_left=max(0, min(tx_left, block_left)),
        )
    except OutOfFuel as err:
        # Only running out of fuel can be the full block's doing; any other limit (RAM,
        # inline depth, sizes) is the transaction's own, whatever fuel the block has left.
        if block_left < tx_left:
            raise BlockFuelExhausted(
                f"block fuel: {a.contract}::{a.action_name} ran out of the "
                f"{max(0, block_left)} fuel left of max_block_fuel {params.max_block_fuel} "
                f"({err})"
            ) from err
        raise


_PROCESSORS: dict[type[Any], Callable[[StateView, Any, Context], None]] = {
    Transfer: process_transfer,
    NewAccount: process_newaccount,
    UpdateKey: process_updatekey,
    Stake: process_stake,
    Unstake: process_unstake,
    RegProducer: process_regproducer,
    ApproveProducer: process_approveproducer,
    UnregProducer: process_unregproducer,
    VoteProducer: process_voteproducer,
    SetCode: process_setcode,
    AllowCode: process_allowcode,
}


def apply_action(view: StateView, action: Action, ctx: Context) -> None:
    _PROCESSORS[type(action)](view, action, ctx)


# --- transactions -------------------------------------------------------------------------


def tx_size_limit(stx: SignedTransaction, params: ChainParams) -> int:
    """A transaction's size limit: ``max_tx_bytes``, plus ``max_code_bytes`` for one that
    deploys code (a module would not fit otherwise), but never more than a block holds: a
    transaction too large for any block would wait in the mempool and hold back the rest.
    ``min_block_bytes`` counts a length header of 2 bytes at size 0; a large one has 5."""
    if not any(type(a) is SetCode for a in stx.tx.actions):
        return params.max_tx_bytes
    in_a_block = params.max_block_bytes - min_block_bytes(0) - 3
    return max(params.max_tx_bytes, min(params.max_tx_bytes + params.max_code_bytes, in_a_block))


def check_limits(stx: SignedTransaction, ctx: Context) -> None:
    """Checks that need no state: size and expiration window."""
    size = len(stx.packed)
    if size > ctx.params.max_tx_bytes and size > (limit := tx_size_limit(stx, ctx.params)):
        raise OversizedTransaction(f"transaction is {size} bytes, limit {limit}")
    if stx.tx.expiration < ctx.block_time_s:
        raise ExpiredTransaction(f"expired at {stx.tx.expiration}, block time {ctx.block_time_s}")
    if stx.tx.expiration > ctx.block_time_s + ctx.params.max_tx_lifetime_s:
        raise ExpiredTransaction(
            f"expiration {stx.tx.expiration} is more than "
            f"{ctx.params.max_tx_lifetime_s} s after block time {ctx.block_time_s}"
        )


def check_tapos(view: StateView, stx: SignedTransaction) -> None:
    if not view.tapos_matches(stx.tx.ref_block_num, stx.tx.ref_block_prefix):
        raise TaposMismatch(
            f"reference block {stx.tx.ref_block_num}/{stx.tx.ref_block_prefix:#x} "
            "is not on this chain (from a different fork?)"
        )


def authorize(view: StateView, stx: SignedTransaction, keys: frozenset[PublicKey]) -> None:
    """Every actor's active key signed, and every signature was needed."""
    used: set[PublicKey] = set()
    for actor in stx.tx.actors():
        account = view.account(actor)
        if account is None:
            raise UnknownAccount(f"actor {actor!r} does not exist")
        if account.key not in keys:
            raise MissingAuthority(f"missing signature of {actor!r}")
        used.add(account.key)
    if len(keys) != len(used) or len(stx.signatures) != len(keys):
        raise MissingAuthority("transaction carries signatures nobody required")


def apply_transaction(
    view: StateView,
    stx: SignedTransaction,
    keys: frozenset[PublicKey],
    ctx: Context,
    *,
    check_auth: bool = True,
    block_fuel: int | None = None,
) -> TxTrace | None:
    """Apply all of ``stx`` to ``view`` or, on any error, nothing of it; the trace of the
    contract actions it ran, or None if it has none (native actions only).

    ``check_auth=False`` is light validation of irreversible history: signer keys were not
    recovered, so authority is taken as given; every other rule still holds. ``block_fuel``:
    the fuel the block has left for contracts (``max_block_fuel`` when not given).
    """
    check_limits(stx, ctx)
    check_tapos(view, stx)
    if view.tx_seen(stx.id):
        raise DuplicateTransaction(f"transaction {stx.id.hex()} was already applied")
    if check_auth:
        authorize(view, stx, keys)
    actions = stx.tx.actions
    if len(actions) == 1 and type(actions[0]) is not Call:
        # Every processor checks all its rules before its first write, so a single action
        # that fails has written nothing: no child view is needed (the common case).
        apply_action(view, actions[0], ctx)
        view.mark_tx(stx.id)
        return None
    child = view.child()
    trace: TxTrace | None = None
    fuel = ctx.params.max_block_fuel if block_fuel is None else block_fuel
    for action in actions:
        if type(action) is Call:
            if trace is None:
                trace = TxTrace()
            process_call(child, action, ctx, trace, fuel)
        else:
            apply_action(child, action, ctx)
    child.mark_tx(stx.id)
    child.merge_into_parent()
    return trace
