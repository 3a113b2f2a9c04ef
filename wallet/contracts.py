"""The wallet's contract commands: deploy code, push and call actions, read tables and code.

Action arguments are written as JSON and encoded with the contract's ABI, fetched from the
node (``get_abi``) and checked here, so a mistake is named (``transfer.quantity: ...``)
before the wallet is unlocked. The commands that sign live in ``wallet.cli``; this module
only builds actions and request bodies and prints answers.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Protocol

from bor_client.results import AbiResult
from chain.abi import Abi, parse_abi
from chain.core.execution.actions import Call, SetCode
from chain.core.primitives.types import AccountName, account_name
from wallet.errors import WalletError

MAX_AUTHORIZERS = 16


class Rpc(Protocol):
    """What these commands need of ``bor_client.Client``."""

    def get_abi(self, account: str) -> AbiResult: ...


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise WalletError(f"cannot read {what} {path}: {err.strerror}") from err


def setcode_action(account: str, wasm_path: str, abi_path: str | None) -> SetCode:
    """The ``setcode`` action deploying ``wasm_path`` (and its ABI, checked here)."""
    code = _read(wasm_path, "the module")
    if not code.startswith(b"\0asm"):
        raise WalletError(f"{wasm_path} is not a WebAssembly module (no \\0asm header)")
    abi = ""
    if abi_path is not None:
        try:
            abi = _read(abi_path, "the ABI").decode("utf-8")
        except UnicodeDecodeError as err:
            raise WalletError(f"{abi_path} is not UTF-8 text") from err
        parse_abi(abi)  # an EncodingError names what is wrong in it
    return SetCode(account_name(account), code, abi)


def authorizers(text: str) -> tuple[AccountName, ...]:
    """``alice`` or ``alice,bob``: the accounts that authorize (and sign) an action."""
    names = tuple(account_name(n.strip()) for n in text.split(",") if n.strip())
    if not 1 <= len(names) <= MAX_AUTHORIZERS or len(set(names)) != len(names):
        raise WalletError(f"--auth: 1 to {MAX_AUTHORIZERS} different accounts, comma-separated")
    return names


def fetch_abi(client: Rpc, contract: str) -> Abi:
    """The contract's ABI from the node (BoR's form, ``bor_abi``; ``abi`` is Antelope's);
    WalletError if it has none."""
    abi = client.get_abi(contract).bor_abi
    if abi is None:
        raise WalletError(f"{contract} has no ABI: give the data as hex with --hex")
    return parse_abi(json.dumps(abi))


def action_data(client: Rpc, contract: str, action: str, data: str, as_hex: bool) -> bytes:
    """``data`` in the action's binary form: hex as it is, JSON encoded by the ABI."""
    if as_hex:
        try:
            return bytes.fromhex(data)
        except ValueError as err:
            raise WalletError(f"--hex: {data!r} is not hex") from err
    try:
        value = json.loads(data)
    except ValueError as err:
        raise WalletError(f"the action's data is not JSON: {err}") from err
    return fetch_abi(client, contract).encode_action(action, value)


def call_action(
    client: Rpc, contract: str, action: str, data: str, auth: str, as_hex: bool
) -> Call:
    name = account_name(contract)
    account_name(action)  # an action name follows the rules of an account name
    return Call(name, action, authorizers(auth), action_data(client, name, action, data, as_hex))


def call_body(contract: str, action: str, data: str, auth: str | None, as_hex: bool) -> Any:
    """The /v1/chain/call body: the node encodes JSON data with the ABI itself."""
    body: dict[str, Any] = {"contract": contract, "action": action}
    if as_hex:
        body["data"] = data
    else:
        try:
            body["data"] = json.loads(data)
        except ValueError as err:
            raise WalletError(f"the action's data is not JSON: {err}") from err
    if auth:
        body["authorization"] = list(authorizers(auth))
    return body


def table_body(
    contract: str,
    scope: str,
    table: str,
    lower: str | None,
    upper: str | None,
    limit: int,
    secondary: bool,
    as_hex: bool,
    *,
    reverse: bool = False,
    show_payer: bool = False,
) -> dict[str, Any]:
    """A get_table_rows body (Antelope's request): rows come back as the rows themselves
    (hex with ``as_hex``), each ``{data, payer}`` with ``show_payer``; ``next_key`` is the
    next page's lower bound (its upper bound with ``reverse``)."""
    body: dict[str, Any] = {
        "code": contract,
        "scope": scope,
        "table": table,
        "limit": limit,
        "json": not as_hex,
        "index_position": "secondary" if secondary else "primary",
    }
    if reverse:
        body["reverse"] = True
    if show_payer:
        body["show_payer"] = True
    if lower is not None:
        body["lower_bound"] = lower
    if upper is not None:
        body["upper_bound"] = upper
    return body


def table_request(args: argparse.Namespace) -> dict[str, Any]:
    """The get_table_rows body of ``get table CONTRACT SCOPE TABLE`` and its options."""
    if args.arg is None or len(args.extra) != 2:
        raise WalletError("usage: get table CONTRACT SCOPE TABLE [--lower --upper --limit]")
    scope, table = args.extra
    return table_body(
        args.arg, scope, table, args.lower, args.upper, args.limit, args.index, args.hex,
        reverse=args.reverse, show_payer=args.payer,
    )  # fmt: skip


def trace_lines(result: dict[str, Any]) -> list[str]:
    """What a pushed transaction's contract actions printed, emitted and returned."""
    lines = []
    for action in result.get("actions", ()):
        where = f"{action.get('contract')}::{action.get('action')}"
        if action.get("console"):
            lines.append(f"{where} console: {action['console']}")
        for event in action.get("events", ()):
            data = event.get("data", event.get("hex"))
            lines.append(f"{where} event {event.get('name')}: {json.dumps(data)}")
        if action.get("return_value_hex"):
            value = action.get("return_value")
            shown = action["return_value_hex"] if value is None else json.dumps(value)
            lines.append(f"{where} returned {shown}")
    if "fuel" in result:
        lines.append(f"fuel {result['fuel']}")
    return lines
