"""The chain manager: validates and applies blocks from anywhere, builds our own blocks.

It owns the block store, the fork database and the mempool, and only sequences: what a block
does is decided by the pure functions of ``chain.core.block_transition``; this module links the
block to the fork database, records evidence, lets fork choice pick the branch and commits
what the transition returned. A block is validated the same way whether a peer sent it or a
local producer made it; only ``produce_block`` builds blocks, and it commits them without
re-executing what it just executed. What each call changed is recorded as it happens and
handed over by ``take_events`` (``chain.events``). ``Chain`` is not thread-safe: the node
calls it from one thread.

The chain owns the node's one contract runtime (``chain.vm``) and hands it to every
execution: admission, building, validation (full or light) and replay alike. The traces of a
block's contract actions are written with the block and undone with it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from enum import Enum

from chain.core.block_transition import (
    BlockTransition,
    Evidence,
    Execution,
    execute_transactions,
    process_block_body,
    process_block_header,
    process_header,
)
from chain.core.consensus.block import BlockHeader, SignedBlock
from chain.core.consensus.dpos import HeaderState
from chain.core.consensus.finality import finalizer_policy
from chain.core.consensus.qc import QcClaim, QuorumCertificate, Vote, VoteResult
from chain.core.consensus.votes import DoubleVote, VoteOutcome, VotePool
from chain.core.execution.contracts import ContractHost, TxTrace
from chain.core.execution.sizes import BLOCK_ENVELOPE_BYTES, encoded_tx_size
from chain.core.execution.state import Account, Producer, StateView
from chain.core.execution.transaction import MAX_SIGNATURES, SignedTransaction, decode_transaction
from chain.core.execution.transition import Context, apply_transaction, settle
from chain.core.initial_state import InitialState
from chain.core.primitives.crypto import SIGNATURE_SIZE, PrivateKey
from chain.core.primitives.errors import (
    BadSignature,
    DoubleSign,
    EncodingError,
    InvalidBlock,
    MalformedTransaction,
    NotFound,
    StaleBlock,
    StoreError,
    TransactionError,
    UnlinkableBlock,
    WrongProducerKey,
)
from chain.core.primitives.merkle import merkle_root
from chain.core.primitives.params import slot_of_ms, slot_time_s
from chain.core.primitives.types import AccountName, BlockId, BlockNum, PublicKey, TxId
from chain.events import NO_EVENTS, BlockStep, ChainEvents
from chain.fork_db import ForkBlock, ForkDatabase
from chain.mempool import Mempool
from chain.signatures.signers import Recoverer, SignerKeys
from chain.signatures.sigpool import recover_local
from chain.storage.state_cache import CachedState
from chain.storage.store import BlockStore
from chain.view import ChainView
from chain.vm import ContractRuntime

__all__ = ["Chain", "Pushed", "WrongProducerKey"]


class Pushed(Enum):
    """What ``push_block`` made of a block: all its caller needs to judge the peer that sent
    it. What the block changed (blocks applied and popped, transactions requeued) is told
    once, by ``take_events``."""

    DUPLICATE = "duplicate"  # held already, or already irreversible: nothing changed
    ADDED = "added"  # kept in the fork database; the head did not move
    APPLIED = "applied"  # the head moved onto a branch that holds it


def _wire_error(stx: SignedTransaction) -> MalformedTransaction | None:
    """Why other nodes could not decode ``stx`` as this node holds it, or None.

    A transaction pushed over the RPC or sent by a peer was decoded already, but an
    in-process caller builds the objects itself: it can hold more actions, signatures or
    longer fields than ``decode_transaction`` allows, or ``packed`` bytes that say something
    else than ``tx``. Admitted, such a transaction would go into a block that no other node
    decodes, so every limit of decoding is checked here by decoding ``packed`` again (a few
    microseconds, next to the signature recovery admission costs anyway).
    """
    sigs = stx.signatures
    if len(sigs) > MAX_SIGNATURES:
        return MalformedTransaction(
            f"{len(sigs)} signatures; a transaction carries at most {MAX_SIGNATURES}"
        )
    if any(type(s) is not bytes or len(s) != SIGNATURE_SIZE for s in sigs):
        return MalformedTransaction(f"a signature is not {SIGNATURE_SIZE} bytes")
    try:
        decoded = decode_transaction(stx.packed)
    except EncodingError as err:
        return MalformedTransaction(str(err))
    if decoded != stx.tx:
        return MalformedTransaction("the packed bytes do not encode the transaction's fields")
    return None


class Chain:
    def __init__(
        self,
        store: BlockStore,
        initial: InitialState,
        *,
        mempool: Mempool | None = None,
        recoverer: Recoverer = recover_local,
        contracts: ContractHost | None = None,
    ) -> None:
        self.store = store
        # What the state transition reads: the store, with recently written accounts held
        # decoded. Kept equal to the store in _commit and _switch_to_best.
        self._state = CachedState(store)
        self.params = initial.params
        self.chain_id = initial.chain_id
        # Not ``mempool or``: an empty mempool is falsy, and the configured one was replaced.
        self.mempool = Mempool() if mempool is None else mempool
        # The one runtime of this node: it caches compiled modules across blocks. Tests may
        # hand in another host.
        self.vm: ContractHost = ContractRuntime() if contracts is None else contracts
        self._signers = SignerKeys(initial.chain_id, recoverer)
        store.open_chain(initial)
        self._lib = store.lib_num()
        self._first = store.first_block()
        root, applied = store.reversible_blocks()
        self._fork = ForkDatabase(root)
        for state, block in applied:
            self._fork.add(state, block)
        self._head = applied[-1][0] if applied else root
        self._light_upto = 0
        self._view: ChainView | None = None
        self.votes = VotePool(initial.chain_id)
        # What changed since the last take_events(), in order: the record the node publishes.
        self._steps: list[BlockStep] = []
        self._requeued: list[SignedTransaction] = []
        self._produced: SignedBlock | None = None
        # Off until someone takes the events (the chain thread does at once): an offline
        # import or a benchmark that never takes them must not hold every block it applied.
        self._recording = False

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
            and view.mempool_bytes == self.mempool.bytes
            and view.fork_db_size == len(self._fork)
        ):
            return view
        root = self._fork.root  # the LIB's header state
        self._view = ChainView(
            chain_id=self.chain_id,
            params=self.params,
            head=head,
            lib_num=lib,
            lib_id=root.id,
            lib_slot=root.slot,
            mempool_size=len(self.mempool),
            fork_db_size=len(self._fork),
            first_block=self._first,
            mempool_bytes=self.mempool.bytes,
        )
        return self._view

    def take_events(self) -> ChainEvents:
        """What the chain changed since the last call (blocks applied and undone, in order,
        transactions put back into the mempool, the block produced), and forget it: the
        chain thread takes it after every job and publishes it with the view."""
        self._recording = True
        if not self._steps and not self._requeued and self._produced is None:
            return NO_EVENTS
        events = ChainEvents(tuple(self._steps), tuple(self._requeued), self._produced)
        self._steps, self._requeued, self._produced = [], [], None
        return events

    def block_by_num(self, num: int) -> SignedBlock:
        block_id = self.store.block_id_at(num)
        block = None if block_id is None else self.store.block(block_id)
        if block is None and num < self._first:
            raise NotFound(
                f"no block {num} here: this node started from a snapshot at block "
                f"{self._first} and holds the blocks from there on"
            )
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

    def traces(self, num: int) -> list[tuple[bytes, TxTrace]]:
        """What the contract actions of the applied block ``num`` did, per transaction that
        ran any (empty for a block without them, or one this node does not hold)."""
        return self.store.traces(num)

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

    def vote_evidence(self) -> list[DoubleVote]:
        """Double votes seen (kept in the store, so they survive restarts), oldest first."""
        return self.store.vote_evidence()

    def header_state(self, block_id: BlockId) -> HeaderState | None:
        """The header state of a reversible block (or of the LIB), if we hold it."""
        fb = self._fork.get(block_id)
        return None if fb is None else fb.state

    # --- finality votes ---------------------------------------------------------------------

    def add_vote(self, vote: Vote, now_ms: int) -> VoteOutcome:
        """Count a finalizer's vote on a reversible block; says what became of it, and gives
        the evidence when it is the second vote of a finalizer that an honest one never casts.

        A strong quorum on a block of our chain makes the block it claims final at once: the
        QC is as good from votes as from a block that will carry it (Spring does the same).
        """
        if vote.block_num <= self._lib:
            return VoteOutcome(VoteResult.STALE)
        fb = self._fork.get(vote.block_id)
        if fb is None:
            return VoteOutcome(VoteResult.UNKNOWN_BLOCK)
        state = fb.state
        if state.core is None:
            return VoteOutcome(VoteResult.UNKNOWN_KEY)  # a dpos chain has no finalizers
        policy = finalizer_policy(self.params, state.active)
        outcome = self.votes.add(vote, policy, state.slot, now_ms)
        if outcome.evidence is not None:
            self.store.put_vote_evidence(outcome.evidence)
        agg = self.votes.aggregator(vote.block_id)
        on_our_chain = self.store.block_id_at(state.num) == state.id
        if outcome.new_qc and agg is not None and agg.strong_quorum and on_our_chain:
            self._advance_lib(state.core.claim.num)
        return outcome

    def _qc_for_next_block(self, parent: HeaderState) -> tuple[QcClaim, QuorumCertificate | None]:
        """The claim of a block built on ``parent`` and the QC proving it, if it is new: the
        newest block of the branch that votes made a QC on, under the parent's policy."""
        core = parent.core
        assert core is not None
        claim = core.claim
        follows_schedule = not self.params.finalizers  # then no QC across a schedule change
        newer = [
            r.id
            for r in reversed(core.refs)
            if QcClaim(r.num, True) > claim
            and not (follows_schedule and r.version != parent.active.version)
        ]
        qc = self.votes.best_qc(newer)
        if qc is None or qc.claim <= claim:
            return claim, None
        return qc.claim, qc

    # --- signatures -------------------------------------------------------------------------

    def recover_keys(self, txs: Sequence[SignedTransaction]) -> list[frozenset[PublicKey]]:
        """Signer keys of each transaction (cached); raises BadSignature for any bad one."""
        return self._signers.recover(txs)

    def learn_keys(self, known: Sequence[tuple[SignedTransaction, frozenset[PublicKey]]]) -> None:
        """Take the signer keys of transactions whose signatures the caller recovered already
        (the RPC recovers a batch's off the chain thread), so admission does not again."""
        for stx, keys in known:
            self._signers.learn(stx, keys)

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
        return [
            r if isinstance(r, TransactionError) else None for r in self.admit_traced(txs, now_ms)
        ]

    def admit_traced(
        self, txs: Sequence[SignedTransaction], now_ms: int
    ) -> list[TransactionError | TxTrace | None]:
        """``admit_transactions``, giving for an admitted transaction that ran contracts its
        trace on the head state (what a push answers with; the block may differ)."""
        slot = max(slot_of_ms(now_ms), self._head.slot + 1)
        ctx = Context(self.params, slot_time_s(slot), self.vm, self._head.num + 1)
        view = StateView(self._state)  # shared, so the batch reads each account once
        view.set_block_summary(self._head.num, self._head.id)
        results: list[TransactionError | TxTrace | None] = []
        # What peers could not decode, or the mempool has no room for, is refused before its
        # signatures are recovered or it runs: 600 large setcodes pushed at once otherwise all
        # ran on the chain thread, to be refused by the mempool after.
        early = [_wire_error(stx) or self.mempool.refusal(stx) for stx in txs]
        well_formed = [t for t, e in zip(txs, early, strict=True) if e is None]
        recovered = iter(self._signers.recover_each(well_formed))
        for stx, error in zip(txs, early, strict=True):
            keys = next(recovered) if error is None else error
            if isinstance(keys, TransactionError):
                results.append(keys)
                continue
            try:
                # The batch's earlier transactions may have taken the room since.
                refused = self.mempool.refusal(stx)
                if refused is not None:
                    raise refused
                trace = apply_transaction(view.child(), stx, keys, ctx)
                self.mempool.add(stx, keys)
            except TransactionError as err:
                results.append(err)
            else:
                results.append(trace)
        return results

    # --- blocks -----------------------------------------------------------------------------

    def set_light_validation(self, upto: int) -> None:
        """Apply blocks numbered up to ``upto`` in light mode (EOSIO's validation-mode=light,
        Bitcoin's assumevalid): the producer's signature, the schedule, the Merkle root, the
        state root and every state rule are still checked, but transaction signatures are not
        recovered and actors' authority is taken as given. For history known to be
        irreversible (an export file, a peer's LIB) and only when the operator asks for it."""
        self._light_upto = upto

    def push_block(self, block: SignedBlock, now_ms: int) -> Pushed:
        """Validate ``block`` (from a peer or from us), add it, and switch to the best branch.

        Link it to a known parent, judge its header, record the evidence if its producer
        signed another block for the slot (then refuse it), and let fork choice apply the best
        branch; each block applied is judged whole there, on its parent's state.
        """
        num = block.num
        if block.id in self._fork:
            return Pushed.DUPLICATE
        if num <= self._lib:
            if self.store.block_id_at(num) == block.id:
                return Pushed.DUPLICATE
            raise StaleBlock(num, f"conflicts with the irreversible chain (LIB {self._lib})")
        parent = self._fork.get(block.header.previous)
        if parent is None:
            raise UnlinkableBlock(num, f"previous block {block.header.previous.hex()} is unknown")
        verdict = process_block_header(
            parent.state,
            block,
            earlier=self._same_slot(block),
            params=self.params,
            chain_id=self.chain_id,
            now_ms=now_ms,
        )
        if verdict.evidence is not None:
            self._record_evidence(verdict.evidence)
            raise DoubleSign(
                num, f"{block.header.producer} signed two blocks for slot {block.header.slot}"
            )
        self._fork.add(verdict.state, block)
        _, applied = self._switch_to_best()
        return Pushed.APPLIED if applied else Pushed.ADDED

    def _same_slot(self, block: SignedBlock) -> SignedBlock | None:
        """The block we already hold from ``block``'s producer for its slot, if any."""
        held = self._fork.same_slot(block.header.producer, block.header.slot)
        fb = None if held is None else self._fork.get(held)
        return None if fb is None else fb.block

    def _record_evidence(self, evidence: Evidence) -> None:
        self.store.put_evidence(evidence.first, evidence.second)

    def _switch_to_best(self) -> tuple[list[SignedBlock], list[SignedBlock]]:
        """Make the fork database's best block the head; the blocks popped (highest first)
        and applied (lowest first) on the way."""
        popped: list[SignedBlock] = []
        applied: list[SignedBlock] = []
        best = self._fork.best()
        if best.id == self._head.id:
            return popped, applied
        ancestor = self._fork.common_ancestor(best.id, self._head.id)
        for fb in reversed(self._fork.branch(self._head.id, ancestor)):
            assert fb.block is not None
            self.store.pop_block(fb.block)
            self._state.clear()
            if self._recording:
                self._steps.append(BlockStep(fb.block, undo=True))
            popped.append(fb.block)
            self._head = self._fork_state(fb.block.header.previous)
        for fb in self._fork.branch(best.id, ancestor):
            try:
                self._apply(fb)
            except InvalidBlock:
                # A store failure propagates as it is: the block may be fine, the disk is not.
                self._fork.remove(fb.state.id)
                back_popped, back_applied = self._switch_to_best()  # the best valid branch
                self._requeue(popped + back_popped, back_applied)
                raise
            assert fb.block is not None
            applied.append(fb.block)
        self._requeue(popped, applied)
        self._advance_lib(self._head.lib)
        return popped, applied

    def _fork_state(self, block_id: BlockId) -> HeaderState:
        fb = self._fork.get(block_id)
        assert fb is not None, "the parent of a reversible block is in the fork database"
        return fb.state

    def _apply(self, fb: ForkBlock) -> None:
        block = fb.block
        assert block is not None
        keys = None if block.num <= self._light_upto else self._block_keys(block)
        # The header was judged when the block arrived (push_block); fb.state is its verdict.
        transition = process_block_body(
            self._state, self._head, fb.state, block, keys, params=self.params, contracts=self.vm
        )
        self._commit(block, transition.state, transition)

    def _block_keys(self, block: SignedBlock) -> list[frozenset[PublicKey]]:
        try:
            return self.recover_keys(block.transactions)
        except BadSignature as err:
            raise InvalidBlock(block.num, str(err)) from err

    def _commit(
        self, block: SignedBlock, state: HeaderState, done: Execution | BlockTransition
    ) -> None:
        """Make ``block`` the head: one write batch, then what the store no longer needs to
        know about leaves the mempool."""
        self.store.commit_block(
            block,
            block.encode(),
            state,
            done.changes,
            done.originals,
            done.state_hash,
            done.traces,
        )
        self._state.committed(done.changes, done.written)
        self._head = state
        self.mempool.remove(t.id for t in block.transactions)
        if self._recording:
            self._steps.append(BlockStep(block, traces=done.traces))

    def _requeue(self, popped: list[SignedBlock], applied: list[SignedBlock]) -> None:
        """Give transactions of abandoned blocks another chance in the mempool, oldest block
        first (a transfer may spend what an earlier one brought); those that went in are
        recorded, for the node to offer its peers again.

        Signer keys come from the cache when it has them; others (the node restarted since
        the block was applied, or applied it in light mode) are recovered in one batch. That
        costs one recovery per signature of what can still go in: not expired, not on the new
        branch, not beyond the room left in the mempool (in count and in bytes), and only
        from popped blocks, which were reversible: at most (head - LIB) * max_block_txs
        transactions. One that the mempool still refuses (its account's share is full, or
        what came in since took the room) is dropped, as one that expired is: its sender
        pushes it again if it still matters.
        """
        kept = {t.id for b in applied for t in b.transactions}
        now_s = slot_time_s(self._head.slot)
        room = self.mempool.max_txs - len(self.mempool)
        room_bytes = self.mempool.max_bytes - self.mempool.bytes
        todo: dict[TxId, SignedTransaction] = {}
        for block in sorted(popped, key=lambda b: b.num):
            for stx in block.transactions:
                if len(todo) >= room:
                    break
                if stx.id in kept or stx.id in self.mempool or stx.tx.expiration < now_s:
                    continue
                if stx.id not in todo and stx.size <= room_bytes:
                    todo[stx.id] = stx
                    room_bytes -= stx.size
        txs = list(todo.values())
        for stx, keys in zip(txs, self._signers.recover_each(txs), strict=True):
            if isinstance(keys, BadSignature):
                continue  # only possible for a block applied without checking signatures
            with contextlib.suppress(TransactionError):
                self.mempool.add(stx, keys)
                if self._recording:
                    self._requeued.append(stx)

    def _advance_lib(self, new_lib: BlockNum) -> None:
        """Make the blocks up to ``new_lib`` (on our chain) irreversible."""
        if new_lib <= self._lib:
            return
        lib_id = self.store.block_id_at(new_lib)
        assert lib_id is not None, "the LIB is on the applied chain"
        self.store.advance_lib(self._lib, new_lib)
        self._fork.advance_root(lib_id)
        self._lib = new_lib
        self.votes.prune(new_lib, self._fork.root.slot)

    def produce_block(self, slot: int, key: PrivateKey) -> SignedBlock:
        """Build, sign and commit the next block on our head for ``slot``."""
        parent = self._head
        producer, scheduled_key = parent.scheduled(slot, self.params)
        if key.public_key != scheduled_key:
            raise WrongProducerKey(f"slot {slot} belongs to {producer}, whose key is not ours")
        self.mempool.expire(slot_time_s(slot))
        candidates: list[tuple[SignedTransaction, frozenset[PublicKey]]] = []
        room = self.params.max_block_bytes - BLOCK_ENVELOPE_BYTES
        for pending in self.mempool.pending():
            room -= encoded_tx_size(pending.tx)
            if len(candidates) >= self.params.max_block_txs or room < 0:
                break  # the rest wait for the next block, in the order they came
            candidates.append((pending.tx, pending.keys))
        exe = execute_transactions(
            self._state,
            parent,
            slot,
            candidates,
            params=self.params,
            strict=False,
            contracts=self.vm,
        )
        self.mempool.remove(exe.failed)
        claim, qc = (None, None) if parent.core is None else self._qc_for_next_block(parent)
        header = BlockHeader(
            num=BlockNum(parent.num + 1),
            previous=parent.id,
            slot=slot,
            producer=producer,
            schedule_version=parent.active.version,
            tx_root=merkle_root([t.id for t in exe.included]),
            state_root=exe.state_root,
            new_producers=exe.new_producers,
            qc_claim=claim,
        )
        block = SignedBlock.sign(header, exe.included, self.chain_id, key, qc)
        assert len(block.encode()) <= self.params.max_block_bytes, "BLOCK_ENVELOPE_BYTES too small"
        state = process_header(parent, header, block.id, self.params)
        self._fork.add(state, block)
        self._commit(block, state, exe)
        if self._recording:
            self._produced = block
        self._advance_lib(state.lib)
        return block
