"""``bor-node``: init, run, devnet, export, import, snapshot, import-snapshot, genesis new,
status."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import gc
import importlib.metadata
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from chain.core.primitives.crypto import public_key_to_text
from chain.core.primitives.errors import ChainError
from chain.signatures.sigpool import ParallelRecoverer
from genesis.devnet import DEV_USERS, producer_key_file, write_dev_genesis
from genesis.errors import GenesisError
from genesis.model import load_genesis
from node.app import GC_THRESHOLDS, Node
from node.commands import devnet, history, status
from node.config.file import add_options, commented_config, load_config
from node.config.model import OPTIONS, NodeConfig
from node.config.options import parse_endpoint
from node.data_dir import open_chain, restart_from_snapshot
from node.errors import NodeError
from node.process import eventloop
from node.process.fds import raise_fd_limit
from node.process.logging import configure_logging
from node.process.malloc import return_big_buffers
from node.snapshots.service import (
    ProgressLine,
    create_snapshot,
    snapshot_name,
    verify_snapshot,
)


def _cmd_run(args: argparse.Namespace) -> int:
    config = load_config(args)
    configure_logging(config.log.level, config.log.format)
    raise_fd_limit()  # before any listener: the HTTP caps derive from it
    node = Node(config)
    eventloop.run(node.run())
    if node.fetched_snapshot is not None:  # state sync fetched one: go on from it
        restart_from_snapshot(config, node.fetched_snapshot, node.fetched_block)
        # The peers the operator added while it fetched are dialled again, not forgotten.
        peers = tuple(dict.fromkeys([*config.p2p.peers, *node.peers_added]))
        p2p = dataclasses.replace(config.p2p, peers=peers)
        eventloop.run(Node(dataclasses.replace(config, p2p=p2p)).run())
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
        ini.write_text(commented_config())
    ns = argparse.Namespace(config=None, data_dir=str(data_dir))
    chain = open_chain(load_config(ns))
    print(f"initialised {data_dir}: chain {chain.chain_id.hex()}, head {chain.head.num}")
    chain.store.close()
    return 0


def _cmd_devnet(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir)
    if not 1 <= args.producers <= 21:
        raise NodeError("--producers must be between 1 and 21")
    nodes = devnet.plan(
        args.producers,
        parse_endpoint("--http-server-address", args.http_server_address),
        args.p2p_base_port,
        args.admin_base_port,
    )
    # The lock is held while the devnet runs; its child nodes die with this process.
    with devnet.claim(data_dir):
        devnet.check_ports(nodes)
        if args.fresh:
            devnet.clear(data_dir)
        devnet.prepare(data_dir, nodes)
        return _run_devnet(args, data_dir, nodes)


def _run_devnet(args: argparse.Namespace, data_dir: Path, nodes: list[devnet.DevNode]) -> int:
    """Print how to use the devnet, then run it until a signal."""
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
        f"{_activate_line()}"
        f"  export BOR_WALLET_PASSWORD=dev BOR_URL={url}\n"
        f"  bor-wallet import --from-dev-keys {keys_path}\n"
        f"  bor-wallet transfer {DEV_USERS[0]} {DEV_USERS[1]} 10.5 --memo hello\n"
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
    eventloop.run(Node(config).run())
    return 0


def _activate_line() -> str:
    """The line that puts bor-wallet on a new terminal's PATH, when this runs from a virtual
    environment (scripts/devnet.sh's .venv): relative to here when it is below."""
    activate = Path(sys.prefix) / "bin" / "activate"
    if sys.prefix == sys.base_prefix or not activate.exists():
        return ""
    cwd = Path.cwd()
    shown = activate.relative_to(cwd) if activate.is_relative_to(cwd) else activate
    return f"  . {shown}\n"


def _cmd_export(args: argparse.Namespace) -> int:
    config = _offline_config(args)
    chain = open_chain(config, while_running="POST /v1/node/export_history")
    try:
        plan = history.export_plan(chain)
        history.export_history(chain.store, plan, Path(args.to))
    finally:
        chain.store.close()
    # The genesis goes with the history, so that `import` into a fresh data dir needs nothing
    # else (a block log names its chain id, but the initial state comes from the genesis).
    beside = history.genesis_beside(Path(args.to))
    shutil.copyfile(config.genesis_json, beside)
    print(f"exported {plan.describe()} to {args.to}, its genesis to {beside}")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    if args.validation_mode not in ("full", "light"):
        raise NodeError("--validation-mode must be full or light")
    config = _offline_config(args)
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
    """The data dir's config for a command run on a stopped node: what goes wrong is its
    one line on stderr, not the node's info log."""
    ns = argparse.Namespace(
        config=None, data_dir=args.data_dir, genesis_json=args.genesis_json, log_level="warning"
    )
    config = load_config(ns)
    configure_logging(config.log.level, config.log.format)
    return config


def _cmd_snapshot_create(args: argparse.Namespace) -> int:
    config = _offline_config(args)
    chain = open_chain(config, while_running="POST /v1/producer/create_snapshot")
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
    # The same way in as `run --snapshot`: an empty or `init`-ed data dir, the genesis given
    # once and kept there.
    path = Path(args.file)
    offline = _offline_config(args)
    config = dataclasses.replace(offline, chain=dataclasses.replace(offline.chain, snapshot=path))
    size = path.stat().st_size if path.is_file() else None  # else the import says why
    progress = ProgressLine(f"importing {path.name}", size)
    chain = open_chain(config, report=progress)
    progress.done()
    chain.store.close()
    print(
        f"{config.data_dir} starts at block {chain.head.num} {chain.head.id.hex()}"
        f" (the snapshot {path.name}); `bor-node run --data-dir {config.data_dir}` follows"
        " the chain from there"
    )
    return 0


def _cmd_genesis_new(args: argparse.Namespace) -> int:
    out = Path(args.out)
    genesis_path, keys_path = write_dev_genesis(out, args.producers)
    genesis = load_genesis(genesis_path)
    print(f"wrote {genesis_path} (chain {genesis.chain_id.hex()}) and {keys_path}")
    # The line each producer's config.ini needs, with its key file's absolute path: the
    # node reads it from wherever it runs.
    print("each producer's key file, and the line its config.ini needs:")
    for producer in genesis.initial_producers:
        key_file = producer_key_file(out.resolve(), producer.name)
        print(f"signature-provider = {public_key_to_text(producer.key)}=KEYFILE:{key_file}")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    # The data dir is checked when it was named or names the address: a node elsewhere is
    # not this data dir's.
    data_dir = Path(args.data_dir or "data")
    addressed = args.url or args.http_server_address or args.config
    checked = data_dir if not args.devnet and (args.data_dir or not addressed) else None
    if checked is not None and not checked.is_dir():
        print(f"bor-node: {checked} does not exist: pass the node's --data-dir", file=sys.stderr)
        return 1
    if args.devnet:
        targets = [status.Target(u, "devnet.json") for u in devnet.node_urls(Path(args.devnet))]
    else:
        config = Path(args.config) if args.config else None
        targets = [status.target(data_dir, config, args.http_server_address, args.url)]
    found: list[dict[str, Any]] = []
    failures = 0
    for at in targets:
        try:
            info = status.get_info(at.url)
            if checked is not None:
                status.check_chain(at, info, checked)
            found.append(status.summary(at, info))
        except NodeError as err:
            print(f"bor-node: {err} (address from {at.source})", file=sys.stderr)
            found.append({"url": at.url, "address_from": at.source, "error": str(err)})
            failures += 1
    if args.json:  # one object, an answer or why there is none: a script reads either
        print(json.dumps({"nodes": found} if args.devnet else found[0]))
    else:
        for s in found:
            if "error" not in s:
                print(status.line(s))
    return 1 if failures else 0


_OPTIONS = {option.name: option for option in OPTIONS}


class _Subcommand(argparse.ArgumentParser):
    """A subcommand's parser: a flag it does not know is its error, shown with its own usage
    (argparse would hand it up to the top-level parser, whose usage lists only commands)."""

    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extra = super().parse_known_args(args, namespace)
        if extra:
            known = [flag for action in self._actions for flag in action.option_strings]
            near = difflib.get_close_matches(extra[0].split("=")[0], known, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            self.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
        return parsed, extra


def _version() -> str:
    try:
        return importlib.metadata.version("bor")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bor-node", description="BoR blockchain node")
    parser.add_argument("--version", action="version", version=f"bor-node {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Subcommand)
    _add_node_commands(sub)
    _add_devnet_command(sub)
    _add_block_log_commands(sub)
    _add_snapshot_commands(sub)
    _add_genesis_commands(sub)
    _add_status_command(sub)
    return parser


def _add_node_commands(sub: argparse._SubParsersAction[_Subcommand]) -> None:
    """Run a node, and make the data dir it runs from."""
    run = sub.add_parser(
        "run",
        help="run a node from config.ini and flags",
        # The options, one group per section, are in --help; an error need not list them all.
        usage="%(prog)s [-h] [--config CONFIG] [--data-dir DATA_DIR] [--OPTION VALUE ...]",
    )
    add_options(run)
    run.set_defaults(func=_cmd_run)

    init = sub.add_parser("init", help="create a data dir from a genesis file")
    init.add_argument("--genesis", required=True, help="genesis JSON file")
    init.add_argument("--data-dir", default="data", help="the data dir to create (default: data)")
    init.set_defaults(func=_cmd_init)


def _add_devnet_command(sub: argparse._SubParsersAction[_Subcommand]) -> None:
    dev = sub.add_parser("devnet", help="generate a dev chain (if needed) and run it")
    dev.add_argument(
        "--data-dir",
        default="devnet-data",
        help="where the devnet's genesis, keys and nodes live (default: devnet-data)",
    )
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
    for name in ("log-level", "log-format"):
        option = _OPTIONS[name]
        dev.add_argument(
            "--" + name, default=option.default, choices=option.choices, help=option.help_text()
        )
    dev.set_defaults(func=_cmd_devnet)


def _add_block_log_commands(sub: argparse._SubParsersAction[_Subcommand]) -> None:
    """Write the irreversible history to a block log, and start a data dir from one."""
    exp = sub.add_parser("export", help="write the irreversible history to a block log file")
    exp.add_argument("--data-dir", default="data", help="the node's data dir (default: data)")
    exp.add_argument("--genesis-json", help="genesis file (default: <data-dir>/genesis.json)")
    exp.add_argument("--to", required=True, help="the file to write (and FILE.index)")
    exp.set_defaults(func=_cmd_export)

    imp = sub.add_parser("import", help="bootstrap a data dir from a block log file")
    imp.add_argument("file", help="the block log file `bor-node export` wrote")
    imp.add_argument("--data-dir", default="data", help="the node's data dir (default: data)")
    imp.add_argument("--genesis-json", help="default: <data-dir>/genesis.json")
    imp.add_argument(
        "--validation-mode",
        default="full",
        help="full (default) or light: skip transaction signatures of this irreversible history",
    )
    imp.set_defaults(func=_cmd_import)


def _add_snapshot_commands(sub: argparse._SubParsersAction[_Subcommand]) -> None:
    """Write or check a state snapshot, and start an empty data dir from one."""
    snap = sub.add_parser("snapshot", help="write or check a state snapshot")
    snap_sub = snap.add_subparsers(dest="snapshot_command", required=True)
    create = snap_sub.add_parser(
        "create", help="write the LIB's state to a snapshot file (node stopped)"
    )
    create.add_argument("--data-dir", default="data", help="the node's data dir (default: data)")
    create.add_argument("--genesis-json", help="genesis file (default: <data-dir>/genesis.json)")
    create.add_argument("--to", help="default: <data-dir>/snapshots/snapshot-<num>-<id>.bin")
    create.set_defaults(func=_cmd_snapshot_create)
    verify = snap_sub.add_parser("verify", help="check a snapshot file whole; print its block")
    verify.add_argument("file", help="the snapshot file to check")
    verify.set_defaults(func=_cmd_snapshot_verify)

    imps = sub.add_parser("import-snapshot", help="start an empty data dir from a snapshot")
    imps.add_argument("file", help="the snapshot file to start from (verified first)")
    imps.add_argument("--data-dir", default="data", help="the node's data dir (default: data)")
    imps.add_argument("--genesis-json", help="default: <data-dir>/genesis.json")
    imps.set_defaults(func=_cmd_import_snapshot)


def _add_genesis_commands(sub: argparse._SubParsersAction[_Subcommand]) -> None:
    gen = sub.add_parser("genesis", help="genesis tools")
    gen_sub = gen.add_subparsers(dest="genesis_command", required=True)
    new = gen_sub.add_parser("new", help="write a dev genesis and its keys")
    new.add_argument(
        "--producers", type=int, default=1, help="initial producers, 1 to 21 (default: 1)"
    )
    new.add_argument(
        "--out", required=True, help="directory to write genesis.json and keys.json (0600) into"
    )
    new.set_defaults(func=_cmd_genesis_new)


def _add_status_command(sub: argparse._SubParsersAction[_Subcommand]) -> None:
    stat = sub.add_parser(
        "status", help="show a node's head, LIB, sync progress and peers (asks its RPC)"
    )
    stat.add_argument(
        "--data-dir",
        help="the node's data dir (default: data): its node.json or config.ini names the RPC",
    )
    stat.add_argument("--config", help="config.ini to read (default: <data-dir>/config.ini)")
    stat.add_argument(
        "--http-server-address", help="host:port of the node's RPC (default: from config.ini)"
    )
    stat.add_argument("--url", help="the node's RPC URL, e.g. http://127.0.0.1:8888")
    stat.add_argument("--devnet", help="a devnet data dir: show every node of it")
    stat.add_argument("--json", action="store_true", help="print one JSON object, for scripts")
    stat.set_defaults(func=_cmd_status)


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
        code = int(args.func(args))
        sys.stdout.flush()  # here, not at exit: a reader that left (| head) is met in the try
        return code
    except BrokenPipeError:  # the reader of stdout left: stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that Python's flush at exit cannot fail
        os.close(devnull)
        return 141  # 128 + SIGPIPE: what a shell reports for a tool the broken pipe stopped
    except FileNotFoundError as err:  # Python's "[Errno 2] ..." is not for an operator
        print(f"bor-node: {err.filename or err}: no such file", file=sys.stderr)
        return 2
    except (NodeError, GenesisError, ChainError, ValueError, OSError) as err:
        print(f"bor-node: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
