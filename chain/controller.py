"""The chain manager: validates and applies blocks from anywhere, builds our own blocks.

It owns the block store, the fork database and the mempool. A block is validated the same way
whether a peer sent it or a local producer made it; only ``produce_block`` builds blocks, and
it commits them without re-executing what it just executed. ``Chain`` is not thread-safe:
the node calls it from one thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from chain.block import BlockHeader, Schedule, SignedBlock, header_digest
from chain.crypto import PrivateKey, recover, recover_many, sha256
from chain.dpos import HeaderState, elect
from chain.encoding import pack
from chain.errors import (
    BadSignature,
    ChainError,
    DoubleSign,
    InvalidBlock,
    NotFound,
    StaleBlock,
    StoreError,
    TransactionError,
    UnlinkableBlock,
)
from chain.fork_db import ForkBlock, ForkDatabase
from chain.initial_state import InitialState
from chain.mempool import Mempool
from chain.merkle import merkle_root
from chain.params import SLOT_MS, slot_of_ms, slot_start_ms, slot_time_s
from chain.signers import Recoverer, SignerKeys
from chain.state import Account, Producer, StateView
from chain.store import BlockStore, Changes
from chain.transaction import SignedTransaction
from chain.transition import Context, apply_transaction, settle
from chain.types import AccountName, BlockId, BlockNum, PublicKey, TxId
from chain.view import ChainView


class WrongProducerKey(ChainError):
    """The local producer key is not the key the schedule names for the slot."""

    name = "wrong_producer_key"


@dataclass(slots=True)
class PushResult:
    """What a pushed block did to the head."""

    applied: list[SignedBlock] = field(default_factory=list)
    popped: list[SignedBlock] = field(default_factory=list)
    added: bool = True  # False when the block was already known

    @property
    def forked(self) -> bool:
        return bool(self.popped)


@dataclass(slots=True)
class _Execution:
    included: list[SignedTransaction]
    failed: list[TxId]
    new_producers: Schedule | None
    changes: Changes
    originals: dict[bytes, bytes | None]
    state_root: bytes


class Chain:
    def __init__(
        self,
        store: BlockStore,
        initial: InitialState,
        *,
        mempool: Mempool | None = None,
        recoverer: Recoverer = recover_many,
    ) -> None:
        self.store = store
        self.params = initial.params
        self.chain_id = initial.chain_id
        self.mempool = mempool or Mempool()
        self._recoverer = recoverer
        self._signers = SignerKeys(initial.chain_id, recoverer)
        stored_id = store.chain_id()
        if stored_id is None:
            self._init_genesis(initial)
        elif stored_id != initial.chain_id:
            raise StoreError(
                f"the data dir holds chain {stored_id.hex()}, not {initial.chain_id.hex()}"
            )
        self._lib = store.lib_num()
        self._fork, self._head = self._load_fork_db()
        self._light_upto = 0
        self._view: ChainView | None = None
        self._lib_mark: tuple[int, BlockId, int] | None = None  # LIB number, id, slot

    # --- start-up ---------------------------------------------------------------------------

    def _init_genesis(self, initial: InitialState) -> None:
        self.store.init_genesis(initial.chain_id, initial.header_state(), initial.state_changes())

    def _load_fork_db(self) -> tuple[ForkDatabase, HeaderState]:
        def state_at(num: int) -> tuple[BlockId, HeaderState]:
            block_id = self.store.block_id_at(num)
            state = None if block_id is None else self.store.header_state(block_id)
            if block_id is None or state is None:
                raise StoreError(f"block store is missing block {num} or its header state")
            return block_id, state

        head_id = self.store.head_id()
        if head_id is None:
            raise StoreError("block store has no head")
        _, root = state_at(self._lib)
        fork = ForkDatabase(root)
        head = root
        for num in range(self._lib + 1, int.from_bytes(head_id[:4], "big") + 1):
            block_id, head = state_at(num)
            block = self.store.block(block_id)
            if block is None:
                raise StoreError(f"block store is missing block {num}")
            fork.add(head, block)
        if head.id != head_id:
            raise StoreError("block store head does not match its block index")
        return fork, head

    # --- reads ------------------------------------------------------------------------------

    @property
    def head(self) -> HeaderState:
        return self._head

    @property
    def lib(self) -> BlockNum:
        return self._lib

    @property
    def fork_db_size(self) -> int:
        return len(self._fork)

    def view(self) -> ChainView:
        """The current immutable view; the same object until something it holds changes."""
        view = self._view
        head, lib = self._head, self._lib
        if (
            view is not None
            and view.head is head
            and view.lib_num == lib
            and view.mempool_size == len(self.mempool)
            and view.fork_db_size == len(self._fork)
        ):
            return view
        if self._lib_mark is None or self._lib_mark[0] != lib:
            lib_id = self.store.block_id_at(lib)
            state = None if lib_id is None else self.store.header_state(lib_id)
            assert lib_id is not None and state is not None, "the LIB is on the applied chain"
            self._lib_mark = (lib, lib_id, state.slot)
        _, lib_id, lib_slot = self._lib_mark
        self._view = ChainView(
            chain_id=self.chain_id,
            params=self.params,
            head=head,
            lib_num=lib,
            lib_id=lib_id,
            lib_slot=lib_slot,
            mempool_size=len(self.mempool),
            fork_db_size=len(self._fork),
        )
        return self._view

    def block_by_num(self, num: int) -> SignedBlock:
        block_id = self.store.block_id_at(num)
        block = None if block_id is None else self.store.block(block_id)
        if block is None:
            raise NotFound(f"no block {num} on this chain")
        return block

    def block_by_id(self, block_id: BlockId) -> SignedBlock:
        fb = self._fork.get(block_id)
        block = fb.block if fb is not None else None
        block = block or self.store.block(block_id)
        if block is None:
            raise NotFound(f"no block {block_id.hex()}")
        return block

    def transaction(self, tx_id: TxId) -> tuple[SignedTransaction, BlockNum]:
        num = self.store.tx_block_num(tx_id)
        if num is None:
            raise NotFound(f"no transaction {tx_id.hex()} in a block of this chain")
        for stx in self.block_by_num(num).transactions:
            if stx.id == tx_id:
                return stx, num
        raise StoreError(f"transaction index points at block {num}, which lacks {tx_id.hex()}")

    def account(self, name: AccountName) -> Account:
        account = StateView(self.store).account(name)
        if account is None:
            raise NotFound(f"no account {name!r}")
        return settle(account, slot_time_s(self._head.slot))

    def producers(self) -> list[Producer]:
        return sorted(StateView(self.store).producers(), key=lambda p: (-p.total_votes, p.name))

    def evidence(self) -> list[SignedBlock]:
        return self.store.evidence()

    # --- signatures -------------------------------------------------------------------------

    def recover_keys(self, txs: Sequence[SignedTransaction]) -> list[frozenset[PublicKey]]:
        """Signer keys of each transaction (cached); raises BadSignature for any bad one."""
        return self._signers.recover(txs)

    def prefetch_keys(self, txs: Sequence[SignedTransaction]) -> None:
        """Start recovering the signatures of ``txs`` in worker processes, if there are any.

        Call it for the next block before pushing the current one: the workers then recover
        while this process executes, and block validation later finds the results.
        """
        self._signers.prefetch(txs)

    # --- transactions -----------------------------------------------------------------------

    def admit_transaction(self, stx: SignedTransaction, now_ms: int) -> None:
        """Validate ``stx`` against the head state and add it to the mempool."""
        (error,) = self.admit_transactions([stx], now_ms)
        if error is not None:
            raise error

    def admit_transactions(
        self, txs: Sequence[SignedTransaction], now_ms: int
    ) -> list[TransactionError | None]:
        """Admit each of ``txs`` on its own (none depends on another); returns per
        transaction None or the error that refused it. Signatures are recovered as one batch,
        so a batch of pushes costs one trip to the worker processes, not one each."""
        slot = max(slot_of_ms(now_ms), self._head.slot + 1)
        ctx = Context(self.params, slot_time_s(slot))
        view = StateView(self.store)  # shared, so the batch reads each account once
        view.set_block_summary(self._head.num, self._head.id)
        results: list[TransactionError | None] = []
        for stx, keys in zip(txs, self._signers.recover_each(txs), strict=True):
            if isinstance(keys, TransactionError):
                results.append(keys)
                continue
            try:
                apply_transaction(view.child(), stx, keys, ctx)
                self.mempool.add(stx, keys)
            except TransactionError as err:
                results.append(err)
            else:
                results.append(None)
        return results

    # --- blocks -----------------------------------------------------------------------------

    def set_light_validation(self, upto: int) -> None:
        """Apply blocks numbered up to ``upto`` in light mode (EOSIO's validation-mode=light,
        Bitcoin's assumevalid): the producer's signature, the schedule, the Merkle root, the
        state root and every state rule are still checked, but transaction signatures are not
        recovered and actors' authority is taken as given. For history known to be
        irreversible (an export file, a peer's LIB) and only when the operator asks for it."""
        self._light_upto = upto

    def _execute(
        self,
        parent: HeaderState,
        slot: int,
        txs: Sequence[tuple[SignedTransaction, frozenset[PublicKey]]],
        *,
        strict: bool,
        check_auth: bool = True,
    ) -> _Execution:
        num = parent.num + 1
        ctx = Context(self.params, slot_time_s(slot))
        view = StateView(self.store)
        view.prune_expired_txs(ctx.block_time_s)
        view.set_block_summary(parent.num, parent.id)
        included: list[SignedTransaction] = []
        failed: list[TxId] = []
        for stx, keys in txs:
            try:
                apply_transaction(view, stx, keys, ctx, check_auth=check_auth)
            except TransactionError as err:
                if strict:
                    raise InvalidBlock(
                        num, f"transaction {stx.id.hex()}: {err.name}: {err}"
                    ) from err
                failed.append(stx.id)
                continue
            included.append(stx)
        new_producers = None
        if num % self.params.election_interval_blocks == 0:
            new_producers = elect(view, self.params, parent.active, parent.pending)
        changes = view.changes()
        state_root = sha256(parent.state_root + sha256(pack(changes)))
        return _Execution(included, failed, new_producers, changes, view.originals(), state_root)

    def push_block(self, block: SignedBlock, now_ms: int) -> PushResult:
        """Validate ``block`` (from a peer or from us), add it, and switch to the best branch."""
        num, header = block.num, block.header
        if block.id in self._fork:
            return PushResult(added=False)
        if num <= self._lib:
            if self.store.block_id_at(num) == block.id:
                return PushResult(added=False)
            raise StaleBlock(num, f"conflicts with the irreversible chain (LIB {self._lib})")
        parent = self._fork.get(header.previous)
        if parent is None:
            raise UnlinkableBlock(num, f"previous block {header.previous.hex()} is unknown")
        state = parent.state.next(header, block.id, self.params)
        if slot_start_ms(header.slot) > now_ms + SLOT_MS:
            raise InvalidBlock(num, f"slot {header.slot} is in the future")
        _, scheduled_key = parent.state.scheduled(header.slot, self.params)
        try:
            signer = recover(block.signature, header_digest(self.chain_id, block.header_bytes))
        except BadSignature as err:
            raise InvalidBlock(num, f"producer signature: {err}") from err
        if signer != scheduled_key:
            raise InvalidBlock(num, f"not signed by {header.producer}'s scheduled key")
        other = self._fork.same_slot(header.producer, header.slot)
        if other is not None:
            first = self._fork.get(other)
            if first is not None and first.block is not None:
                self.store.put_evidence(first.block, block)
            raise DoubleSign(num, f"{header.producer} signed two blocks for slot {header.slot}")
        if len(block.transactions) > self.params.max_block_txs:
            raise InvalidBlock(num, f"more than {self.params.max_block_txs} transactions")
        if merkle_root([t.id for t in block.transactions]) != header.tx_root:
            raise InvalidBlock(num, "transaction Merkle root does not match")
        self._fork.add(state, block)
        return self._switch_to_best()

    def _switch_to_best(self) -> PushResult:
        result = PushResult()
        best = self._fork.best()
        if best.id == self._head.id:
            return result
        ancestor = self._fork.common_ancestor(best.id, self._head.id)
        for fb in reversed(self._fork.branch(self._head.id, ancestor)):
            assert fb.block is not None
            self.store.pop_block(fb.block)
            result.popped.append(fb.block)
            self._head = self._fork_state(fb.block.header.previous)
        for fb in self._fork.branch(best.id, ancestor):
            try:
                self._apply(fb)
            except InvalidBlock:
                # A store failure propagates as it is: the block may be fine, the disk is not.
                self._fork.remove(fb.state.id)
                restored = self._switch_to_best()  # back to the best valid branch
                self._requeue(result.popped + restored.popped, restored.applied)
                raise
            assert fb.block is not None
            result.applied.append(fb.block)
        self._requeue(result.popped, result.applied)
        self._advance_lib()
        return result

    def _fork_state(self, block_id: BlockId) -> HeaderState:
        fb = self._fork.get(block_id)
        assert fb is not None, "the parent of a reversible block is in the fork database"
        return fb.state

    def _apply(self, fb: ForkBlock) -> None:
        block = fb.block
        assert block is not None
        parent = self._head
        light = block.num <= self._light_upto
        if light:
            keys: list[frozenset[PublicKey]] = [frozenset()] * len(block.transactions)
        else:
            try:
                keys = self.recover_keys(block.transactions)
            except BadSignature as err:
                raise InvalidBlock(block.num, str(err)) from err
        exe = self._execute(
            parent,
            block.header.slot,
            list(zip(block.transactions, keys, strict=True)),
            strict=True,
            check_auth=not light,
        )
        if exe.new_producers != block.header.new_producers:
            raise InvalidBlock(block.num, "proposed schedule differs from the election result")
        if exe.state_root != block.header.state_root:
            raise InvalidBlock(block.num, "state root differs: our states diverge")
        self.store.commit_block(block, block.encode(), fb.state, exe.changes, exe.originals)
        self._head = fb.state
        self.mempool.remove(t.id for t in block.transactions)

    def _requeue(self, popped: list[SignedBlock], applied: list[SignedBlock]) -> None:
        """Give transactions of abandoned blocks another chance in the mempool."""
        kept = {t.id for b in applied for t in b.transactions}
        for block in popped:
            for stx in block.transactions:
                keys = self._signers.cached(stx)
                if stx.id in kept or keys is None or stx.id in self.mempool:
                    continue
                with contextlib.suppress(TransactionError):
                    self.mempool.add(stx, keys)

    def _advance_lib(self) -> None:
        new_lib = self._head.lib
        if new_lib <= self._lib:
            return
        lib_id = self.store.block_id_at(new_lib)
        assert lib_id is not None, "the LIB is on the applied chain"
        self.store.advance_lib(self._lib, new_lib)
        self._fork.advance_root(lib_id)
        self._lib = new_lib

    def produce_block(self, slot: int, key: PrivateKey) -> SignedBlock:
        """Build, sign and commit the next block on our head for ``slot``."""
        parent = self._head
        producer, scheduled_key = parent.scheduled(slot, self.params)
        if key.public_key != scheduled_key:
            raise WrongProducerKey(f"slot {slot} belongs to {producer}, whose key is not ours")
        self.mempool.expire(slot_time_s(slot))
        candidates: list[tuple[SignedTransaction, frozenset[PublicKey]]] = []
        for pending in self.mempool.pending():
            if len(candidates) >= self.params.max_block_txs:
                break
            candidates.append((pending.tx, pending.keys))
        exe = self._execute(parent, slot, candidates, strict=False)
        self.mempool.remove(exe.failed)
        header = BlockHeader(
            num=BlockNum(parent.num + 1),
            previous=parent.id,
            slot=slot,
            producer=producer,
            schedule_version=parent.active.version,
            tx_root=merkle_root([t.id for t in exe.included]),
            state_root=exe.state_root,
            new_producers=exe.new_producers,
        )
        block = SignedBlock.sign(header, tuple(exe.included), self.chain_id, key)
        state = parent.next(header, block.id, self.params)
        self._fork.add(state, block)
        self.store.commit_block(block, block.encode(), state, exe.changes, exe.originals)
        self._head = state
        self.mempool.remove(t.id for t in exe.included)
        self._advance_lib()
        return block
