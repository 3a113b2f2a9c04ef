"""The AsyncAPI 3.0 document of ``/v1/chain/stream``, served at /v1/asyncapi.json.

OpenAPI describes requests and their answers; after a websocket's upgrade neither exists,
only messages both ways, which is what AsyncAPI describes (and what its tools generate
clients from). The OpenAPI document of the public listener points here.
"""

from __future__ import annotations

from typing import Any

from chain.core.execution.actions import ACTION_TYPES
from node.api.payloads import MAX_DECODED_BYTES, native_data_schema
from node.api.stream.abis import BLOCK_DECODED_BYTES
from node.api.stream.frames import ACTION_NAMES, MAX_FILTER_NAMES, STREAMS
from node.api.stream.hub import STREAM_PATH
from node.api.views import (
    BOOLEAN,
    COUNT,
    ID,
    STRING,
    TIME,
    TRANSACTION_SCHEMA,
    json_object,
    nullable,
)

ASYNCAPI_PATH = "/v1/asyncapi.json"

_NAME = {"type": "string", "pattern": "^[a-z1-5.]{0,11}[a-z1-5]$"}
_CURSOR = json_object({"num": COUNT, "id": ID})
_BLOCK_REF = json_object({"num": COUNT, "id": ID})
_HEX = {"type": "string", "pattern": "^[0-9a-f]*$"}
# How contract data is decoded, said once for the documents and the README to agree.
DECODED = (
    "decoded by the contract's ABI, the one it has when the block is first streamed (BoR"
    " keeps only each contract's current ABI, so replayed history is decoded by today's);"
    " null when the contract has no ABI, the ABI does not describe it, it does not decode,"
    f" it is over {MAX_DECODED_BYTES} bytes, or past the block's first"
    f" {BLOCK_DECODED_BYTES} bytes of contract data"
)


def _action_schema() -> dict[str, Any]:
    """An ``actions`` frame's action: a native one (its data shown as get_transaction shows
    it, amounts as assets), or a contract action a ``call`` ran."""
    common: dict[str, dict[str, Any]] = {
        "tx_id": ID,
        "index": COUNT | {"description": "the action's index in its transaction"},
        "authorization": {"type": "array", "items": STRING},
    }
    native = [
        json_object(
            common
            | {
                "account": {"type": "null", "description": "a native action: no contract"},
                "name": {"const": t.NAME},
                "data": native_data_schema(t),
            }
        )
        for t in ACTION_TYPES
    ]
    event = json_object(
        {"name": STRING, "hex": _HEX, "data": {"description": "the event's struct, " + DECODED}}
    )
    contract = json_object(
        common
        | {
            "account": STRING | {"description": "the contract"},
            "name": STRING | {"description": "the contract's action"},
            "receiver": STRING
            | {
                "description": "the account whose code ran it: the contract, or an account it"
                " notified (require_recipient), which ran it with no code of its own too"
            },
            "data": {"description": "the action's arguments, " + DECODED},
            "hex": _HEX | {"description": "the action's arguments as the contract got them"},
            "depth": COUNT
            | {"description": "0, or n for an action sent inline or notified at depth n"},
            "console": STRING,
            "events": {"type": "array", "items": event},
        }
    )
    return {"oneOf": [*native, contract]}


def _names(items: dict[str, Any], what: str) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": MAX_FILTER_NAMES, "description": what}


def _message(name: str, summary: str, payload: dict[str, Any]) -> dict[str, Any]:
    typed = payload | {
        "properties": {"type": {"const": name}} | payload["properties"],
        "required": ["type", *payload["required"]],
    }
    return {"name": name, "summary": summary, "contentType": "application/json", "payload": typed}


def _messages() -> dict[str, dict[str, Any]]:
    subscribe = {
        "type": "object",
        "properties": {
            "stream": {"enum": list(STREAMS)},
            "accounts": _names(
                _NAME,
                "transactions/actions: an action's actors or an account in its data (a"
                " transfer's recipient); ignored for blocks",
            ),
            "actions": _names(
                _NAME,
                "action names: native ones (" + ", ".join(sorted(ACTION_NAMES)) + ") and"
                " contract actions' names",
            ),
            "irreversible_only": BOOLEAN | {"default": False},
            "transactions": BOOLEAN
            | {
                "default": False,
                "description": "blocks only: each block frame's block carries its transactions"
                " (as the transactions stream shows them); refused on the other streams",
            },
            "cursor": nullable(_CURSOR)
            | {"description": "the last block processed; null: start at the head (the LIB)"},
        },
        "required": ["stream"],
        "additionalProperties": False,
    }
    streamed = {"cursor": _CURSOR, "irreversible": BOOLEAN}
    transactions = {"type": "array", "items": TRANSACTION_SCHEMA}
    block = json_object(
        {
            "num": COUNT,
            "id": ID,
            "previous": ID,
            "producer": STRING,
            "slot": COUNT,
            "timestamp": TIME,
            "transaction_count": COUNT,
            "transactions": transactions
            | {"description": 'only when subscribed with "transactions": true'},
        },
        optional=("transactions",),
    )
    action = _action_schema()
    return {
        "subscribe": _message(
            "subscribe", "The client's first and only message, within 10 s", subscribe
        ),
        "subscribed": _message(
            "subscribed",
            "The first answer: where the chain stands and the first block to follow",
            json_object({"head": _CURSOR, "lib": _CURSOR, "resume_from": COUNT}),
        ),
        "block": _message(
            "block",
            "A block joined the chain (stream blocks)",
            json_object(streamed | {"block": block}),
        ),
        "transactions": _message(
            "transactions",
            "The transactions of a block that match the filters (none: no message)",
            json_object(streamed | {"block": _BLOCK_REF, "transactions": transactions}),
        ),
        "actions": _message(
            "actions",
            "The actions of a block that match the filters (none: no message)",
            json_object(
                streamed | {"block": _BLOCK_REF, "actions": {"type": "array", "items": action}}
            ),
        ),
        "undo": _message(
            "undo",
            "A block left the chain (fork switch); cursor: its parent, where the client stands",
            json_object({"cursor": _CURSOR, "block": _BLOCK_REF}),
        ),
        "lib": _message(
            "lib", "The last irreversible block moved", json_object({"num": COUNT, "id": ID})
        ),
        "lagged": _message(
            "lagged",
            "The client fell behind (http-stream-buffer messages waited); closed with 1013:"
            " resume from the cursor",
            json_object({"cursor": _CURSOR, "reason": STRING}),
        ),
        "error": _message(
            "error",
            "The subscription is refused or ended; closed with 1008 (fix the request) or"
            " 1013 (a cap: try again later)",
            json_object({"reason": STRING}),
        ),
    }


def asyncapi_document(version: str) -> dict[str, Any]:
    messages = _messages()
    refs = {name: {"$ref": f"#/components/messages/{name}"} for name in messages}
    sent = [
        {"$ref": f"#/channels/stream/messages/{name}"} for name in messages if name != "subscribe"
    ]
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "BoR chain stream",
            "version": version,
            "description": (
                "Follow the chain: one subscription per connection, resumable from a cursor"
                " (replayed from the block store, then live, with no gap and no duplicate);"
                " undo messages for blocks a fork switch removed unless irreversible_only."
                ' Native amounts are assets of the chain\'s token ("2.0000 BOR"); contract'
                " action data and events carry their hex and a data field, " + DECODED + "."
            ),
        },
        "channels": {
            "stream": {
                "address": STREAM_PATH,
                "messages": refs,
                "bindings": {"ws": {"method": "GET"}},
            }
        },
        "operations": {
            "subscribe": {
                "action": "receive",
                "channel": {"$ref": "#/channels/stream"},
                "messages": [{"$ref": "#/channels/stream/messages/subscribe"}],
            },
            "follow": {
                "action": "send",
                "channel": {"$ref": "#/channels/stream"},
                "messages": sent,
            },
        },
        "components": {"messages": messages},
    }
