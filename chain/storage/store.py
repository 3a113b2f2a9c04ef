"""The block store: state, blocks, indexes and undo records in one LevelDB (plyvel).

Every change of the applied chain is one atomic write batch: applying a block writes its
state changes, the undo record that reverses them, the block, its indexes, its header state
and the new head together; popping a block reverses all of that together. A crash at any
instant therefore leaves the store on its last committed block. Each batch is synced to disk
before it returns, so a power cut keeps it too; a store that nonetheless opens below what it
had committed (``chain.storage.commit_mark``), or without its ``CURRENT`` file, is refused or
rebuilt and checked, never started afresh.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import plyvel

from chain.core.consensus.block import SignedBlock, decode_block
from chain.core.consensus.dpos import HeaderState, decode_header_state
from chain.core.consensus.qc import vote_from_wire
from chain.core.consensus.votes import DoubleVote
from chain.core.execution import engine
from chain.core.execution.contracts import TxTrace, decode_traces, encode_traces
from chain.core.execution.state import Changes
from chain.core.execution.state_hash import StateHash
from chain.core.initial_state import InitialState
from chain.core.primitives import schema
from chain.core.primitives.encoding import pack, unpack
from chain.core.primitives.errors import SnapshotError, StoreError, StoreInUse
from chain.core.primitives.types import BlockId, BlockNum, TxId, block_num_of
from chain.storage.commit_mark import CommitMark, Mark, holds_a_store, rebuild
from chain.storage.leveldb import FrozenReader, lock_owner, status_text
from chain.storage.snapshot import SnapshotHead
from chain.storage.txfilter import TxFilter

__all__ = ["MAX_VOTE_EVIDENCE_PER_FINALIZER", "BlockStore", "Changes"]

# Double votes kept per finalizer (each ~300 bytes). A hundred prove the misbehaviour as well
# as more would; a finalizer double-voting at every slot must not fill the disk.
MAX_VOTE_EVIDENCE_PER_FINALIZER = 100


class BlockStore:
    """LevelDB-backed storage of the applied chain. Implements ``KVReader`` for the state."""

    def __init__(self, path: str, *, sync: bool = True) -> None:
        # sync=True: a write batch is on disk (fdatasync) before it returns, so what the node
        # acknowledged survives a power cut too; sync=False (``defer_sync``) leaves it with
        # the OS, which a killed process does not lose but a power cut may.
        self._sync = sync
        self._deferred = False
        self._dir = Path(path)
        held = holds_a_store(self._dir)
        rebuilt = held and not (self._dir / "CURRENT").exists()
        if rebuilt:
            rebuild(self._dir)
        try:
            # A bloom filter makes the commonest miss (is this transaction id new?) cost no
            # disk read; the block cache holds the hot accounts. No compression: what is
            # stored is mostly signatures, keys and hashes, which Snappy barely shrinks (a
            # 600k-transfer history: 137 MB against 119), yet compressing each table
            # compaction writes cost a quarter of an import's CPU (light: 29.7 -> 22.4 s
            # user; full: 32.0 -> 28.4 s wall, as the signature workers need that core).
            # Tables written compressed by an older BoR stay readable. A 16 MiB write
            # buffer: with compression on, the default 4 MiB made compaction take most of a
            # second core (13 of 33 CPU seconds for 210k transactions) and 64 MiB was chosen;
            # without it, a smaller memtable is quicker to insert into and look up in (light
            # import of 600k transfers, median of 2: 64 MiB 20.7 s, 16 MiB 19.2 s, 8 MiB
            # 18.3 s; full: no difference beyond noise, 29.4-31.6 s for all three).
            self._db = plyvel.DB(
                path,
                # A directory that held a store is never silently replaced by a new one.
                create_if_missing=not held,
                bloom_filter_bits=10,
                lru_cache_size=64 << 20,
                write_buffer_size=16 << 20,
                compression=None,
            )
        except (plyvel.Error, OSError) as err:  # IOError when another process holds the lock
            reason = status_text(err)
            if "LOCK" in reason and ("unavailable" in reason or "already held" in reason):
                raise StoreInUse(path, lock_owner(self._dir, reason)) from err
            raise StoreError(f"cannot open block store at {path}: {reason}") from err
        self._mark = CommitMark(self._dir)
        self.tx_filter: TxFilter | None = None
        try:
            self._check_mark()
            if rebuilt:
                self.verify_state()
            self.tx_filter = self._built_tx_filter(index_too=rebuilt)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._mark.close()
        self._db.close()

    def _check_mark(self) -> None:
        """Refuse a store that holds less than it had committed (see ``chain.storage.commit_mark``);
        give a store written before marks existed its mark."""
        mark, chain_id = self._mark.read(), self.chain_id()
        if mark is None:
            if chain_id is not None:
                self._update_mark(durable=True)
            return
        if chain_id is None:
            raise StoreError(
                f"the block store at {self._dir} is empty but held chain "
                f"{mark.chain_id.hex()[:16]}… up to block {mark.head}: its files were lost; "
                "move the data dir away and sync or import again"
            )
        head, lib = self._head_num(), self.lib_num()
        if chain_id != mark.chain_id or head < mark.head or lib < mark.lib:
            raise StoreError(
                f"the block store at {self._dir} ends at block {head} (LIB {lib}) but had "
                f"committed block {mark.head} (LIB {mark.lib}): its last writes were lost "
                "(a damaged file, or a disk that ignored a flush); move the data dir away and "
                f"sync or import again, or delete {self._mark.path} to go on from block {head}"
            )

    def _head_num(self) -> BlockNum:
        head_id = self.head_id()
        return BlockNum(0) if head_id is None else block_num_of(head_id)

    def _update_mark(self, durable: bool = False, head: int | None = None) -> None:
        """Mark the store's head (or ``head``, when about to lower it) and LIB as committed.
        While syncs are deferred the mark is not raised, as the disk may then hold less than
        was written; it is still lowered before a pop (a fork switch inside a batch of
        catch-up), or a crash after the pop would find the store below its mark."""
        chain_id = self.chain_id()
        if chain_id is None or (self._deferred and head is None):
            return
        self._mark.write(
            Mark(chain_id, self._head_num() if head is None else head, self.lib_num()), durable
        )

    @contextmanager
    def defer_sync(self) -> Iterator[None]:
        """Write batches without waiting for the disk, then sync once: for a bulk import,
        whose source still holds whatever a power cut takes. The mark stays where it was
        until the closing synced write, so a cut import restarts where the disk is."""
        self._deferred, sync = True, self._sync
        self._sync = False
        try:
            yield
        finally:
            self._deferred, self._sync = False, sync
        self._write([(schema.META_LIB, schema.be(self.lib_num(), 8))], [])  # synced: all before
        self._update_mark()

    # --- KVReader ---------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        try:
            return self._db.get(key)  # type: ignore[no-any-return]
        except plyvel.Error as err:
            raise StoreError(f"read failed: {err}") from err

    def iterate(
        self, start: bytes, stop: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        try:
            yield from self._db.iterator(start=start, stop=stop, reverse=reverse)
        except plyvel.Error as err:
            raise StoreError(f"iteration failed: {err}") from err

    def frozen(self) -> FrozenReader:
        """The store as it is now, unchanging: for reads made off the chain thread that must
        see one state however many keys they read (a contract's read-only call, a page of
        table rows). Cheap (a LevelDB snapshot); close it when done."""
        try:
            return FrozenReader(self._db.snapshot())
        except plyvel.Error as err:
            raise StoreError(f"snapshot failed: {err}") from err

    # --- metadata ---------------------------------------------------------------------------

    def chain_id(self) -> bytes | None:
        return self.get(schema.META_CHAIN_ID)

    def head_id(self) -> BlockId | None:
        raw = self.get(schema.META_HEAD)
        return None if raw is None else BlockId(raw)

    def state_hash(self) -> StateHash:
        """The commitment to the state as it is now (the head's)."""
        raw = self.get(schema.META_STATE_HASH)
        if raw is None:
            raise StoreError("the block store has no state commitment")
        return StateHash.from_bytes(raw)

    def first_block(self) -> BlockNum:
        """The lowest block this store holds: 1, or the block a snapshot started it at."""
        raw = self.get(schema.META_FIRST_BLOCK)
        return BlockNum(1 if raw is None else int.from_bytes(raw, "big"))

    def lib_num(self) -> BlockNum:
        raw = self.get(schema.META_LIB)
        return BlockNum(0 if raw is None else int.from_bytes(raw, "big"))

    # --- reads ------------------------------------------------------------------------------

    def block_id_at(self, num: int) -> BlockId | None:
        raw = self.get(schema.block_num_key(num))
        return None if raw is None else BlockId(raw)

    def block(self, block_id: bytes) -> SignedBlock | None:
        raw = self.get(schema.block_key(BlockId(block_id)))
        return None if raw is None else decode_block(raw)

    def block_bytes(self, block_id: bytes) -> bytes | None:
        return self.get(schema.block_key(BlockId(block_id)))

    def header_state(self, block_id: BlockId) -> HeaderState | None:
        raw = self.get(schema.header_state_key(block_id))
        return None if raw is None else decode_header_state(raw)

    def traces(self, num: int) -> list[tuple[bytes, TxTrace]]:
        """The contract traces of the applied block ``num`` (empty if it ran no contract)."""
        raw = self.get(schema.traces_key(num))
        return [] if raw is None else decode_traces(raw)

    def tx_block_num(self, tx_id: bytes) -> BlockNum | None:
        raw = self.get(schema.tx_index_key(TxId(tx_id)))
        return None if raw is None else BlockNum(int.from_bytes(raw, "big"))

    def reversible_blocks(self) -> tuple[HeaderState, list[tuple[HeaderState, SignedBlock]]]:
        """The LIB's header state, and every applied block above it with its header state,
        oldest first: what the fork database starts from."""

        def state_at(num: int) -> tuple[BlockId, HeaderState]:
            block_id = self.block_id_at(num)
            state = None if block_id is None else self.header_state(block_id)
            if block_id is None or state is None:
                raise StoreError(f"block store is missing block {num} or its header state")
            return block_id, state

        head_id = self.head_id()
        if head_id is None:
            raise StoreError("block store has no head")
        lib = self.lib_num()
        _, root = state_at(lib)
        applied: list[tuple[HeaderState, SignedBlock]] = []
        for num in range(lib + 1, block_num_of(head_id) + 1):
            block_id, state = state_at(num)
            block = self.block(block_id)
            if block is None:
                raise StoreError(f"block store is missing block {num}")
            applied.append((state, block))
        head = applied[-1][0] if applied else root
        if head.id != head_id:
            raise StoreError("block store head does not match its block index")
        return root, applied

    def verify_state(self) -> None:
        """StoreError unless the stored state hashes to the stored commitment and the
        reversible blocks are whole: the check of a store LevelDB had to rebuild, whose
        tables might bring back what was deleted. Reads the whole state once."""
        state = self.iterate(schema.STATE, schema.prefix_end(schema.STATE))
        if StateHash.of((k, v) for k, v in state if schema.committed(k)) != self.state_hash():
            raise StoreError(
                f"the state in {self._dir} does not match its commitment: move the data dir "
                "away and sync or import again"
            )
        self.reversible_blocks()

    def evidence(self) -> list[SignedBlock]:
        end = schema.prefix_end(schema.EVIDENCE)
        return [decode_block(v) for _, v in self.iterate(schema.EVIDENCE, end)]

    def vote_evidence(self) -> list[DoubleVote]:
        """The double votes kept, oldest slot first."""
        end = schema.prefix_end(schema.VOTE_EVIDENCE)
        found = [_decode_double_vote(v) for _, v in self.iterate(schema.VOTE_EVIDENCE, end)]
        return sorted(found, key=lambda e: (e.slot, e.key))

    # --- writes -----------------------------------------------------------------------------

    def _built_tx_filter(self, index_too: bool = False) -> TxFilter | None:
        """The filter of the ids of every ``TX_BLOCK`` entry held now, where the compiled
        core (its only reader) is built; ``index_too``: and of every id in the transaction
        index, after a repair, which may bring back index entries a pop had deleted (the
        reference's lookup would find them, so the filter must hold them too)."""
        add = engine.filter_adder()
        if add is None:
            return None
        entries = self.iterate(schema.TX_BLOCK, schema.prefix_end(schema.TX_BLOCK))
        lists: Iterable[bytes] = (value for _, value in entries)
        if index_too:
            indexed = self.iterate(schema.TX_INDEX, schema.prefix_end(schema.TX_INDEX))
            start = len(schema.TX_INDEX)
            as_lists = (bytes(4) + key[start:] for key, _ in indexed)
            lists = itertools.chain(lists, as_lists)
        return TxFilter.of_entries(lists, add)

    def _write(self, puts: list[tuple[bytes, bytes]], deletes: list[bytes]) -> None:
        # The id filter holds every TX_BLOCK entry written (before the write: if it fails,
        # holding more is harmless), and is rebuilt from those held once past its size.
        held = self.tx_filter
        if held is not None:
            for key, value in puts:
                if key.startswith(schema.TX_BLOCK):
                    held.add_entry(value)
        try:
            with self._db.write_batch(transaction=True, sync=self._sync) as batch:
                for key in deletes:
                    batch.delete(key)
                for key, value in puts:
                    batch.put(key, value)
        except plyvel.Error as err:
            raise StoreError(f"write failed: {err}") from err
        if held is not None and held.full:
            # The batch is written: the commit stands if the rebuild fails. The old filter,
            # a superset still, stays; the next write tries again.
            with contextlib.suppress(StoreError):
                self.tx_filter = self._built_tx_filter()

    def open_chain(self, initial: InitialState) -> None:
        """Write block 0 of ``initial`` into an empty store; refuse a store of another chain."""
        stored = self.chain_id()
        if stored is None:
            self.init_genesis(initial.chain_id, initial.header_state(), initial.state_changes())
        elif stored != initial.chain_id:
            raise StoreError(
                f"the data dir holds chain {stored.hex()}, not {initial.chain_id.hex()}"
            )
        elif self.get(schema.META_STATE_HASH) is None:
            raise StoreError(
                "the data dir was written by a BoR without state commitments (before block "
                "headers committed to the whole state): move it away and sync or import again"
            )
        elif any(
            True
            for _ in self.iterate(schema.OLD_TX_EXPIRY, schema.prefix_end(schema.OLD_TX_EXPIRY))
        ):
            raise StoreError(
                "the data dir was written by a BoR that kept one state entry per transaction "
                "id (before the per-block id lists): move it away and sync or import again"
            )
        self._index_old_seen_entries()

    def _delete_range(self, start: bytes, stop: bytes) -> None:
        """Delete every key in [start, stop), 4,096 to a write batch."""
        doomed: list[bytes] = []
        for key, _ in self.iterate(start, stop):
            doomed.append(key)
            if len(doomed) == 4096:
                self._write([], doomed)
                doomed = []
        self._write([], doomed)

    def _index_old_seen_entries(self) -> None:
        """Move a store written before the transaction index served as the de-duplication
        set's lookup onto it: when it still holds ``TX_SEEN`` entries, index the ids of every
        block id list (``TX_BLOCK``) first, then delete those entries (at most an hour of
        transactions). A store started from a snapshot had its unexpired ids only as
        ``TX_SEEN`` entries, not in the index: dropping them alone would let those
        transactions be applied again. Idempotent: a crash in between redoes both."""
        seen_end = schema.prefix_end(schema.TX_SEEN)
        if next(iter(self.iterate(schema.TX_SEEN, seen_end)), None) is None:
            return
        indexed: list[tuple[bytes, bytes]] = []
        for key, value in self.iterate(schema.TX_BLOCK, schema.prefix_end(schema.TX_BLOCK)):
            indexed += schema.indexed_ids(key, value)
            if len(indexed) >= 4096:
                self._write(indexed, [])
                indexed = []
        self._write(indexed, [])
        self._delete_range(schema.TX_SEEN, seen_end)

    def init_genesis(self, chain_id: bytes, state: HeaderState, changes: Changes) -> None:
        puts = [(k, v) for k, v in changes if v is not None]
        state_hash = StateHash.of((k, v) for k, v in puts if schema.committed(k))
        if state_hash.root() != state.state_root:
            raise StoreError("genesis header state does not commit to the genesis state")
        puts += [
            (schema.META_CHAIN_ID, chain_id),
            (schema.META_STATE_HASH, state_hash.to_bytes()),
            (schema.header_state_key(state.id), state.encode()),
            (schema.block_num_key(0), state.id),
            (schema.META_HEAD, state.id),
            (schema.META_LIB, schema.be(0, 8)),
        ]
        self._write(puts, [])
        self._update_mark(durable=True)

    def commit_block(
        self,
        block: SignedBlock,
        block_bytes: bytes,
        state: HeaderState,
        changes: Changes,
        originals: Mapping[bytes, bytes | None],
        state_hash: StateHash,
        traces: Sequence[tuple[bytes, TxTrace]] = (),
    ) -> None:
        """Apply ``block``'s state changes and make it the head, atomically.

        ``originals`` are committed values the caller already read (the undo record needs the
        old value of every changed key); the rest are read here. ``state_hash`` is the
        commitment to the state after the block; the undo record keeps the one before.
        ``traces``: what the block's contract actions did, kept beside the block (outside
        the state) for readers.
        """
        known = originals
        old_hash = self.get(schema.META_STATE_HASH)
        puts: list[tuple[bytes, bytes]] = []
        deletes: list[bytes] = []
        undo: list[Any] = []
        for key, value in changes:
            undo.append([key, known[key] if key in known else self.get(key)])
            if value is None:
                deletes.append(key)
            else:
                puts.append((key, value))
        num_bytes = schema.be(block.num, 8)
        puts.append((schema.undo_key(block.num), pack([undo, old_hash])))
        puts.append((schema.META_STATE_HASH, state_hash.to_bytes()))
        puts.append((schema.block_key(block.id), block_bytes))
        puts.append((schema.block_num_key(block.num), block.id))
        puts.append((schema.header_state_key(block.id), state.encode()))
        puts.extend((schema.tx_index_key(t.id), num_bytes) for t in block.transactions)
        if traces:
            puts.append((schema.traces_key(block.num), encode_traces(list(traces))))
        puts.append((schema.META_HEAD, block.id))
        self._write(puts, deletes)
        self._update_mark()

    def pop_block(self, block: SignedBlock) -> None:
        """Undo the head block exactly, atomically; its parent becomes the head."""
        raw = self.get(schema.undo_key(block.num))
        if raw is None:
            raise StoreError(f"no undo record for block {block.num}: it is irreversible")
        puts: list[tuple[bytes, bytes]] = []
        deletes: list[bytes] = []
        undo, old_hash = unpack(raw, "undo record")
        puts.append((schema.META_STATE_HASH, old_hash))
        for key, old in undo:
            if key.startswith(schema.TX_SEEN):
                continue  # an undo record written before the transaction index was the lookup
            if old is None:
                deletes.append(key)
            else:
                puts.append((key, old))
        deletes += [
            schema.undo_key(block.num),
            schema.block_key(block.id),
            schema.block_num_key(block.num),
            schema.header_state_key(block.id),
            schema.traces_key(block.num),
        ]
        deletes += [schema.tx_index_key(t.id) for t in block.transactions]
        puts.append((schema.META_HEAD, block.header.previous))
        self._update_mark(durable=True, head=block.num - 1)
        self._write(puts, deletes)

    def advance_lib(self, old_lib: int, new_lib: int) -> None:
        """Blocks up to ``new_lib`` are irreversible: drop their undo records."""
        deletes: list[bytes] = []
        for num in range(old_lib, new_lib + 1):
            deletes.append(schema.undo_key(num))
            if num < new_lib:
                block_id = self.block_id_at(num)
                if block_id is not None:
                    deletes.append(schema.header_state_key(block_id))
        self._write([(schema.META_LIB, schema.be(new_lib, 8))], deletes)
        self._update_mark()

    # --- snapshots --------------------------------------------------------------------------

    def lib_state(self, chain_id: bytes) -> tuple[SnapshotHead, Iterator[tuple[bytes, bytes]]]:
        """The LIB's block, header state and state commitment, and an iterator over its
        committed state entries (``schema.committed``) in key order, as of now: read from a
        LevelDB snapshot, with the undo records of the blocks above the LIB laid over it.
        Cheap to call; the iterator may be drained on another thread while the chain moves
        on."""
        snap = self._db.snapshot()
        try:
            lib = int.from_bytes(snap.get(schema.META_LIB) or bytes(8), "big")
            head_id = snap.get(schema.META_HEAD)
            lib_id = snap.get(schema.block_num_key(lib))
            raw_block = None if lib_id is None else snap.get(schema.block_key(BlockId(lib_id)))
            raw_state = None if lib_id is None else snap.get(schema.header_state_key(lib_id))
            state_hash = snap.get(schema.META_STATE_HASH)
            if head_id is None or raw_block is None or raw_state is None or state_hash is None:
                raise SnapshotError(f"no block {lib} to snapshot: nothing is irreversible yet")
            overlay: dict[bytes, bytes | None] = {}
            for num in range(block_num_of(BlockId(head_id)), lib, -1):
                raw_undo = snap.get(schema.undo_key(num))
                if raw_undo is None:
                    raise StoreError(f"no undo record for reversible block {num}")
                undo, state_hash = unpack(raw_undo, "undo record")
                overlay.update((key, old) for key, old in undo)
        except plyvel.Error as err:
            raise StoreError(f"read failed: {err}") from err
        head = SnapshotHead(
            chain_id=chain_id,
            block=decode_block(raw_block),
            header_state=decode_header_state(raw_state),
            state_hash=StateHash.from_bytes(state_hash),
        )
        state = snap.iterator(start=schema.STATE, stop=schema.prefix_end(schema.STATE))
        return head, (e for e in _overlaid(state, overlay) if schema.committed(e[0]))

    def import_snapshot(
        self, head: SnapshotHead, chunks: Iterable[list[tuple[bytes, bytes]]]
    ) -> None:
        """Fill an empty store from a snapshot read by ``chain.storage.snapshot.read_snapshot``.

        Entries are written chunk by chunk as they are read; the chain's metadata (its id,
        head, LIB) only once the last chunk verified, so a store whose import failed or was
        killed holds no chain and is cleared by the next import."""
        if self.chain_id() is not None:
            raise StoreError("the data dir already holds a chain: import into an empty one")
        self._delete_range(b"", b"\xff")  # what an import that was cut short left
        for chunk in chunks:
            indexed = [
                e
                for k, v in chunk
                if k.startswith(schema.TX_BLOCK)
                for e in schema.indexed_ids(k, v)
            ]
            self._write(chunk + indexed, [])
        block, state = head.block, head.header_state
        self._write(
            [
                (schema.block_key(block.id), block.encode()),
                (schema.block_num_key(block.num), block.id),
                (schema.header_state_key(block.id), state.encode()),
                (schema.META_STATE_HASH, head.state_hash.to_bytes()),
                (schema.META_HEAD, block.id),
                (schema.META_LIB, schema.be(block.num, 8)),
                (schema.META_FIRST_BLOCK, schema.be(block.num, 8)),
                (schema.META_CHAIN_ID, head.chain_id),
            ],
            [],
        )
        self._update_mark(durable=True)

    def put_evidence(self, first: SignedBlock, second: SignedBlock) -> None:
        puts = [
            (schema.evidence_key(b.header.producer, b.header.slot, b.id), b.encode())
            for b in (first, second)
        ]
        self._write(puts, [])

    def put_vote_evidence(self, evidence: DoubleVote) -> bool:
        """Keep a double vote, unless its finalizer has ``MAX_VOTE_EVIDENCE_PER_FINALIZER``
        kept already; True if it was written."""
        prefix = schema.VOTE_EVIDENCE + evidence.key
        held = sum(1 for _ in self.iterate(prefix, prefix + b"\xff" * 9))
        if held >= MAX_VOTE_EVIDENCE_PER_FINALIZER:
            return False
        value = pack([evidence.slot, evidence.first.to_wire(), evidence.second.to_wire()])
        self._write([(schema.vote_evidence_key(evidence.key, evidence.slot), value)], [])
        return True


def _decode_double_vote(raw: bytes) -> DoubleVote:
    slot, first, second = unpack(raw, "vote evidence")
    a, b = vote_from_wire(first), vote_from_wire(second)
    return DoubleVote(a.key, slot, a, b)


def _overlaid(
    stored: Iterator[tuple[bytes, bytes]], overlay: Mapping[bytes, bytes | None]
) -> Iterator[tuple[bytes, bytes]]:
    """``stored`` entries (in key order) with ``overlay`` laid over them: a key in the
    overlay takes its value there, None deleting it."""
    extra = sorted((k, v) for k, v in overlay.items() if v is not None)
    i = 0
    for key, value in stored:
        while i < len(extra) and extra[i][0] < key:
            yield extra[i]
            i += 1
        if key in overlay:
            continue  # its value at the LIB is in ``extra``, or it did not exist then
        yield key, value
    yield from extra[i:]
