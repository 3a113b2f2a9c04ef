"""The RPC's route table: each path with its handler, the fields of its body, the schema of
its answer, the error statuses it may answer and the listener that serves it. The HTTP shell
serves, checks and documents (OpenAPI) every route from this one table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from chain.core.execution.transaction import MAX_SIGNATURES
from chain.core.primitives.params import ChainParams
from node.api.antelope import MAX_PRODUCER_ROWS
from node.api.batch import ANTELOPE_ITEM_FIELDS, BATCH_SCHEMA, BatchBody
from node.api.fields import AnyOf, Boolean, Choice, Field, Hex, Integer, ListOf, Signature, Text
from node.api.views import (
    ACCOUNT_SCHEMA,
    BLOCK_SCHEMA,
    FINALIZER_INFO_SCHEMA,
    HEALTH_SCHEMA,
    INFO_SCHEMA,
    PRODUCERS_SCHEMA,
    PUSH_SCHEMA,
    STRING,
    TX_STATUS_SCHEMA,
    json_object,
)

DEFAULT_COMMIT_TIMEOUT_MS = 30_000
MAX_COMMIT_TIMEOUT_MS = 600_000
# Block numbers are 32 bits on the chain (a block id starts with its number).
MAX_BLOCK_NUM = 2**32 - 1
# Transactions in one push_transactions: 1,000 transfers are ~400 KB of JSON, within the
# default 1 MiB body, and about 80 ms of signature recovery for the executor.
MAX_BATCH = 1000

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
# A transaction's signatures, each BoR's hex or Antelope's SIG_K1_ text (read to BoR's bytes).
SIGNATURES = ListOf(Signature(), 1, MAX_SIGNATURES)


class Body(Protocol):
    """A route's whole body, for a route whose body is not one object of fields (an array,
    or one of several shapes): checks the parsed JSON and describes itself as JSON Schema."""

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of a valid body."""
        ...

    def parse(self, value: Any) -> dict[str, Any]:
        """The handler's arguments from the JSON body (None: no body); raises RequestError
        naming what is wrong."""
        ...


@dataclass(frozen=True, slots=True)
class Route:
    """One RPC endpoint: the handler gets the body's fields checked and converted; the rest
    is what the OpenAPI document says of it."""

    handler: Handler
    summary: str
    result: dict[str, Any]  # JSON Schema of the 200 answer
    fields: tuple[Field, ...] = ()
    statuses: tuple[int, ...] = ()  # error statuses of this route besides every route's
    admin: bool = False  # changes the node: served on the admin listener only
    body: Body | None = None  # the body's own check, in place of ``fields``


class Handlers(Protocol):
    """What the route table serves: ``node.api.rpc.Api``'s handlers, named here so that the
    table need not import the dispatcher that builds it."""

    def paced(self, handler: Handler) -> Handler:
        """``handler`` behind the read pacer."""
        ...

    async def get_info(self, args: dict[str, Any]) -> Any: ...
    async def get_block(self, args: dict[str, Any]) -> Any: ...
    async def get_account(self, args: dict[str, Any]) -> Any: ...
    async def get_producers(self, args: dict[str, Any]) -> Any: ...
    async def get_transaction(self, args: dict[str, Any]) -> Any: ...
    async def push_transaction(self, args: dict[str, Any]) -> Any: ...
    async def push_transactions(self, args: dict[str, Any]) -> Any: ...
    async def get_finalizer_info(self, args: dict[str, Any]) -> Any: ...
    async def get_evidence(self, args: dict[str, Any]) -> Any: ...
    async def health(self, args: dict[str, Any]) -> Any: ...
    async def sync_status(self, args: dict[str, Any]) -> Any: ...
    async def snapshots(self, args: dict[str, Any]) -> Any: ...
    async def net_peers(self, args: dict[str, Any]) -> Any: ...
    async def create_snapshot(self, args: dict[str, Any]) -> Any: ...
    async def export_history(self, args: dict[str, Any]) -> Any: ...
    async def net_connect(self, args: dict[str, Any]) -> Any: ...
    async def net_disconnect(self, args: dict[str, Any]) -> Any: ...


def route_table(api: Handlers, params: ChainParams) -> dict[str, Route]:
    """Every route of ``api``; pushes are limited to the chain's ``max_tx_bytes``, plus
    ``max_code_bytes`` (a setcode transaction; the chain checks which a transaction is)."""
    max_tx_bytes = params.max_tx_bytes + params.max_code_bytes
    paced = api.paced

    block_key = AnyOf(
        (
            Integer(0, MAX_BLOCK_NUM),
            Text("[0-9]{1,10}", 10, "digits"),  # a number as text, as nodeos takes it
            Hex(32, 32),
        ),
        "a block number or a 64-digit hex block id",
    )
    name = Text("[a-z1-5.]{0,11}[a-z1-5]", 12, "an account name (a-z, 1-5, '.')")
    # host:port, the host a name, an IPv4 address or a bracketed IPv6 address.
    address = Text(
        r"(?:[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]):"
        "(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}"
        "|[1-9][0-9]{0,3})",
        300,
        "host:port with a port from 1 to 65535",
    )
    push_fields = (
        Field("packed_trx", Hex(1, max_tx_bytes), "hex of the canonical transaction"),
        Field("signatures", SIGNATURES, "signatures: hex (BoR's) or SIG_K1_ text (Antelope's)"),
        Field(
            "mode",
            Choice(("async", "sync", "commit")),
            "async: return at once; sync: after validation; commit: after inclusion in a block",
            required=False,
            default="sync",
        ),
        Field(
            "timeout_ms",
            Integer(1, MAX_COMMIT_TIMEOUT_MS),
            "commit mode: how long to wait for inclusion (at most the node's "
            "http-max-response-time-ms)",
            required=False,
            default=DEFAULT_COMMIT_TIMEOUT_MS,
        ),
    )
    # A batch's transactions have push_transaction's own fields, and its mode and timeout.
    batch = BatchBody(push_fields[:2] + ANTELOPE_ITEM_FIELDS, push_fields[2:], MAX_BATCH)
    network_json = {"type": "object"}  # the peer layer's own JSON; its fields may change
    return {
        "/v1/chain/get_info": Route(
            paced(api.get_info), "Head, LIB and chain identity", INFO_SCHEMA
        ),
        "/v1/chain/get_block": Route(
            paced(api.get_block),
            "A block by number or id",
            BLOCK_SCHEMA,
            (Field("block_num_or_id", block_key, "number or 64-digit hex id"),),
            (404,),
        ),
        "/v1/chain/get_account": Route(
            paced(api.get_account),
            "Balance, stake, key and votes of an account",
            ACCOUNT_SCHEMA,
            (Field("account_name", name, "account name"),),
            (404,),
        ),
        "/v1/chain/get_producers": Route(
            paced(api.get_producers),
            "Producer candidates by votes (most first), in Antelope's form with BoR's fields"
            " beside, and the schedules",
            PRODUCERS_SCHEMA,
            (
                Field("json", Boolean(), "rows as JSON (else hex)", required=False, default=True),
                Field(
                    "lower_bound",
                    AnyOf((name, Text("", 0, "empty")), "a producer's name or empty"),
                    "the producer to start at (more of the last page)",
                    required=False,
                    default="",
                ),
                Field(
                    "limit",
                    Integer(1, MAX_PRODUCER_ROWS),
                    "rows at most",
                    required=False,
                    default=50,
                ),
            ),
        ),
        "/v1/chain/get_transaction": Route(
            paced(api.get_transaction),
            "A transaction and where it is",
            TX_STATUS_SCHEMA,
            (Field("id", Hex(32, 32), "64-digit hex id"),),
            (404,),
        ),
        "/v1/chain/push_transaction": Route(
            api.push_transaction,
            "Submit a signed transaction",
            PUSH_SCHEMA,
            push_fields,
            (401, 402, 403, 404, 409, 413, 422, 429),
        ),
        "/v1/chain/push_transactions": Route(
            api.push_transactions,
            f"Submit up to {MAX_BATCH} signed transactions: an answer for each, in order, as"
            " push_transaction's or {error: {code, name, what}} (one bad transaction does not"
            " sink the rest)",
            BATCH_SCHEMA,
            statuses=(413,),
            body=batch,
        ),
        "/v1/chain/get_finalizer_info": Route(
            paced(api.get_finalizer_info),
            "Finality by votes: the finalizer policy, each finalizer's last vote, this node's"
            " finalizers, double votes, and whether production waits for votes",
            FINALIZER_INFO_SCHEMA,
        ),
        "/v1/chain/get_evidence": Route(
            paced(api.get_evidence),
            "Blocks kept as evidence of double signing",
            json_object({"blocks": {"type": "array", "items": BLOCK_SCHEMA}}),
        ),
        # Not paced: a liveness probe must not fail because the node is busy writing.
        "/v1/node/health": Route(api.health, "Liveness and head age", HEALTH_SCHEMA),
        "/v1/node/sync": Route(
            paced(api.sync_status),
            "Sync stage, target, next expected block, sources, blocks/s and ETA",
            network_json,
            statuses=(404,),
        ),
        "/v1/node/snapshots": Route(
            paced(api.snapshots),
            "Snapshots this node serves to state sync: block number and id (a trusted block"
            " id for state-sync-trusted-block), size, chunks, manifest root",
            json_object({"snapshots": {"type": "array"}}),
            statuses=(404,),
        ),
        "/v1/net/peers": Route(
            paced(api.net_peers), "Connected peers", network_json, statuses=(404,)
        ),
        "/v1/producer/create_snapshot": Route(
            api.create_snapshot,
            "Write the state at the LIB to a snapshot file in the data dir",
            json_object(
                {
                    "head_block_id": STRING,
                    "head_block_num": {"type": "integer"},
                    "head_block_time": STRING,
                    "version": {"type": "integer"},
                    "snapshot_name": STRING,
                    "entries": {"type": "integer"},
                    "bytes": {"type": "integer"},
                    "content_hash": STRING,
                }
            ),
            statuses=(404, 409),
            admin=True,
        ),
        "/v1/node/export_history": Route(
            api.export_history,
            "Write the irreversible blocks this node holds to a block log in the data dir"
            " (exports/history.log, replaced by the next export), its genesis beside it",
            json_object(
                {
                    "file": STRING,
                    "genesis": STRING,
                    "first_block_num": {"type": "integer"},
                    "last_block_num": {"type": "integer"},
                    "snapshot_block_num": {"type": ["integer", "null"]},
                    "blocks": STRING,
                }
            ),
            statuses=(404, 409),
            admin=True,
        ),
        "/v1/net/connect": Route(
            api.net_connect,
            "Dial a peer (and keep redialling it)",
            json_object({"address": STRING, "status": STRING}),
            (Field("address", address, "host:port"),),
            (404,),
            admin=True,
        ),
        "/v1/net/disconnect": Route(
            api.net_disconnect,
            "Send a peer away",
            json_object({"peer": STRING, "status": STRING}),
            (Field("peer", Text(".{1,256}", 256, "a peer id"), "peer id from /v1/net/peers"),),
            (404,),
            admin=True,
        ),
    }
