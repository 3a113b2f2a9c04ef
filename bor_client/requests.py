"""Every public route of the node's RPC as a request: its path, its body, and how its answer
becomes a result. The sync and the async client send the same requests (one method each per
route, a line long), so the two cannot differ in what they ask or how they read the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from bor_client import results as r
from bor_client.errors import MalformedResponse, RpcError
from bor_client.model import convert, from_json
from bor_client.transport import error_from_json

T = TypeVar("T")
CHAIN = "/v1/chain/"
# Antelope's and BoR's limit on one push_transactions batch (contract A's MAX_BATCH).
MAX_BATCH = 1000


@dataclass(frozen=True, slots=True)
class Request(Generic[T]):
    """One call of a route: POST ``body`` to ``path``; ``parse`` makes the answer's result."""

    path: str
    body: Mapping[str, Any] | Sequence[Any] | None
    parse: Callable[[Any], T]


def _as(cls: type[T]) -> Callable[[Any], T]:
    return lambda value: from_json(cls, value)


def _hint(hint: Any) -> Callable[[Any], Any]:
    return lambda value: convert(hint, value, "answer")


def _some(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without its unset (None) members: the node's defaults apply to those."""
    return {k: v for k, v in body.items() if v is not None}


def get_info() -> Request[r.Info]:
    return Request(CHAIN + "get_info", None, _as(r.Info))


def get_block(block_num_or_id: int | str) -> Request[r.Block]:
    return Request(CHAIN + "get_block", {"block_num_or_id": block_num_or_id}, _as(r.Block))


def get_account(name: str) -> Request[r.Account]:
    return Request(CHAIN + "get_account", {"account_name": name}, _as(r.Account))


def get_producers(limit: int | None = None, lower_bound: str | None = None) -> Request[r.Producers]:
    """A page of candidates by votes; the answer's ``more`` is the next page's lower_bound."""
    body = _some({"limit": limit, "lower_bound": lower_bound})
    return Request(CHAIN + "get_producers", body, _as(r.Producers))


def get_transaction(tx_id: str) -> Request[r.TxStatus]:
    return Request(CHAIN + "get_transaction", {"id": tx_id}, _as(r.TxStatus))


def push_body(packed_trx: str, signatures: Sequence[str]) -> dict[str, Any]:
    return {"packed_trx": packed_trx, "signatures": list(signatures)}


def push_transaction(
    body: Mapping[str, Any], mode: str = "sync", timeout_ms: int | None = None
) -> Request[r.PushResult]:
    """``body``: ``push_body``'s ``{packed_trx, signatures}`` (``Signed.body``)."""
    full = dict(body) | _some({"mode": mode, "timeout_ms": timeout_ms})
    return Request(CHAIN + "push_transaction", full, _as(r.PushResult))


BatchResults = tuple[r.PushResult | RpcError, ...]


def push_transactions(
    bodies: Sequence[Mapping[str, Any]], mode: str = "sync", timeout_ms: int | None = None
) -> Request[BatchResults]:
    """One batch (at most ``MAX_BATCH``): each answer a ``PushResult`` or the error that
    transaction got, in order; the node's other transactions go on regardless."""
    if not 1 <= len(bodies) <= MAX_BATCH:
        raise ValueError(f"a batch holds 1 to {MAX_BATCH} transactions, not {len(bodies)}")
    body = _some({"transactions": [dict(b) for b in bodies], "mode": mode})
    body |= _some({"timeout_ms": timeout_ms})
    return Request(CHAIN + "push_transactions", body, lambda v: _batch(v, len(bodies)))


def _batch(value: Any, count: int) -> BatchResults:
    if not isinstance(value, list) or len(value) != count:
        raise MalformedResponse(200, f"a batch of {count} got no list of {count} answers")
    out: list[r.PushResult | RpcError] = []
    for i, item in enumerate(value):
        error = error_from_json(item)
        out.append(error if error is not None else from_json(r.PushResult, item, f"[{i}]"))
    return tuple(out)


def get_finalizer_info() -> Request[r.FinalizerInfo]:
    return Request(CHAIN + "get_finalizer_info", None, _as(r.FinalizerInfo))


def get_evidence() -> Request[r.Evidence]:
    return Request(CHAIN + "get_evidence", None, _as(r.Evidence))


def health() -> Request[r.Health]:
    return Request("/v1/node/health", None, _as(r.Health))


def sync() -> Request[r.Json]:
    return Request("/v1/node/sync", None, _hint(r.Json))


def snapshots() -> Request[r.Snapshots]:
    return Request("/v1/node/snapshots", None, _as(r.Snapshots))


def peers() -> Request[r.Json]:
    return Request("/v1/net/peers", None, _hint(r.Json))


def get_code(account: str) -> Request[r.Code]:
    return Request(CHAIN + "get_code", {"account_name": account}, _as(r.Code))


def get_abi(account: str) -> Request[r.AbiResult]:
    return Request(CHAIN + "get_abi", {"account_name": account}, _as(r.AbiResult))


@dataclass(frozen=True, slots=True)
class RowsQuery:
    """A get_table_rows request (Antelope's fields); None leaves a field to the node."""

    code: str
    table: str
    scope: str | int
    lower_bound: str | int | None = None
    upper_bound: str | int | None = None
    limit: int | None = None
    secondary: bool = False  # by the table's secondary index rather than its primary key
    json: bool = True
    reverse: bool | None = None
    show_payer: bool | None = None

    def body(self) -> dict[str, Any]:
        body = {"code": self.code, "scope": self.scope, "table": self.table, "json": self.json}
        return body | _some(
            {
                "lower_bound": self.lower_bound,
                "upper_bound": self.upper_bound,
                "limit": self.limit,
                "index_position": "secondary" if self.secondary else None,
                "reverse": self.reverse,
                "show_payer": self.show_payer,
            }
        )


def get_table_rows(query: RowsQuery) -> Request[r.TableRows]:
    return Request(CHAIN + "get_table_rows", query.body(), _as(r.TableRows))


def get_currency_balance(
    code: str, account: str, symbol: str | None = None
) -> Request[tuple[str, ...]]:
    body = _some({"code": code, "account": account, "symbol": symbol})
    return Request(CHAIN + "get_currency_balance", body, _hint(tuple[str, ...]))


def get_currency_stats(code: str, symbol: str) -> Request[dict[str, r.CurrencyStats]]:
    body = {"code": code, "symbol": symbol}
    return Request(CHAIN + "get_currency_stats", body, _hint(dict[str, r.CurrencyStats]))


def call(
    contract: str,
    action: str,
    data: Mapping[str, Any] | str = "",
    authorization: Sequence[str] = (),
) -> Request[r.CallResult]:
    """A read-only run: ``data`` as JSON arguments (the node encodes them by the ABI) or hex."""
    body: dict[str, Any] = {"contract": contract, "action": action, "data": data}
    if authorization:
        body["authorization"] = list(authorization)
    return Request(CHAIN + "call", body, _as(r.CallResult))
