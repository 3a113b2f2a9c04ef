"""The block transition: what a block does to the chain, as pure functions.

After ethereum/consensus-specs (``process_block_header``, ``process_block``,
``state_transition``): each function takes the parent's header state (and, to execute, a
reader of the parent's state) and returns a value; a broken rule raises ``InvalidBlock``,
one check per line. Nothing here writes to the store, reads the clock (``now_ms`` comes in)
or touches the fork database: the controller commits what comes out.

A block is judged in two steps because fork choice ranks branches this node has not
executed (the state at a fork's parent exists only once the chain switches to that branch):

- ``process_block_header`` needs the parent's header state alone: the header's rules, the
  producer's signature, the transaction root, the next header state, and evidence when the
  producer already signed another block for the slot.
- ``process_block_body`` runs a block whose header was judged so on its parent's state: the
  transactions, the election and the state root; out come every state write with the value
  it replaces (the undo record). The controller calls it when fork choice applies the block,
  so the header's signature is recovered once, when the block arrives.
- ``block_transition`` is the two together: a block judged whole.

``execute_transactions`` is the one execution path: a block from a peer runs it strictly
(a failing transaction fails the block); the producer runs it leniently to pick what fits.
Contract code runs through the ``ContractHost`` handed in (``contracts``); a block's contract
fuel is summed against ``max_block_fuel``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from chain.core.consensus.block import (
    BlockHeader,
    Schedule,
    SignedBlock,
    SignedHeader,
    header_digest,
)
from chain.core.consensus.dpos import HeaderState, elect
from chain.core.consensus.finality_rules import check_qc_claim, verify_block_qc
from chain.core.execution import engine
from chain.core.execution.actions import Call
from chain.core.execution.contracts import ContractHost, TxTrace
from chain.core.execution.state import Changes, KVReader, StateView
from chain.core.execution.state_hash import StateHash
from chain.core.execution.transaction import SignedTransaction
from chain.core.execution.transition import Context, apply_transaction
from chain.core.primitives.crypto import recover
from chain.core.primitives.errors import (
    BadSignature,
    BlockFuelExhausted,
    InvalidBlock,
    OversizedBlock,
    TransactionError,
)
from chain.core.primitives.merkle import merkle_root
from chain.core.primitives.params import SLOT_MS, ChainParams, slot_start_ms, slot_time_s
from chain.core.primitives.types import BlockId, PublicKey, TxId

__all__ = [
    "BlockTransition",
    "Evidence",
    "Execution",
    "HeaderVerdict",
    "StateReader",
    "block_transition",
    "execute_transactions",
    "find_double_sign",
    "process_block_body",
    "process_block_header",
    "process_header",
    "process_signed_header",
]


@dataclass(frozen=True, slots=True)
class Evidence:
    """Two different blocks one producer signed for one slot: proof that it double-signed."""

    first: SignedBlock
    second: SignedBlock


@dataclass(frozen=True, slots=True)
class HeaderVerdict:
    """A block checked against its parent's header state.

    ``evidence`` is set when the block is the second its producer signed for the slot: the
    block is then refused, but the two blocks are proof worth keeping.
    """

    state: HeaderState
    evidence: Evidence | None


@dataclass(frozen=True, slots=True)
class Execution:
    """Transactions run on the parent's state: what went in, what changed, what it replaced."""

    included: tuple[SignedTransaction, ...]
    failed: tuple[TxId, ...]  # refused for good (a block being built): out of the mempool
    new_producers: Schedule | None
    changes: Changes
    originals: Mapping[bytes, bytes | None]  # committed values of every key read or written
    state_hash: StateHash
    written: Mapping[bytes, Any]  # the changes as the view holds them (decoded objects)
    # The contract traces of the included transactions that ran contracts, in block order,
    # and the fuel they used in all.
    traces: tuple[tuple[TxId, TxTrace], ...] = ()
    fuel: int = 0

    @property
    def state_root(self) -> bytes:
        return self.state_hash.root()


@dataclass(frozen=True, slots=True)
class BlockTransition:
    """Everything a valid block changes, for the controller to commit as one batch."""

    state: HeaderState
    changes: Changes
    originals: Mapping[bytes, bytes | None]
    state_hash: StateHash
    written: Mapping[bytes, Any]
    traces: tuple[tuple[TxId, TxTrace], ...] = ()


class StateReader(KVReader, Protocol):
    """Committed state and its commitment (the block store implements it)."""

    def state_hash(self) -> StateHash: ...


# --- the header -----------------------------------------------------------------------------


def process_header(
    parent: HeaderState, header: BlockHeader, block_id: BlockId, params: ChainParams
) -> HeaderState:
    """The header state after ``header``, if it keeps the rules against its parent's."""
    num = header.num
    producer, _ = parent.scheduled(header.slot, params)
    proposal = header.new_producers
    if header.previous != parent.id:
        raise InvalidBlock(num, "previous id does not match the parent")
    if num != parent.num + 1:
        raise InvalidBlock(num, f"number must be {parent.num + 1}")
    if header.slot <= parent.slot:
        raise InvalidBlock(num, f"slot {header.slot} is not after the parent's {parent.slot}")
    if header.producer != producer:
        raise InvalidBlock(num, f"slot {header.slot} belongs to {producer}, not {header.producer}")
    if header.schedule_version != parent.active.version:
        raise InvalidBlock(num, f"schedule version must be {parent.active.version}")
    if proposal is not None and parent.pending is not None:
        raise InvalidBlock(num, "a schedule is already pending")
    if proposal is not None and proposal.version != parent.active.version + 1:
        raise InvalidBlock(num, "proposed schedule has the wrong version")
    check_qc_claim(parent, header)
    return parent.advance(header, block_id)


def verify_block_signature(
    parent: HeaderState, block: SignedBlock | SignedHeader, params: ChainParams, chain_id: bytes
) -> None:
    """The block is signed by the key the parent's schedule names for its slot."""
    _, scheduled_key = parent.scheduled(block.header.slot, params)
    try:
        signer = recover(block.signature, header_digest(chain_id, block.header_bytes))
    except BadSignature as err:
        raise InvalidBlock(block.num, f"producer signature: {err}") from err
    if signer != scheduled_key:
        raise InvalidBlock(block.num, f"not signed by {block.header.producer}'s scheduled key")


def find_double_sign(earlier: SignedBlock | None, block: SignedBlock) -> Evidence | None:
    """Evidence when ``earlier`` is another block ``block``'s producer signed for its slot."""
    if earlier is None or earlier.id == block.id:
        return None
    if earlier.header.producer != block.header.producer:
        return None
    if earlier.header.slot != block.header.slot:
        return None
    return Evidence(earlier, block)


def process_signed_header(
    parent: HeaderState,
    signed: SignedBlock | SignedHeader,
    *,
    params: ChainParams,
    chain_id: bytes,
    now_ms: int,
) -> HeaderState:
    """Judge a header, signed and with its QC, on its parent's header state, without its
    body (``process_block_header`` adds the body's checks): the next header state."""
    header = signed.header
    state = process_header(parent, header, signed.id, params)
    if slot_start_ms(header.slot) > now_ms + SLOT_MS:
        raise InvalidBlock(signed.num, f"slot {header.slot} is in the future")
    verify_block_signature(parent, signed, params, chain_id)
    verify_block_qc(parent, signed, params, chain_id)
    return state


def process_block_header(
    parent: HeaderState,
    block: SignedBlock,
    *,
    earlier: SignedBlock | None,
    params: ChainParams,
    chain_id: bytes,
    now_ms: int,
) -> HeaderVerdict:
    """Judge ``block`` on its parent's header state; ``earlier`` is a block already held from
    the same producer for the same slot, if any."""
    num = block.num
    state = process_signed_header(parent, block, params=params, chain_id=chain_id, now_ms=now_ms)
    if len(block.transactions) > params.max_block_txs:
        raise InvalidBlock(num, f"more than {params.max_block_txs} transactions")
    size = len(block.encode())  # a block from a peer keeps the bytes it came in
    if size > params.max_block_bytes:
        raise OversizedBlock(num, size, params.max_block_bytes)
    if merkle_root([t.id for t in block.transactions]) != block.header.tx_root:
        raise InvalidBlock(num, "transaction Merkle root does not match")
    return HeaderVerdict(state, find_double_sign(earlier, block))


# --- the state --------------------------------------------------------------------------------


def execute_transactions(
    reader: StateReader,
    parent: HeaderState,
    slot: int,
    txs: Sequence[tuple[SignedTransaction, frozenset[PublicKey]]],
    *,
    params: ChainParams,
    strict: bool,
    check_auth: bool = True,
    contracts: ContractHost | None = None,
) -> Execution:
    """Run ``txs`` (with their signers' keys) in a block at ``slot`` on ``parent``'s state.

    ``strict``: a failing transaction fails the block (a block to validate); otherwise it is
    left out and listed in ``failed`` (a block being built), except one that ran out of the
    block's fuel: it is left out but not listed, to wait for the next block.
    ``check_auth=False`` is light validation: signer keys were not recovered, so authority is
    taken as given.
    """
    num = parent.num + 1
    ctx = Context(params, slot_time_s(slot), contracts, num)
    view = StateView(reader)
    view.prune_expired_txs(ctx.block_time_s)
    view.set_block_summary(parent.num, parent.id)
    included, failed, traces, fuel = _run(view, list(txs), ctx, strict, check_auth)
    view.record_block_txs(num, [(stx.tx.expiration, stx.id) for stx in included])
    new_producers = None
    if num % params.election_interval_blocks == 0:
        new_producers = elect(view, params, parent.active, parent.pending)
    changes_of = engine.changes_of()
    changes = view.changes() if changes_of is None else changes_of(view)
    originals = view.originals()
    for key, _ in changes:  # written but never read: the undo record needs the old value
        if key not in originals:
            originals[key] = reader.get(key)
    state_hash = next_state_hash(reader.state_hash(), changes, originals)
    written = view.written()
    return Execution(
        tuple(included),
        tuple(failed),
        new_producers,
        changes,
        originals,
        state_hash,
        written,
        tuple(traces),
        fuel,
    )


def _run(
    view: StateView,
    txs: list[tuple[SignedTransaction, frozenset[PublicKey]]],
    ctx: Context,
    strict: bool,
    check_auth: bool,
) -> tuple[list[SignedTransaction], list[TxId], list[tuple[TxId, TxTrace]], int]:
    """``execute_transactions``' loop: what went in, what failed, the traces and the fuel.

    With the compiled core, each run of plain transfers goes through its pass, and the
    reference takes every other transaction, including any that a rule refuses."""
    num, params = ctx.block_num, ctx.params
    fast = engine.transfer_pass()
    included: list[SignedTransaction] = []
    failed: list[TxId] = []
    traces: list[tuple[TxId, TxTrace]] = []
    fuel = 0
    fuel_spent = False  # building: a transaction ran out of the block's fuel
    i, n = 0, len(txs)
    while i < n:
        if fast is not None:
            stop = fast(view, txs, i, ctx, check_auth)
            included.extend([stx for stx, _ in txs[i:stop]])
            if stop == n:
                break
            i = stop
        stx, keys = txs[i]
        i += 1
        if fuel_spent and any(type(a) is Call for a in stx.tx.actions):
            continue  # waits for the next block, as the one that ran out does
        try:
            trace = apply_transaction(
                view, stx, keys, ctx, check_auth=check_auth, block_fuel=params.max_block_fuel - fuel
            )
        except BlockFuelExhausted as err:
            if strict:
                raise InvalidBlock(num, f"transaction {stx.id.hex()}: {err.name}: {err}") from err
            fuel_spent = True
            continue
        except TransactionError as err:
            if strict:
                raise InvalidBlock(num, f"transaction {stx.id.hex()}: {err.name}: {err}") from err
            failed.append(stx.id)
            continue
        included.append(stx)
        if trace is not None:
            traces.append((stx.id, trace))
            fuel += trace.fuel
    return included, failed, traces, fuel


def next_state_hash(
    parent: StateHash, changes: Changes, originals: Mapping[bytes, bytes | None]
) -> StateHash:
    """The commitment to the state after ``changes``, given the committed value of every
    changed key in ``originals``: the parent's, less each replaced entry, plus each new one."""
    return parent.moved(changes, originals)


def block_transition(
    reader: StateReader,
    parent: HeaderState,
    block: SignedBlock,
    keys: Sequence[frozenset[PublicKey]] | None,
    *,
    params: ChainParams,
    chain_id: bytes,
    now_ms: int,
    contracts: ContractHost | None = None,
) -> BlockTransition:
    """What ``block`` does on its parent's state, read through ``reader``: its header judged
    (``process_block_header``), then its body run (``process_block_body``)."""
    verdict = process_block_header(
        parent, block, earlier=None, params=params, chain_id=chain_id, now_ms=now_ms
    )
    return process_block_body(
        reader, parent, verdict.state, block, keys, params=params, contracts=contracts
    )


def process_block_body(
    reader: StateReader,
    parent: HeaderState,
    state: HeaderState,
    block: SignedBlock,
    keys: Sequence[frozenset[PublicKey]] | None,
    *,
    params: ChainParams,
    contracts: ContractHost | None = None,
) -> BlockTransition:
    """What ``block``, whose header ``process_block_header`` judged (giving ``state``), does
    on its parent's state, read through ``reader``.

    ``keys`` are the recovered signer keys of each transaction, or None for light validation
    (irreversible history: authority is taken as given, every other rule still holds).
    """
    num = block.num
    light = keys is None
    signers = [frozenset[PublicKey]()] * len(block.transactions) if keys is None else keys
    exe = execute_transactions(
        reader,
        parent,
        block.header.slot,
        list(zip(block.transactions, signers, strict=True)),
        params=params,
        strict=True,
        check_auth=not light,
        contracts=contracts,
    )
    if exe.new_producers != block.header.new_producers:
        raise InvalidBlock(num, "proposed schedule differs from the election result")
    if exe.state_root != block.header.state_root:
        raise InvalidBlock(num, "state root differs: our states diverge")
    return BlockTransition(
        state, exe.changes, exe.originals, exe.state_hash, exe.written, exe.traces
    )
