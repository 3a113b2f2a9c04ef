"""The AsyncAPI 3.0 document of ``/v1/chain/stream``, served at /v1/asyncapi.json.

OpenAPI describes requests and their answers; after a websocket's upgrade neither exists,
only messages both ways, which is what AsyncAPI describes (and what its tools generate
clients from). The OpenAPI document of the public listener points here.
"""

from __future__ import annotations

from typing import Any

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
            "cursor": nullable(_CURSOR)
            | {"description": "the last block processed; null: start at the head (the LIB)"},
        },
        "required": ["stream"],
        "additionalProperties": False,
    }
    streamed = {"cursor": _CURSOR, "irreversible": BOOLEAN}
    block = json_object(
        {
            "num": COUNT,
            "id": ID,
            "previous": ID,
            "producer": STRING,
            "slot": COUNT,
            "timestamp": TIME,
            "transaction_count": COUNT,
        }
    )
    action = json_object(
        {
            "tx_id": ID,
            "index": COUNT,
            "account": nullable(STRING) | {"description": "the contract; null for a native action"},
            "name": STRING | {"description": "the native action's or the contract action's"},
            "authorization": {"type": "array", "items": STRING},
            "data": {"type": "object", "description": "a native action's data"},
            "hex": STRING | {"description": "a contract action's data, hex"},
            "depth": COUNT | {"description": "a contract action: 0, or n for one sent inline"},
            "console": STRING,
            "events": {
                "type": "array",
                "items": json_object({"name": STRING, "hex": STRING}),
                "description": "a contract action's events, data in hex",
            },
        },
        optional=("data", "hex", "depth", "console", "events"),
    )
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
            json_object(
                streamed
                | {
                    "block": _BLOCK_REF,
                    "transactions": {"type": "array", "items": TRANSACTION_SCHEMA},
                }
            ),
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
