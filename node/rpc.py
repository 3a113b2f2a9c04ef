"""The RPC logic, apart from the HTTP shell: requests in, results or typed errors out.

``Api`` maps each path to a handler over the chain runner. ``error_response`` is the one
place where errors become HTTP status codes and JSON bodies.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from chain import errors as ce
from chain.encoding import pack
from chain.errors import ChainError, EncodingError
from chain.transaction import SignedTransaction, decode_signed_transaction
from chain.types import AccountName, BlockId, TxId, is_valid_name
from node.admission import Admitter
from node.metrics import NodeMetrics
from node.network import Network
from node.runner import ChainRunner, InclusionWatch
from node.views import account_json, block_json, producer_json, schedule_json, slot_iso

log = structlog.get_logger("rpc")

SERVER_VERSION = "bor-0.1.0"
DEFAULT_COMMIT_TIMEOUT_MS = 30_000


class RpcError(Exception):
    """A request the RPC refuses before it reaches the chain."""

    def __init__(self, status: int, name: str, what: str) -> None:
        super().__init__(what)
        self.status = status
        self.name = name
        self.what = what


_STATUS: dict[type[ChainError], int] = {
    ce.EncodingError: 400,
    ce.MalformedTransaction: 400,
    ce.OversizedTransaction: 413,
    ce.BadSignature: 401,
    ce.MissingAuthority: 401,
    ce.Unauthorized: 403,
    ce.ExpiredTransaction: 400,
    ce.TaposMismatch: 400,
    ce.DuplicateTransaction: 409,
    ce.UnknownAccount: 404,
    ce.InsufficientFunds: 402,
    ce.InvalidAction: 422,
    ce.MempoolFull: 429,
    ce.NotFound: 404,
    ce.InvalidKey: 400,
}


def error_response(err: Exception) -> tuple[int, dict[str, Any]]:
    """HTTP status and JSON body for any error a handler raised."""
    if isinstance(err, RpcError):
        status, name, what = err.status, err.name, err.what
    elif isinstance(err, ChainError):
        # The most specific registered class wins: walk the error's MRO.
        status = next((_STATUS[c] for c in type(err).__mro__ if c in _STATUS), 500)
        name, what = err.name, str(err)
    else:
        status, name, what = 500, "internal_error", "internal error"
    return status, {"code": status, "message": what, "error": {"name": name, "what": what}}


def _field(body: dict[str, Any], name: str) -> Any:
    if name not in body:
        raise RpcError(400, "missing_field", f"request needs field {name!r}")
    return body[name]


def _hex(body: dict[str, Any], name: str, size: int | None = None) -> bytes:
    value = _field(body, name)
    try:
        raw = bytes.fromhex(value)
    except (TypeError, ValueError) as err:
        raise RpcError(400, "bad_field", f"{name!r} must be a hex string") from err
    if size is not None and len(raw) != size:
        raise RpcError(400, "bad_field", f"{name!r} must be {size} bytes")
    return raw


Handler = Callable[[dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Route:
    handler: Handler
    summary: str
    params: dict[str, str]  # field -> description, for the OpenAPI document


class Api:
    def __init__(
        self,
        runner: ChainRunner,
        metrics: NodeMetrics,
        watch: InclusionWatch,
        admitter: Admitter,
        network: Network | None = None,
    ) -> None:
        self.runner = runner
        self.chain = runner.chain
        self.metrics = metrics
        self.watch = watch
        self.admitter = admitter
        self.network = network
        self.routes: dict[str, Route] = {
            "/v1/chain/get_info": Route(self.get_info, "Head, LIB and chain identity", {}),
            "/v1/chain/get_block": Route(
                self.get_block, "A block by number or id", {"block_num_or_id": "number or hex id"}
            ),
            "/v1/chain/get_account": Route(
                self.get_account,
                "Balance, stake, key and votes of an account",
                {"account_name": "account name"},
            ),
            "/v1/chain/get_producers": Route(
                self.get_producers, "Producer candidates, votes and schedules", {}
            ),
            "/v1/chain/get_transaction": Route(
                self.get_transaction, "A transaction and where it is", {"id": "hex id"}
            ),
            "/v1/chain/push_transaction": Route(
                self.push_transaction,
                "Submit a signed transaction",
                {
                    "packed_trx": "hex of the canonical transaction encoding",
                    "signatures": "list of hex signatures",
                    "mode": "async (return at once) | sync (after validation, default) | "
                    "commit (after inclusion in a block)",
                    "timeout_ms": "commit mode: how long to wait for inclusion (default 30000)",
                },
            ),
            "/v1/chain/get_evidence": Route(
                self.get_evidence, "Blocks kept as evidence of double signing", {}
            ),
            "/v1/node/health": Route(self.health, "Liveness and head age", {}),
            "/v1/node/sync": Route(
                self.sync_status,
                "Sync stage, target, next expected block, sources, blocks/s and ETA",
                {},
            ),
            "/v1/net/peers": Route(self.net_peers, "Connected peers", {}),
            "/v1/net/connect": Route(
                self.net_connect, "Dial a peer (and keep redialling it)", {"address": "host:port"}
            ),
            "/v1/net/disconnect": Route(
                self.net_disconnect, "Send a peer away", {"peer": "peer id from /v1/net/peers"}
            ),
        }

    # --- chain API -------------------------------------------------------------------------

    async def get_info(self, body: dict[str, Any]) -> dict[str, Any]:
        chain = self.chain
        head, lib_num = chain.head, chain.lib
        lib_block = await self.runner.call(chain.block_by_num, lib_num) if lib_num else None
        p = chain.params
        return {
            "server_version": SERVER_VERSION,
            "chain_id": chain.chain_id.hex(),
            "head_block_num": head.num,
            "head_block_id": head.id.hex(),
            "head_block_time": slot_iso(head.slot),
            "head_block_producer": head.producer,
            "last_irreversible_block_num": lib_num,
            "last_irreversible_block_id": (lib_block.id.hex() if lib_block else head.id.hex()),
            "last_irreversible_block_time": (
                slot_iso(lib_block.header.slot) if lib_block else slot_iso(head.slot)
            ),
            "schedule_version": head.active.version,
            "token_symbol": p.token_symbol,
            "token_precision": p.token_precision,
            "mempool_size": len(chain.mempool),
            "fork_db_size": chain.fork_db_size,
        } | self._network_summary()

    def _network_summary(self) -> dict[str, Any]:
        if self.network is None:
            return {}
        return self.network.summary()

    # --- node and net API -------------------------------------------------------------------

    def _require_network(self) -> Network:
        if self.network is None:
            raise RpcError(404, "not_found", "this node runs without a network")
        return self.network

    async def sync_status(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._require_network().sync_status()

    async def net_peers(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._require_network().status()

    async def net_connect(self, body: dict[str, Any]) -> dict[str, Any]:
        network = self._require_network()
        text = _field(body, "address")
        host, sep, port = str(text).rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise RpcError(400, "bad_field", "address must be host:port")
        started = network.connect((host.strip("[]"), int(port)))
        return {"address": text, "status": "dialling" if started else "already dialling"}

    async def net_disconnect(self, body: dict[str, Any]) -> dict[str, Any]:
        network = self._require_network()
        peer = _field(body, "peer")
        if not isinstance(peer, str) or not await network.disconnect(peer):
            raise RpcError(404, "not_found", f"no connected peer {peer!r}")
        return {"peer": peer, "status": "disconnected"}

    async def get_block(self, body: dict[str, Any]) -> dict[str, Any]:
        key = _field(body, "block_num_or_id")
        if (isinstance(key, int) and not isinstance(key, bool)) or (
            isinstance(key, str) and key.isdigit()
        ):
            block = await self.runner.call(self.chain.block_by_num, int(key))
        elif isinstance(key, str) and len(key) == 64:
            block = await self.runner.call(
                self.chain.block_by_id, BlockId(_hex(body, "block_num_or_id", 32))
            )
        else:
            raise RpcError(400, "bad_field", "block_num_or_id must be a number or a 64-hex id")
        return block_json(block, self.chain.lib)

    async def get_account(self, body: dict[str, Any]) -> dict[str, Any]:
        name = _field(body, "account_name")
        if not isinstance(name, str) or not is_valid_name(name):
            raise RpcError(400, "bad_field", f"{name!r} is not an account name")
        account = await self.runner.call(self.chain.account, AccountName(name))
        producers = await self.runner.call(self.chain.producers)
        producer = next((p for p in producers if p.name == name), None)
        return account_json(account, producer)

    async def get_producers(self, body: dict[str, Any]) -> dict[str, Any]:
        producers = await self.runner.call(self.chain.producers)
        head = self.chain.head
        active = set(head.active.names())
        rows = [producer_json(p) | {"in_schedule": p.name in active} for p in producers]
        return {
            "rows": rows,
            "total_producer_vote_weight": sum(p.total_votes for p in producers),
            "active": schedule_json(head.active),
            "pending": schedule_json(head.pending),
        }

    async def get_transaction(self, body: dict[str, Any]) -> dict[str, Any]:
        tx_id = TxId(_hex(body, "id", 32))
        try:
            stx, num = await self.runner.call(self.chain.transaction, tx_id)
        except ce.NotFound:
            if tx_id in self.chain.mempool:
                return {"id": tx_id.hex(), "status": "pending"}
            raise
        status = "irreversible" if num <= self.chain.lib else "executed"
        return stx.to_json() | {"block_num": num, "status": status}

    async def get_evidence(self, body: dict[str, Any]) -> dict[str, Any]:
        blocks = await self.runner.call(self.chain.evidence)
        return {"blocks": [block_json(b, self.chain.lib) for b in blocks]}

    async def health(self, body: dict[str, Any]) -> dict[str, Any]:
        head = self.chain.head
        age = time.time() - (head.slot * 0.5 + 946_684_800)
        return {"status": "ok", "head_block_num": head.num, "head_age_s": round(age, 3)}

    # --- transactions -----------------------------------------------------------------------

    async def push_transaction(self, body: dict[str, Any]) -> dict[str, Any]:
        stx = self._decode_push(body)
        mode = body.get("mode", "sync")
        if mode not in ("async", "sync", "commit"):
            raise RpcError(400, "bad_field", "mode must be async, sync or commit")
        timeout = body.get("timeout_ms", DEFAULT_COMMIT_TIMEOUT_MS)
        if type(timeout) is not int or not 0 < timeout <= 600_000:
            raise RpcError(400, "bad_field", "timeout_ms must be an integer in (0, 600000]")
        if mode == "async":
            self.admitter.admit_later(stx)
            return {"transaction_id": stx.id.hex(), "status": "submitted"}
        included = self.watch.watch(stx.id) if mode == "commit" else None
        try:
            await self.admitter.admit(stx)
            if included is None:
                return {"transaction_id": stx.id.hex(), "status": "accepted"}
            try:
                async with asyncio.timeout(timeout / 1000):
                    num = await asyncio.shield(included)
            except TimeoutError:
                return {"transaction_id": stx.id.hex(), "status": "pending"}
            return {"transaction_id": stx.id.hex(), "status": "included", "block_num": num}
        finally:
            if included is not None:
                self.watch.forget(stx.id, included)

    def _decode_push(self, body: dict[str, Any]) -> SignedTransaction:
        packed = _hex(body, "packed_trx")
        sigs = _field(body, "signatures")
        if not isinstance(sigs, list) or not sigs:
            raise RpcError(400, "bad_field", "signatures must be a non-empty list of hex strings")
        try:
            signatures = [bytes.fromhex(s) for s in sigs]
        except (TypeError, ValueError) as err:
            raise RpcError(400, "bad_field", "signatures must be hex strings") from err
        if len(packed) > self.chain.params.max_tx_bytes:
            raise ce.OversizedTransaction(
                f"transaction is {len(packed)} bytes, limit {self.chain.params.max_tx_bytes}"
            )
        try:
            return decode_signed_transaction(pack([packed, signatures]))
        except EncodingError as err:
            raise ce.MalformedTransaction(str(err)) from err
