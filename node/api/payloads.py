"""One shape for every payload a client reads: native amounts as assets, contract data decoded.

The chain's core keeps a native amount as an integer of base units (what is packed, hashed and
signed); every RPC answer and stream frame that shows a native action's data shows it as an
asset string in the chain's token ("2.0000 BOR"), the way tables, get_currency_balance and
the wallet show amounts, so a client never has to know the precision to read one. This is
presentation at the API's edge: ``action_to_json`` and the transactions' canonical bytes are
untouched.

A contract's action arguments and events are decoded by its ABI through ``chain.abi`` (the
one decoder), for push traces and the stream alike, within a size bound: decoding takes
about 0.6 µs a byte of the densest ABI (measured), so a payload past ``MAX_DECODED_BYTES`` is
shown as hex only rather than held up.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from chain.abi import Abi
from chain.core.execution.actions import ACTION_TYPES, Action, action_to_json
from chain.core.execution.transaction import SignedTransaction
from chain.core.execution.transition import token_amount
from chain.core.primitives.errors import EncodingError
from chain.core.primitives.params import ChainParams

# The native actions' fields that hold an amount of the chain's token, in base units.
AMOUNT_FIELDS = frozenset(("amount",))
# The longest contract payload (an action's arguments, an event) decoded for a client: ~40 ms
# of the densest ABI. A transaction holds 8 KiB by default and an event 4 KiB, so only a
# chain that raised max_tx_bytes far, or an inline action, meets it.
MAX_DECODED_BYTES = 64 << 10


def native_action_json(action: Action, params: ChainParams) -> dict[str, Any]:
    """``action_to_json`` with its amounts as assets of the chain's token."""
    shown = action_to_json(action)
    _amounts_as_assets(shown["data"], params)
    return shown


def transaction_json(stx: SignedTransaction, params: ChainParams) -> dict[str, Any]:
    """A transaction as get_transaction, get_block and the stream show it."""
    shown = stx.to_json()
    for action in shown["actions"]:
        _amounts_as_assets(action["data"], params)
    return shown


def _amounts_as_assets(data: dict[str, Any], params: ChainParams) -> None:
    for name in AMOUNT_FIELDS:
        if name in data:
            data[name] = token_amount(data[name], params)


def action_data(abi: Abi | None, action: str, data: bytes) -> Any:
    """A contract action's arguments decoded by its contract's ABI; None when there is no
    ABI, it does not type the action, the data is past ``MAX_DECODED_BYTES`` or does not
    decode (the hex beside it is always there)."""
    if abi is None or action not in abi.actions or len(data) > MAX_DECODED_BYTES:
        return None
    try:
        return abi.decode_action(action, data)
    except (EncodingError, RecursionError):  # an ABI may nest structs past the stack
        return None


def event_data(abi: Abi | None, name: str, data: bytes) -> Any:
    """An event's data decoded by its ABI's struct of that name; None as for ``action_data``."""
    if abi is None or name not in abi.events or len(data) > MAX_DECODED_BYTES:
        return None
    try:
        return abi.decode_event(name, data)
    except (EncodingError, RecursionError):
        return None


# --- JSON Schemas of the native actions, for the OpenAPI and AsyncAPI documents -------------

NAME_SCHEMA = {"type": "string", "pattern": "^[a-z1-5.]{0,11}[a-z1-5]$"}
ASSET_SCHEMA = {
    "type": "string",
    "pattern": "^[0-9]+(\\.[0-9]+)? [A-Z]{1,7}$",
    "description": "an amount of the chain's token (get_info's token_symbol and"
    ' token_precision), e.g. "2.0000 BOR"',
}
_FIELD_SCHEMAS: dict[str, dict[str, Any]] = {
    "sender": NAME_SCHEMA,
    "recipient": NAME_SCHEMA,
    "creator": NAME_SCHEMA,
    "name": NAME_SCHEMA,
    "account": NAME_SCHEMA,
    "governor": NAME_SCHEMA,
    "producer": NAME_SCHEMA,
    "voter": NAME_SCHEMA,
    "contract": NAME_SCHEMA,
    "action_name": NAME_SCHEMA,
    "amount": ASSET_SCHEMA,
    "key": {"type": "string", "description": "a public key (PUB_K1_...)"},
    "memo": {"type": "string"},
    "url": {"type": "string"},
    "abi": {"type": "string", "description": "the ABI's JSON text (may be empty)"},
    "producers": {"type": "array", "items": NAME_SCHEMA},
    "authorization": {"type": "array", "items": NAME_SCHEMA},
    "code": {"type": "string", "pattern": "^[0-9a-f]*$", "description": "WebAssembly, hex"},
    "data": {"type": "string", "pattern": "^[0-9a-f]*$", "description": "the arguments, hex"},
    "allowed": {"type": "boolean"},
}


def native_data_schema(action_type: type[Action]) -> dict[str, Any]:
    """The JSON Schema of one native action's ``data`` (every field present)."""
    names = [f.name for f in fields(action_type)]
    return {
        "type": "object",
        "properties": {f: _FIELD_SCHEMAS[f] for f in names},
        "required": names,
        "additionalProperties": False,
    }


# A native action as transactions show it: {"action": name, "data": {...}}, one schema each.
NATIVE_ACTION_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"action": {"const": t.NAME}, "data": native_data_schema(t)},
            "required": ["action", "data"],
        }
        for t in ACTION_TYPES
    ]
}
