"""How a data dir gets and keeps its chain: the genesis given once and kept, a start from a
snapshot file, the restart into a snapshot that state sync fetched, and the one-line answer
when another process holds the store.

``bor-node run`` and the offline commands (import, export, snapshot) open a data dir the
same way, so that each path an operator can take to a working node behaves alike.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import structlog

from chain.controller import Chain
from chain.core.primitives.errors import SnapshotError, StoreInUse
from chain.core.primitives.types import BlockId, block_num_of
from chain.mempool import Mempool
from chain.signatures.sigpool import ParallelRecoverer, recover_local
from chain.storage.store import BlockStore
from chain.vm import ContractRuntime
from chain.vm.artefacts import ArtefactDir
from genesis.model import Genesis, load_genesis
from node.config.model import NodeConfig
from node.errors import NodeError
from node.node_file import (
    read_node_file,
)
from node.snapshots.header_checkpoint import HEADER_CHECKPOINT, HeaderCheckpointFile
from node.snapshots.service import (
    Report,
    import_snapshot,
    read_snapshot_head,
    snapshot_name,
)

log = structlog.get_logger("node")

# Compiled contracts, by code hash (``chain.vm.artefacts``).
COMPILED_DIR = "compiled-contracts"


def open_chain(
    config: NodeConfig,
    recoverer: ParallelRecoverer | None = None,
    *,
    while_running: str = "",
    report: Report | None = None,
    contracts: ContractRuntime | None = None,
) -> Chain:
    """The data dir's chain, started from ``--snapshot`` if it holds none yet.
    ``while_running`` names what the admin API offers in place of the command that opens it,
    for when a node has the data dir open; ``report`` follows a snapshot import;
    ``contracts``: the runtime (by default one that keeps compiled contracts in the data dir,
    ``contract_runtime``)."""
    snapshot = config.chain.snapshot
    if snapshot is not None:
        check_snapshot_chain(config, snapshot)  # before data_dir_genesis keeps a given genesis
    genesis = data_dir_genesis(config)
    if snapshot is None:
        store = open_store(config.data_dir, while_running)
    else:
        store = start_from_snapshot(config.data_dir, snapshot, genesis.chain_id, report)
    try:
        return Chain(
            store,
            genesis.to_initial_state(),
            mempool=Mempool(
                config.chain.max_mempool_txs,
                config.chain.max_mempool_per_account,
                config.chain.max_mempool_bytes,
                config.chain.max_mempool_account_bytes or None,  # 0: the default share
            ),
            recoverer=recoverer or recover_local,
            contracts=contracts or contract_runtime(config.data_dir),
        )
    except BaseException:
        store.close()
        raise


def contract_runtime(data_dir: Path) -> ContractRuntime:
    """The contract runtime of a node on ``data_dir``: compiled contracts are kept there, so
    that a restart does not compile them again."""
    return ContractRuntime(artefacts=ArtefactDir(data_dir / COMPILED_DIR))


def check_snapshot_chain(config: NodeConfig, snapshot: Path) -> None:
    """Refuse a snapshot of another chain than the genesis the data dir would keep, before
    it keeps it: a refused start leaves a fresh data dir as it was, for the right one."""
    kept = config.data_dir / "genesis.json"
    source = config.chain.genesis_json or kept
    if not source.exists() and source == kept:
        return  # data_dir_genesis says how to give one
    chain_id = load_genesis(source).chain_id.hex()
    of = read_snapshot_head(snapshot).chain_id.hex()
    if of != chain_id:
        hint = (
            "start it in another data dir"
            if source == kept
            else f"pass the genesis of chain {of[:16]}…"
        )
        raise SnapshotError(
            f"{snapshot.name} is a snapshot of chain {of[:16]}…; {source} is the genesis"
            f" of {chain_id[:16]}…: {hint}"
        )


def data_dir_genesis(config: NodeConfig) -> Genesis:
    """The chain's genesis, kept in the data dir: a ``--genesis-json`` given once is copied
    there (so that a restart, an export or a snapshot needs no flag), one that disagrees
    with the data dir's is refused, and a data dir without one says how to give it."""
    kept = config.data_dir / "genesis.json"
    given = config.chain.genesis_json
    if given is None or given.resolve() == kept.resolve():
        if not kept.exists():
            raise NodeError(
                f"{config.data_dir} has no genesis.json: pass --genesis-json FILE once (it is"
                f" kept in the data dir), or run `bor-node init --genesis FILE --data-dir"
                f" {config.data_dir}` first"
            )
        return load_genesis(kept)
    genesis = load_genesis(given)
    if kept.exists():
        if load_genesis(kept).chain_id != genesis.chain_id:
            raise NodeError(
                f"{given} is the genesis of another chain than {kept}'s: a data dir keeps"
                " one chain (use another data dir, or leave --genesis-json out)"
            )
        return genesis
    config.data_dir.mkdir(parents=True, exist_ok=True)
    part = kept.with_name(kept.name + ".part")
    shutil.copyfile(given, part)
    part.replace(kept)
    log.info("genesis_kept", file=str(kept), chain_id=genesis.chain_id.hex())
    return genesis


def in_use_message(data_dir: Path, pid: int | None, while_running: str = "") -> str:
    """What an operator is told when a node has ``data_dir`` open: ``while_running`` names
    what the admin API offers instead of the command that met it (a curl line, when the
    node's node.json says where its admin API listens)."""
    owner = "" if pid is None else f" (pid {pid})"
    instead = f" or use the admin API: {while_running}" if while_running else " first"
    running = read_node_file(data_dir)
    if while_running and running is not None and running.admin is not None:
        method, path = while_running.split(" ", 1)
        instead = f" or use its admin API: curl -X {method} {running.admin}{path}"
    return f"a node is running on this data dir{owner}, {data_dir}; stop it{instead}"


def open_store(data_dir: Path, while_running: str = "") -> BlockStore:
    """The data dir's block store; a NodeError naming the running node if one has it open."""
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        return BlockStore(str(data_dir / "blocks"))
    except StoreInUse as err:
        raise NodeError(in_use_message(data_dir, err.pid, while_running)) from err


def start_from_snapshot(
    data_dir: Path, path: Path, chain_id: bytes, report: Report | None = None
) -> BlockStore:
    """The data dir's store, filled from the snapshot at ``path`` if it holds no chain yet,
    or only the genesis (``bor-node init``, or a state sync that found no snapshot); a store
    that already started from this snapshot goes on from where it is (so ``--snapshot`` may
    stay in a service's command line); any other chain in the store is refused."""
    head = read_snapshot_head(path)  # of the genesis's chain: check_snapshot_chain saw to it
    store = open_store(data_dir)
    try:
        held = store.chain_id()
        if held == chain_id and store.head_id() is not None and _genesis_only(store):
            # Nothing but the genesis block is lost: start the store over from the snapshot.
            store.close()
            shutil.rmtree(data_dir / "blocks")
            store = open_store(data_dir)
            held = None
        if held is None:
            log.info("snapshot_importing", file=str(path), block=head.num)
            verified = import_snapshot(store, path, chain_id, report)
            log.info(
                "snapshot_imported",
                block=verified.head.num,
                block_id=verified.head.block.id.hex(),
                entries=verified.entries,
            )
            return store
        if held == chain_id and store.first_block() == head.num:
            log.info("snapshot_already_imported", block=head.num)
            return store
        raise NodeError(
            f"{data_dir} holds a chain already (head {_head_num(store)}): a snapshot starts an"
            " empty or `bor-node init`-ed data dir (move its blocks directory away to start"
            " over from the snapshot)"
        )
    except BaseException:
        store.close()
        raise


def _head_num(store: BlockStore) -> int:
    head = store.head_id()
    return 0 if head is None else block_num_of(head)


def _genesis_only(store: BlockStore) -> bool:
    """Whether the store holds the genesis block and nothing above it."""
    return store.first_block() <= 1 and _head_num(store) == 0


STATE_SYNC_DIR = "state-sync"


def restart_from_snapshot(config: NodeConfig, fetched: Path, trusted: BlockId) -> None:
    """After state sync: replace the data dir's chain (genesis only) by the fetched snapshot,
    and keep the file among the snapshots this node serves. The snapshot must be of the
    trusted block (state sync checked it; this is the last word before the chain is
    replaced): one that is not is deleted, so that the next start fetches it again."""
    genesis = load_genesis(config.genesis_json)
    named = read_snapshot_head(fetched)
    if named.block.id != trusted:
        shutil.rmtree(config.data_dir / STATE_SYNC_DIR, ignore_errors=True)
        raise NodeError(
            f"state sync fetched the snapshot of block {named.num} "
            f"({named.block.id.hex()[:16]}…), not of the trusted block {trusted.hex()[:16]}…;"
            " it is deleted and the next start fetches again"
        )
    blocks = config.data_dir / "blocks"
    shutil.rmtree(blocks)
    store = BlockStore(str(blocks))
    try:
        verified = import_snapshot(store, fetched, genesis.chain_id)
    finally:
        store.close()
    head = verified.head
    keep = config.data_dir / "snapshots" / snapshot_name(head.num, head.block.id)
    keep.parent.mkdir(parents=True, exist_ok=True)
    fetched.replace(keep)
    shutil.rmtree(config.data_dir / STATE_SYNC_DIR, ignore_errors=True)
    HeaderCheckpointFile(config.data_dir / HEADER_CHECKPOINT).remove()
    log.info("state_sync_imported", block=head.num, block_id=head.block.id.hex())
