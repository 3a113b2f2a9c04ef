"""``bor-wallet``: keys, transactions and queries, over the node's RPC only."""

from __future__ import annotations

import argparse
import getpass
import importlib.metadata
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bor_client.client import Client
from bor_client.errors import ClientError
from bor_client.keys import Signer
from bor_client.keystore import Keystore
from bor_client.results import PushResult
from bor_client.transactions import body_of, parse_amount
from chain.core.execution.actions import (
    MAX_MEMO,
    MAX_URL,
    Action,
    AllowCode,
    ApproveProducer,
    NewAccount,
    RegProducer,
    Stake,
    Transfer,
    UnregProducer,
    Unstake,
    UpdateKey,
    VoteProducer,
)
from chain.core.execution.transaction import SignedTransaction
from chain.core.execution.transition import format_units as format_amount
from chain.core.primitives.crypto import PrivateKey, public_key_from_text
from chain.core.primitives.errors import ChainError
from chain.core.primitives.types import account_name
from wallet import batch, contracts
from wallet.errors import WalletError, WalletFileError

__all__ = ["main", "parse_amount"]  # parse_amount: the SDK's, which the wallet's amounts use

DEFAULT_URL = "http://127.0.0.1:8888"


def default_wallet_path() -> Path:
    return Path(os.environ.get("BOR_WALLET", Path.home() / ".bor-wallet" / "default.wallet"))


def _password(args: argparse.Namespace, confirm: bool = False) -> str:
    if args.password_file:
        try:
            return Path(args.password_file).read_text().rstrip("\n")
        except OSError as err:
            raise WalletFileError(f"cannot read password file: {err.strerror}") from err
    env = os.environ.get("BOR_WALLET_PASSWORD")
    if env is not None:
        return env
    if not sys.stdin.isatty():
        raise WalletError("no password: use a terminal, BOR_WALLET_PASSWORD or --password-file")
    password = getpass.getpass("wallet password: ")
    if confirm and getpass.getpass("again: ") != password:
        raise WalletError("the passwords differ")
    return password


def _open(args: argparse.Namespace) -> Keystore:
    return Keystore.open(Path(args.wallet), _password(args))


def _open_or_create(args: argparse.Namespace) -> Keystore:
    path = Path(args.wallet)
    if path.exists():
        return _open(args)
    store = Keystore.create(path, _password(args, confirm=True))
    print(f"created wallet {path}", file=sys.stderr)
    return store


# --- building and sending transactions --------------------------------------------------


def _sign(args: argparse.Namespace, client: Client, actions: list[Action]) -> SignedTransaction:
    """``actions`` signed with the wallet's keys; the node is asked first, so that the
    password is not asked for a transaction it could not take."""
    client.info()
    client.builder.signer = Signer.from_keystore(_open(args))
    return client.sign(actions)


def check_text(what: str, text: str, limit: int) -> str:
    """``text`` if the chain takes it in a field of at most ``limit`` characters: refused here,
    before the wallet is unlocked and a transaction signed, rather than by the node."""
    if len(text) > limit:
        raise WalletError(f"{what} is {len(text)} characters; at most {limit}")
    return text


def _push(client: Client, body: dict[str, Any], mode: str, as_json: bool) -> int:
    result: PushResult = client.push_transaction(body, mode)
    if as_json:  # for scripts: block_num is null until the transaction is in a block
        trace = {"trace": result.trace} if result.trace is not None else {}
        print(
            json.dumps(
                {
                    "transaction_id": result.transaction_id,
                    "block_num": result.block_num,
                    "status": result.status,
                }
                | trace
            )
        )
        return 0
    line = f"transaction {result.transaction_id} {result.status}"
    if result.block_num is not None:
        line += f" in block {result.block_num}"
    print(line)
    for trace_line in contracts.trace_lines(dict(result.trace or {})):
        print(trace_line)
    return 0


def _send(args: argparse.Namespace, actions: list[Action]) -> int:
    client = Client(args.url)
    body = body_of(_sign(args, client, actions))
    if args.dont_broadcast:
        print(json.dumps(body))
        return 0
    return _push(client, body, args.mode, args.json)


def _amount(args: argparse.Namespace, text: str) -> int:
    info = Client(args.url).get_info()
    return parse_amount(text, info.token_precision, info.token_symbol)


# --- commands -------------------------------------------------------------------------------


def cmd_create(args: argparse.Namespace) -> int:
    store = _open_or_create(args)
    key = PrivateKey.generate()
    pub = store.add(key, args.label or "")
    store.save()
    print(pub)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    store = _open_or_create(args)
    imported: list[tuple[str, str]] = []
    if args.from_dev_keys:
        try:
            dev = json.loads(Path(args.from_dev_keys).read_text())
        except (OSError, ValueError) as err:
            raise WalletError(f"cannot read {args.from_dev_keys}: {err}") from err
        for label, key in _dev_keys(args.from_dev_keys, dev):
            imported.append((store.add(key, label), label))
    else:
        text = args.key or getpass.getpass("private key (PVT_K1_...): ")
        imported.append(
            (store.add(PrivateKey.from_text(text.strip()), args.label or ""), args.label or "")
        )
    store.save()
    for pub, label in imported:
        print(f"imported {pub} {label}".rstrip())
    return 0


def _dev_keys(path: str, doc: Any) -> list[tuple[str, PrivateKey]]:
    """The (label, key) pairs of a keys.json written by ``bor-node devnet``."""
    shape = f'{path} is not a keys.json of bor-node devnet: expected {{"label": "PVT_K1_..."}}'
    if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
        raise WalletError(shape)
    try:
        return [(label, PrivateKey.from_text(text)) for label, text in doc.items()]
    except ChainError as err:
        raise WalletError(f"{path}: {err}") from err


def cmd_list(args: argparse.Namespace) -> int:
    store = _open(args)
    for pub, (label, _) in sorted(store.keys.items(), key=lambda kv: kv[1][0]):
        print(f"{pub} {label}".rstrip())
    return 0


def cmd_transfer(args: argparse.Namespace) -> int:
    memo = check_text("memo", args.memo, MAX_MEMO)
    amount = _amount(args, args.amount)
    return _send(
        args, [Transfer(account_name(args.sender), account_name(args.recipient), amount, memo)]
    )


def cmd_stake(args: argparse.Namespace) -> int:
    return _send(args, [Stake(account_name(args.account), _amount(args, args.amount))])


def cmd_unstake(args: argparse.Namespace) -> int:
    return _send(args, [Unstake(account_name(args.account), _amount(args, args.amount))])


def cmd_vote(args: argparse.Namespace) -> int:
    producers = tuple(sorted({account_name(p) for p in args.producers}))
    return _send(args, [VoteProducer(account_name(args.voter), producers)])


def cmd_regproducer(args: argparse.Namespace) -> int:
    name = account_name(args.account)
    url = check_text("producer url", args.url_field, MAX_URL)
    key_text = args.key or Client(args.url).get_account(name).key
    return _send(args, [RegProducer(name, public_key_from_text(key_text), url)])


def cmd_approveproducer(args: argparse.Namespace) -> int:
    return _send(args, [ApproveProducer(account_name(args.governor), account_name(args.producer))])


def cmd_allowcode(args: argparse.Namespace) -> int:
    governor, account = account_name(args.governor), account_name(args.account)
    return _send(args, [AllowCode(governor, account, not args.revoke)])


def cmd_unregproducer(args: argparse.Namespace) -> int:
    return _send(args, [UnregProducer(account_name(args.account))])


def cmd_newaccount(args: argparse.Namespace) -> int:
    action = NewAccount(
        account_name(args.creator), account_name(args.name), public_key_from_text(args.key)
    )
    return _send(args, [action])


def cmd_updatekey(args: argparse.Namespace) -> int:
    return _send(args, [UpdateKey(account_name(args.account), public_key_from_text(args.key))])


def cmd_set(args: argparse.Namespace) -> int:
    return _send(args, [contracts.setcode_action(args.account, args.file, args.abi)])


def cmd_push(args: argparse.Namespace) -> int:
    if args.file == "action":  # push action CONTRACT ACTION 'JSON' --auth alice[,bob]
        if len(args.rest) != 3 or not args.auth:
            raise WalletError("usage: push action CONTRACT ACTION 'JSON' --auth ACCOUNT[,...]")
        contract, action, data = args.rest
        call = contracts.call_action(Client(args.url), contract, action, data, args.auth, args.hex)
        return _send(args, [call])
    if args.rest:
        raise WalletError("push takes one file (or: push action CONTRACT ACTION 'JSON')")
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    except OSError as err:
        raise WalletError(f"cannot read signed transactions from {args.file}: {err}") from err
    signed = batch.signed_transactions(args.file, text)  # one, or many: pushed in batches
    if isinstance(signed, dict):
        return _push(Client(args.url), signed, args.mode, args.json)
    return batch.push_all(Client(args.url), signed, args.mode, args.json)


def cmd_get(args: argparse.Namespace) -> int:
    client = Client(args.url)
    chain = "/v1/chain/"
    if args.what == "info":
        result = client.request(chain + "get_info")
    elif args.what == "block":
        key: Any = int(args.arg) if args.arg and args.arg.isdigit() else args.arg
        result = client.request(chain + "get_block", {"block_num_or_id": key})
    elif args.what == "account":
        result = client.request(chain + "get_account", {"account_name": args.arg or ""})
        info = client.get_info()
        fmt = (info.token_precision, info.token_symbol)
        result["balance_text"] = format_amount(result["balance"], *fmt)
        result["staked_text"] = format_amount(result["staked"], *fmt)
    elif args.what == "producers":
        result = client.request(chain + "get_producers")
    elif args.what in ("code", "abi"):
        result = client.request(f"{chain}get_{args.what}", {"account": args.arg or ""})
    elif args.what == "table":
        body = contracts.table_request(args)
        result = client.request(chain + "get_table_rows", body)
    else:
        result = client.request(chain + "get_transaction", {"id": args.arg or ""})
    print(json.dumps(result, indent=2))
    return 0


def cmd_call(args: argparse.Namespace) -> int:
    body = contracts.call_body(args.contract, args.action, args.data, args.auth, args.hex)
    print(json.dumps(Client(args.url).request("/v1/chain/call", body), indent=2))
    return 0


def _common_options(with_defaults: bool) -> argparse.ArgumentParser:
    """Options accepted before or after the command. Only the top level holds defaults, or
    a subcommand's default would overwrite a value given before the command name."""

    def default(value: Any) -> Any:
        return value if with_defaults else argparse.SUPPRESS

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url", default=default(os.environ.get("BOR_URL", DEFAULT_URL)), help="node RPC"
    )
    common.add_argument("--wallet", default=default(str(default_wallet_path())), help="wallet")
    common.add_argument(
        "--password-file", default=default(None), help="read the wallet password from this file"
    )
    common.add_argument(
        "--mode",
        choices=("async", "sync", "commit"),
        default=default("commit"),
        help="return at once, after validation, or after inclusion (default)",
    )
    common.add_argument(
        "-d",
        "--dont-broadcast",
        action="store_true",
        default=default(False),
        help="print the signed transaction",
    )
    return common


def _sending_options() -> argparse.ArgumentParser:
    """Options of the commands that push a transaction."""
    sending = argparse.ArgumentParser(add_help=False)
    sending.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object {transaction_id, block_num, status} instead of a sentence",
    )
    return sending


def _version() -> str:
    try:
        return importlib.metadata.version("bor")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown (not installed)"


_Argument = tuple[str, dict[str, Any]]
_AMOUNT: _Argument = ("amount", {"help": "10, 10.5 or '10.5000 BOR'"})


@dataclass(frozen=True, slots=True)
class _Commands:
    """Where subcommands are added: each takes the common options, and those that push a
    transaction the sending ones too."""

    sub: argparse._SubParsersAction[argparse.ArgumentParser]
    common: argparse.ArgumentParser
    sending: argparse.ArgumentParser

    def add(
        self,
        name: str,
        func: Callable[[argparse.Namespace], int],
        help: str,
        *arguments: _Argument,
        sends: bool = False,
    ) -> None:
        parents = [self.common, self.sending] if sends else [self.common]
        p = self.sub.add_parser(name, help=help, parents=parents)
        for flag, kwargs in arguments:
            p.add_argument(flag, **kwargs)
        p.set_defaults(func=func)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bor-wallet", description="BoR wallet", parents=[_common_options(with_defaults=True)]
    )
    parser.add_argument("--version", action="version", version=f"bor-wallet {_version()}")
    commands = _Commands(
        sub=parser.add_subparsers(dest="command", required=True),
        common=_common_options(with_defaults=False),
        sending=_sending_options(),
    )
    _add_key_commands(commands)
    _add_token_commands(commands)
    _add_producer_commands(commands)
    _add_account_commands(commands)
    _add_contract_commands(commands)
    _add_query_commands(commands)
    return parser


def _add_key_commands(commands: _Commands) -> None:
    """The wallet's own keys: nothing here talks to the node."""
    add = commands.add
    add("create", cmd_create, "create a key (and the wallet if needed)", ("--label", {}))
    add(
        "import",
        cmd_import,
        "import a private key",
        ("--key", {"help": "PVT_K1_... (prompted if absent)"}),
        ("--label", {}),
        ("--from-dev-keys", {"help": "keys.json written by bor-node devnet"}),
    )
    add("list", cmd_list, "list the public keys in the wallet")


def _add_token_commands(commands: _Commands) -> None:
    add = commands.add
    add(
        "transfer",
        cmd_transfer,
        "send tokens",
        ("sender", {}),
        ("recipient", {}),
        _AMOUNT,
        ("--memo", {"default": "", "help": f"at most {MAX_MEMO} characters"}),
        sends=True,
    )
    add("stake", cmd_stake, "stake tokens", ("account", {}), _AMOUNT, sends=True)
    add("unstake", cmd_unstake, "start unbonding stake", ("account", {}), _AMOUNT, sends=True)
    add(
        "vote",
        cmd_vote,
        "vote for producers",
        ("voter", {}),
        ("producers", {"nargs": "*"}),
        sends=True,
    )


def _add_producer_commands(commands: _Commands) -> None:
    """Candidacy, and the governors' approvals of producers and of contract code."""
    add = commands.add
    add(
        "regproducer",
        cmd_regproducer,
        "register as producer candidate",
        ("account", {}),
        ("--key", {"help": "block signing key (default: the account key)"}),
        ("--producer-url", {"dest": "url_field", "default": ""}),
        sends=True,
    )
    add(
        "approveproducer",
        cmd_approveproducer,
        "approve a candidate (governance)",
        ("governor", {}),
        ("producer", {}),
        sends=True,
    )
    add(
        "allowcode",
        cmd_allowcode,
        "let an account deploy contracts, on a chain whose genesis asks for approval (governance)",
        ("governor", {}),
        ("account", {}),
        ("--revoke", {"action": "store_true", "help": "stop allowing it"}),
        sends=True,
    )
    add("unregproducer", cmd_unregproducer, "withdraw candidacy", ("account", {}), sends=True)


def _add_account_commands(commands: _Commands) -> None:
    add = commands.add
    add(
        "newaccount",
        cmd_newaccount,
        "create an account (governance)",
        ("creator", {}),
        ("name", {}),
        ("key", {}),
        sends=True,
    )
    add(
        "updatekey",
        cmd_updatekey,
        "rotate an account key",
        ("account", {}),
        ("key", {}),
        sends=True,
    )


def _add_contract_commands(commands: _Commands) -> None:
    add = commands.add
    add(
        "push",
        cmd_push,
        "push signed transactions (JSON file or -: one, an array, or one per line), or:"
        " push action CONTRACT ACTION 'JSON' --auth alice[,bob]",
        ("file", {}),
        ("rest", {"nargs": "*", "help": "push action: CONTRACT ACTION 'JSON'"}),
        ("--auth", {"help": "push action: the authorizing accounts, comma-separated"}),
        ("--hex", {"action": "store_true", "help": "the action's data is hex, not JSON"}),
        sends=True,
    )
    add(
        "set",
        cmd_set,
        "deploy a contract: set code ACCOUNT FILE.wasm [--abi FILE.json]",
        ("what", {"choices": ("code",)}),
        ("account", {}),
        ("file", {}),
        ("--abi", {"help": "the contract's ABI (JSON)"}),
        sends=True,
    )
    add(
        "call",
        cmd_call,
        "run a contract action read-only on the node (nothing is signed or stored)",
        ("contract", {}),
        ("action", {}),
        ("data", {"nargs": "?", "default": "{}", "help": "JSON arguments (or hex with --hex)"}),
        ("--auth", {"help": "accounts the call runs as authorized by, comma-separated"}),
        ("--hex", {"action": "store_true", "help": "the data is hex, not JSON"}),
    )


def _add_query_commands(commands: _Commands) -> None:
    commands.add(
        "get",
        cmd_get,
        "query the node",
        (
            "what",
            {"choices": ("info", "block", "account", "tx", "producers", "code", "abi", "table")},
        ),
        ("arg", {"nargs": "?"}),
        ("extra", {"nargs": "*", "help": "get table CONTRACT SCOPE TABLE"}),
        ("--lower", {"help": "get table: first key (a number or a name; next_key pages on)"}),
        ("--upper", {"help": "get table: last key (inclusive)"}),
        ("--limit", {"type": int, "default": 10, "help": "get table: rows at most (1000)"}),
        ("--index", {"action": "store_true", "help": "get table: by the secondary index"}),
        ("--hex", {"action": "store_true", "help": "get table: rows as hex, not decoded"}),
        ("--reverse", {"action": "store_true", "help": "get table: from --upper down"}),
        ("--payer", {"action": "store_true", "help": "get table: each row with its payer"}),
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # here, not at exit: a reader that left (| head) is met in the try
        return code
    except BrokenPipeError:
        return stdout_closed()
    except (WalletError, ClientError, ChainError) as err:
        print(f"bor-wallet: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def stdout_closed() -> int:
    """The exit status after the reader of stdout left (``| head``): stop quietly, as Unix
    tools do. stdout is pointed at /dev/null so that Python's flush at exit does not fail
    again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141  # 128 + SIGPIPE: what a shell reports for a tool the broken pipe stopped


if __name__ == "__main__":
    sys.exit(main())
