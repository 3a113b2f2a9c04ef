"""``bor-node``: init, run, devnet, export, import, snapshot, import-snapshot, genesis new,
status."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from chain.core.errors import ChainError
from chain.signatures.sigpool import ParallelRecoverer
from chain.storage.store import BlockStore
from genesis.devnet import DEV_USERS, write_dev_genesis
from genesis.errors import GenesisError
from genesis.model import load_genesis
from node import devnet, history
from node.app import GC_THRESHOLDS, Node, open_chain, restart_from_snapshot
from node.config import NodeConfig, add_options, load_config, parse_endpoint
from node.errors import NodeError
from node.fds import raise_fd_limit
from node.logging import configure_logging
from node.malloc import return_big_buffers
from node.snapshots import (
    ProgressLine,
    create_snapshot,
    import_snapshot,
    snapshot_name,
    verify_snapshot,
)


def _cmd_run(args: argparse.Namespace) -> int:
    config = load_config(args)
    configure_logging(config.log.level, config.log.format)
    raise_fd_limit()  # before any listener: the HTTP caps derive from it
    node = Node(config)
    asyncio.run(node.run())
    if node.fetched_snapshot is not None:  # state sync fetched one: go on from it
        restart_from_snapshot(config, node.fetched_snapshot, node.fetched_block)
        # The peers the operator added while it fetched are dialled again, not forgotten.
        peers = tuple(dict.fromkeys([*config.p2p.peers, *node.peers_added]))
        p2p = dataclasses.replace(config.p2p, peers=peers)
        asyncio.run(Node(dataclasses.replace(config, p2p=p2p)).run())
    return 0


def _cmd_init(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir)
    genesis = load_genesis(args.genesis)
    data_dir.mkdir(parents=True, exist_ok=True)
    target = data_dir / "genesis.json"
    if target.exists() and load_genesis(target).chain_id != genesis.chain_id:
        raise NodeError(f"{target} already holds a different genesis")
    if not target.exists():
        shutil.copyfile(args.genesis, target)
    ini = data_dir / "config.ini"
    if not ini.exists():
        ini.write_text(
            "# bor-node configuration: key = value; every option is also a --flag\n"
            "http-server-address = 127.0.0.1:8888\n"
            "# producer-name = producera\n"
            "# signature-provider = PUB_K1_...=KEY:PVT_K1_...\n"
        )
    ns = argparse.Namespace(config=None, data_dir=str(data_dir))
    chain = open_chain(load_config(ns))
    print(f"initialised {data_dir}: chain {chain.chain_id.hex()}, head {chain.head.num}")
    chain.store.close()
    return 0


def _cmd_devnet(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir)
    if not 1 <= args.producers <= 21:
        raise NodeError("--producers must be between 1 and 21")
    if args.fresh and data_dir.exists():
        shutil.rmtree(data_dir)
    nodes = devnet.plan(
        args.producers,
        parse_endpoint("--http-server-address", args.http_server_address),
        args.p2p_base_port,
        args.admin_base_port,
    )
    devnet.prepare(data_dir, nodes)
    keys_path = data_dir / "keys.json"
    url = nodes[0].url
    table = "\n".join(
        f"  {n.name}: producer {n.producer}, RPC {n.url}, admin RPC {n.admin_url}, "
        f"p2p {n.p2p[0]}:{n.p2p[1]}"
        for n in nodes
    )
    print(
        f"BoR devnet of {len(nodes)} producer node(s) in {data_dir}:\n{table}\n"
        f"Logs in {data_dir}/node*/node.log; dev keys in {keys_path}.\n"
        "Try the wallet in another terminal:\n"
        f"  export BOR_WALLET_PASSWORD=dev BOR_URL={url}\n"
        f"  bor-wallet import --from-dev-keys {keys_path}\n"
        f"  bor-wallet transfer {DEV_USERS[0]} {DEV_USERS[1]} 10.0000 --memo hello\n"
        f"  bor-wallet get account {DEV_USERS[1]}\n"
        f"  bor-node status --devnet {data_dir}\n",
        file=sys.stderr,
        flush=True,
    )
    if len(nodes) > 1:
        return devnet.supervise(data_dir, nodes, args.log_level)
    ns = argparse.Namespace(
        config=None,
        data_dir=str(data_dir / nodes[0].name),
        log_level=args.log_level,
        log_format=args.log_format,
    )
    config = load_config(ns)
    configure_logging(config.log.level, config.log.format)
    raise_fd_limit()
    asyncio.run(Node(config).run())
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    ns = argparse.Namespace(
        config=None, data_dir=args.data_dir, genesis_json=args.genesis_json, log_level="warning"
    )
    config = load_config(ns)
    chain = open_chain(config)
    try:
        count = history.export_history(chain, Path(args.to))
    finally:
        chain.store.close()
    # The genesis goes with the history, so that `import` into a fresh data dir needs nothing
    # else (a block log names its chain id, but the initial state comes from the genesis).
    beside = history.genesis_beside(Path(args.to))
    shutil.copyfile(config.genesis_json, beside)
    print(f"exported blocks 1..{count} (irreversible) to {args.to}, its genesis to {beside}")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    if args.validation_mode not in ("full", "light"):
        raise NodeError("--validation-mode must be full or light")
    ns = argparse.Namespace(
        config=None, data_dir=args.data_dir, genesis_json=args.genesis_json, log_level="warning"
    )
    config = load_config(ns)
    if args.genesis_json is None and not config.genesis_json.exists():
        _adopt_genesis(Path(args.file), Path(args.data_dir))
    workers = config.chain.signature_workers if args.validation_mode == "full" else 0
    recoverer = ParallelRecoverer(workers) if workers else None
    chain = open_chain(config, recoverer)
    try:
        applied, seconds = history.import_history(
            chain, Path(args.file), light=args.validation_mode == "light"
        )
        head = chain.head.num
    finally:
        chain.store.close()
        if recoverer is not None:
            recoverer.close()
    rate = f", {applied / seconds:,.0f} blocks/s" if seconds else ""
    print(f"imported {applied} blocks in {seconds:.1f} s{rate}; head {head}")
    return 0


def _adopt_genesis(history_file: Path, data_dir: Path) -> None:
    """Initialise a fresh ``data_dir`` from the genesis exported beside ``history_file``."""
    beside = history.genesis_beside(history_file)
    if not beside.exists():
        raise NodeError(
            f"{data_dir} has no genesis.json and there is no {beside.name} beside"
            f" {history_file.name}: pass --genesis-json or run `bor-node init` first"
        )
    genesis = load_genesis(beside)
    data_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(beside, data_dir / "genesis.json")
    print(f"initialised {data_dir} from {beside.name} (chain {genesis.chain_id.hex()[:16]}…)")


def _offline_config(args: argparse.Namespace) -> NodeConfig:
    ns = argparse.Namespace(
        config=None, data_dir=args.data_dir, genesis_json=args.genesis_json, log_level="warning"
    )
    return load_config(ns)


def _cmd_snapshot_create(args: argparse.Namespace) -> int:
    config = _offline_config(args)
    chain = open_chain(config)
    try:
        head, entries = chain.store.lib_state(chain.chain_id)
        name = snapshot_name(head.num, head.block.id)
        path = Path(args.to) if args.to else config.data_dir / "snapshots" / name
        progress = ProgressLine(f"writing {path.name}")
        summary = create_snapshot(head, entries, path, progress)
        progress.done()
    finally:
        chain.store.close()
    print(
        f"wrote {path}: block {head.num} {head.block.id.hex()} (the LIB), "
        f"{summary.entries:,} state entries, {summary.size:,} bytes"
    )
    return 0


def _cmd_snapshot_verify(args: argparse.Namespace) -> int:
    path = Path(args.file)
    progress = ProgressLine(f"verifying {path.name}", path.stat().st_size)
    verified = verify_snapshot(path, progress)
    progress.done()
    head = verified.head
    print(
        f"{path}: verified: chain {head.chain_id.hex()}, block {head.num} "
        f"{head.block.id.hex()}, state root {head.block.header.state_root.hex()}, "
        f"{verified.entries:,} state entries"
    )
    return 0


def _cmd_import_snapshot(args: argparse.Namespace) -> int:
    config = _offline_config(args)
    genesis = load_genesis(config.genesis_json)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    path = Path(args.file)
    store = BlockStore(str(config.data_dir / "blocks"))
    try:
        if store.chain_id() is not None:
            raise NodeError(f"{config.data_dir} holds a chain already: import into an empty one")
        progress = ProgressLine(f"importing {path.name}", path.stat().st_size)
        verified = import_snapshot(store, path, genesis.chain_id, progress)
        progress.done()
    finally:
        store.close()
    head = verified.head
    print(
        f"imported {path}: block {head.num} {head.block.id.hex()}, "
        f"{verified.entries:,} state entries; `bor-node run` follows the chain from there"
    )
    return 0


def _cmd_genesis_new(args: argparse.Namespace) -> int:
    genesis_path, keys_path = write_dev_genesis(Path(args.out), args.producers)
    genesis = load_genesis(genesis_path)
    print(f"wrote {genesis_path} (chain {genesis.chain_id.hex()}) and {keys_path}")
    return 0


def _get_json(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError) as err:
        raise NodeError(f"cannot reach {url}: {getattr(err, 'reason', err)}") from err


def _cmd_status(args: argparse.Namespace) -> int:
    urls = devnet.node_urls(Path(args.devnet)) if args.devnet else [args.url]
    failures = 0
    for url in urls:
        try:
            info = _get_json(url.rstrip("/") + "/v1/chain/get_info")
        except NodeError as err:
            print(f"{url}: unreachable ({err})")
            failures += 1
            continue
        print(
            f"{url}: head {info['head_block_num']} ({info['head_block_producer']}, "
            f"{info['head_block_time']}), LIB {info['last_irreversible_block_num']}, "
            f"peers {info.get('peer_count', 0)}, sync {info.get('sync_stage', '-')}, "
            f"mempool {info['mempool_size']}, chain {info['chain_id'][:16]}…"
        )
    return 1 if failures else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bor-node", description="BoR blockchain node")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a node from config.ini and flags")
    add_options(run)
    run.set_defaults(func=_cmd_run)

    init = sub.add_parser("init", help="create a data dir from a genesis file")
    init.add_argument("--genesis", required=True, help="genesis JSON file")
    init.add_argument("--data-dir", default="data")
    init.set_defaults(func=_cmd_init)

    dev = sub.add_parser("devnet", help="generate a dev chain (if needed) and run it")
    dev.add_argument("--data-dir", default="devnet-data")
    dev.add_argument(
        "--producers", type=int, default=3, help="producer nodes, one process each (1-21)"
    )
    dev.add_argument(
        "--http-server-address", default="127.0.0.1:8888", help="RPC of the first node"
    )
    dev.add_argument("--p2p-base-port", type=int, default=9876, help="p2p port of the first node")
    dev.add_argument(
        "--admin-base-port",
        type=int,
        help="admin RPC port of the first node (default: right after the RPC ports)",
    )
    dev.add_argument("--fresh", action="store_true", help="delete the data dir first")
    dev.add_argument("--log-level", default="info")
    dev.add_argument("--log-format", default="auto")
    dev.set_defaults(func=_cmd_devnet)

    exp = sub.add_parser("export", help="write the irreversible history to a block log file")
    exp.add_argument("--data-dir", default="data")
    exp.add_argument("--genesis-json")
    exp.add_argument("--to", required=True, help="the file to write (and FILE.index)")
    exp.set_defaults(func=_cmd_export)

    imp = sub.add_parser("import", help="bootstrap a data dir from a block log file")
    imp.add_argument("file")
    imp.add_argument("--data-dir", default="data")
    imp.add_argument("--genesis-json", help="default: <data-dir>/genesis.json")
    imp.add_argument(
        "--validation-mode",
        default="full",
        help="full (default) or light: skip transaction signatures of this irreversible history",
    )
    imp.set_defaults(func=_cmd_import)

    snap = sub.add_parser("snapshot", help="write or check a state snapshot")
    snap_sub = snap.add_subparsers(dest="snapshot_command", required=True)
    create = snap_sub.add_parser(
        "create", help="write the LIB's state to a snapshot file (node stopped)"
    )
    create.add_argument("--data-dir", default="data")
    create.add_argument("--genesis-json")
    create.add_argument("--to", help="default: <data-dir>/snapshots/snapshot-<num>-<id>.bin")
    create.set_defaults(func=_cmd_snapshot_create)
    verify = snap_sub.add_parser("verify", help="check a snapshot file whole; print its block")
    verify.add_argument("file")
    verify.set_defaults(func=_cmd_snapshot_verify)

    imps = sub.add_parser("import-snapshot", help="start an empty data dir from a snapshot")
    imps.add_argument("file")
    imps.add_argument("--data-dir", default="data")
    imps.add_argument("--genesis-json", help="default: <data-dir>/genesis.json")
    imps.set_defaults(func=_cmd_import_snapshot)

    gen = sub.add_parser("genesis", help="genesis tools")
    gen_sub = gen.add_subparsers(dest="genesis_command", required=True)
    new = gen_sub.add_parser("new", help="write a dev genesis and its keys")
    new.add_argument("--producers", type=int, default=1)
    new.add_argument("--out", required=True)
    new.set_defaults(func=_cmd_genesis_new)

    status = sub.add_parser("status", help="show a node's head and LIB")
    status.add_argument("--url", default="http://127.0.0.1:8888")
    status.add_argument("--devnet", help="a devnet data dir: show every node of it")
    status.set_defaults(func=_cmd_status)
    return parser


def tune_gc() -> None:
    """The cyclic garbage collector, tuned for a node: almost everything it allocates is
    freed by reference counting, yet with the default thresholds (700, 10, 10) collections
    took 11 % of the chain thread applying blocks (py-spy of scripts/bench_apply.py), each
    full one scanning every block and account held. Collections follow the node's
    ``GC_THRESHOLDS`` (young ones after 50,000 net allocations instead of 700), and what is
    alive at start-up (modules, genesis) is moved out of their reach."""
    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    tune_gc()
    return_big_buffers()  # before the first big buffer: memory returns after floods
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (NodeError, GenesisError, ChainError, ValueError, OSError) as err:
        print(f"bor-node: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
