"""Batch submission (/v1/chain/push_transactions): many signed transactions in one request,
each answered on its own, as push_transaction would have answered it.

The body is Antelope's array of push_transaction bodies (pushed in mode sync) or BoR's object
``{"transactions", "mode", "timeout_ms"}``. The HTTP shell checks only the batch's shape (1 to
``MAX_BATCH`` objects): a transaction's bad field is that transaction's 400 in the answer, so
one bad transaction does not sink the rest. Each transaction's fields, its decoding and its
signatures' recovery then run in one executor call for the whole batch (``prepare``), off the
event loop; the keys recovered there go with the transaction to admission, so the chain
thread, which every node's admission and production share, does not recover them again.
Admission then takes the batch's transactions in one chain-thread call
(``Admitter.admit_many``), each under the queue bounds, duplicate checks and verdict of a
single push: a batch is no way around them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chain.core.execution.transaction import (
    SignedTransaction,
    decode_signed_parts,
    signing_digest,
)
from chain.core.primitives.errors import BadSignature, EncodingError, MalformedTransaction
from chain.core.primitives.types import PublicKey
from chain.signatures.sigpool import recover_local
from node.api.fields import (
    AnyOf,
    BadField,
    Choice,
    Field,
    Integer,
    JsonObject,
    ListOf,
    RequestError,
    Text,
    object_schema,
    parse_fields,
)
from node.api.views import INTEGER, PUSH_SCHEMA, STRING, json_object


class NotABatch(RequestError):
    """A push_transactions body that is neither an array nor an object (HTTP 400)."""

    name = "malformed_json"


# Antelope's fields of a pushed transaction that BoR has no use for: checked to be the one
# value that means "nothing" (BoR takes no compressed transaction and no context-free data).
ANTELOPE_ITEM_FIELDS = (
    Field(
        "compression",
        AnyOf((Integer(0, 0), Choice(("none",))), '0 or "none"'),
        'Antelope\'s: 0 or "none" only (no compression)',
        required=False,
        default=0,
    ),
    Field(
        "packed_context_free_data",
        Text("", 0, "empty"),
        "Antelope's: empty only (no context-free data)",
        required=False,
        default="",
    ),
)


# The answer: one entry per transaction, in the batch's order.
ITEM_ERROR_SCHEMA = json_object(
    {"error": json_object({"code": INTEGER, "name": STRING, "what": STRING})}
)
BATCH_SCHEMA = {"type": "array", "items": {"anyOf": [PUSH_SCHEMA, ITEM_ERROR_SCHEMA]}}


@dataclass(frozen=True, slots=True)
class Batch:
    """The batch's transactions as sent (JSON objects), and the fields each must have."""

    items: list[dict[str, Any]]
    fields: tuple[Field, ...]


@dataclass(frozen=True, slots=True)
class BatchBody:
    """push_transactions' body: an array of transactions, or an object holding one and the
    ``options`` (mode, timeout_ms; their defaults hold for the array)."""

    item_fields: tuple[Field, ...]
    options: tuple[Field, ...]
    max_items: int

    @property
    def _list(self) -> ListOf:
        return ListOf(JsonObject(), 1, self.max_items)

    def _fields(self) -> tuple[Field, ...]:
        what = (
            f"1 to {self.max_items} objects, each a push_transaction body"
            " (packed_trx, signatures); each is checked on its own"
        )
        return (Field("transactions", self._list, what), *self.options)

    def schema(self) -> dict[str, Any]:
        array = self._list.schema() | {
            "description": (
                "Antelope's form: push_transaction bodies (packed_trx, signatures,"
                ' compression 0 or "none", packed_context_free_data empty), pushed in mode sync'
            )
        }
        return {"anyOf": [array, object_schema(self._fields())]}

    def parse(self, value: Any) -> dict[str, Any]:
        if isinstance(value, list):
            try:
                items = self._list.parse(value)
            except ValueError as err:
                raise BadField("transactions", str(err)) from None
            values = {f.name: f.default for f in self.options}
        elif isinstance(value, dict):
            values = parse_fields(self._fields(), value)
            items = values.pop("transactions")
        else:
            raise NotABatch(
                "body", "must be a JSON array of transactions or an object {transactions, ...}"
            )
        return values | {"batch": Batch(items, self.item_fields)}


@dataclass(frozen=True, slots=True)
class Prepared:
    """A transaction of the batch, decoded, with the keys its signatures recover to."""

    stx: SignedTransaction
    keys: frozenset[PublicKey]


def prepare(batch: Batch, chain_id: bytes) -> list[Prepared | Exception]:
    """For each transaction of ``batch``, in order: the transaction and its signer keys, or
    the error push_transaction would have raised for it (a RequestError for a bad field,
    MalformedTransaction, BadSignature). Pure CPU and thread-safe: run in an executor."""
    decoded: list[SignedTransaction | Exception] = []
    for item in batch.items:
        try:
            args = parse_fields(batch.fields, item)
            decoded.append(decode_signed_parts(args["packed_trx"], args["signatures"]))
        except (RequestError, BadSignature) as err:
            decoded.append(err)
        except EncodingError as err:
            decoded.append(MalformedTransaction(str(err)))
    signed = [d for d in decoded if isinstance(d, SignedTransaction)]
    pairs: list[tuple[bytes, bytes]] = []
    for stx in signed:
        digest = signing_digest(chain_id, stx.packed)
        pairs.extend((sig, digest) for sig in stx.signatures)
    recovered = iter(recover_local(pairs))
    out: list[Prepared | Exception] = []
    for entry in decoded:
        if not isinstance(entry, SignedTransaction):
            out.append(entry)
            continue
        keys = [next(recovered) for _ in entry.signatures]
        if None in keys:
            out.append(BadSignature(f"transaction {entry.id.hex()}: bad signature"))
        else:
            out.append(Prepared(entry, frozenset(k for k in keys if k is not None)))
    return out
