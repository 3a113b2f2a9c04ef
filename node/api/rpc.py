"""The RPC logic, apart from the HTTP shell: requests in, results or typed errors out.

``Api`` maps each path to a handler. It never touches ``Chain``: what the chain thread's
published view holds (head, LIB, parameters, sizes) is answered from the view; anything else
is a small query run on the chain thread (``ChainReads``: batched, bounded). The peer layer
is reached through ``NetworkApi``. ``error_response`` is the one place where errors become
HTTP status codes and JSON bodies.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import structlog

from chain.controller import Chain
from chain.core.consensus.dpos import HeaderState
from chain.core.execution import ram
from chain.core.execution.contracts import TxTrace
from chain.core.execution.state import Account, Producer, StateView
from chain.core.execution.transaction import SignedTransaction, decode_signed_parts
from chain.core.primitives import errors as ce
from chain.core.primitives.errors import ChainError, EncodingError
from chain.core.primitives.params import slot_start_s
from chain.core.primitives.types import AccountName, BlockId, BlockNum, PublicKey, TxId
from chain.events import ChainUpdate
from chain.storage.snapshot import VERSION as SNAPSHOT_VERSION
from chain.storage.store import BlockStore
from chain.vm.errors import RuntimeFault
from node.admission import Admitter
from node.api.antelope import info_fields, producers_page
from node.api.batch import Batch, Prepared, prepare
from node.api.blockcache import BlockJsonCache
from node.api.contracts.api import ContractApi, contract_routes
from node.api.fields import RequestError
from node.api.payloads import transaction_json
from node.api.reads import WRITES_WINDOW_S, ChainReads, ReadPacer, ReadsBusy
from node.api.routes import Handler, Route, route_table
from node.api.views import (
    account_json,
    block_json,
    dumps,
    finalizer_info_json,
    schedule_json,
    slot_iso,
    state_sync_json,
    sync_json,
    sync_summary_json,
)
from node.commands.history import (
    ExportPlan,
    NothingToExport,
    export_history,
    export_plan,
    genesis_beside,
)
from node.config.options import parse_endpoint
from node.errors import ConfigError
from node.metrics import NodeMetrics
from node.runner import ChainRunner, InclusionWatch
from node.snapshots.writer import SnapshotBusy, SnapshotWriter
from p2p.blocksync.manager import SyncStatus
from p2p.statesync.fetch import StateSyncStatus

log = structlog.get_logger("rpc")

SERVER_VERSION = "bor-0.1.0"
# get_producers answers kept for one head (each a different json/lower_bound/limit).
MAX_PRODUCER_ANSWERS = 16


class RpcError(Exception):
    """A request the RPC refuses before it reaches the chain."""

    def __init__(self, status: int, name: str, what: str) -> None:
        super().__init__(what)
        self.status = status
        self.name = name
        self.what = what


# 400 means the body does not match the route's schema; content that matches it but that the
# chain refuses gets its own code, 422 where no more specific one applies.
_STATUS: dict[type[ChainError], int] = {
    ce.EncodingError: 422,
    ce.MalformedTransaction: 422,
    ce.OversizedTransaction: 413,
    ce.BadSignature: 401,
    ce.MissingAuthority: 401,
    ce.Unauthorized: 403,
    ce.ExpiredTransaction: 422,
    ce.TaposMismatch: 422,
    ce.DuplicateTransaction: 409,
    ce.UnknownAccount: 404,
    ce.InsufficientFunds: 402,
    ce.InvalidAction: 422,
    ce.ContractError: 422,
    ce.ContractMissingAuthority: 401,  # a contract's require_auth: not ContractError's 422
    ce.ReadOnlyAction: 422,  # a read-only action pushed: run it with call instead
    ce.ResourceExceeded: 422,
    ce.MempoolFull: 429,
    ce.NotFound: 404,
    ce.InvalidKey: 422,
    ce.SnapshotError: 409,
}


def error_response(err: Exception) -> tuple[int, dict[str, Any]]:
    """HTTP status and JSON body for any error a handler raised."""
    if isinstance(err, RpcError):
        status, name, what = err.status, err.name, err.what
    elif isinstance(err, RequestError):
        status, name, what = 400, err.name, str(err)
    elif isinstance(err, ReadsBusy):
        status, name, what = 503, "busy", str(err)
    elif isinstance(err, RuntimeFault):
        # This node could not run a contract (logged where it happened): no verdict on the
        # request, which may succeed here later or on another node.
        status, name, what = 503, "node_fault", str(err)
    elif isinstance(err, ChainError):
        # The most specific registered class wins: walk the error's MRO.
        status = next((_STATUS[c] for c in type(err).__mro__ if c in _STATUS), 500)
        name, what = err.name, str(err)
    else:
        status, name, what = 500, "internal_error", "internal error"
    return status, {"code": status, "message": what, "error": {"name": name, "what": what}}


class NetworkApi(Protocol):
    """What the RPC needs of the peer layer (the peer layer owns its state; these are reads
    of it made on the event loop, and the two actions an operator may take)."""

    def status(self) -> dict[str, Any]:
        """The /v1/net/peers JSON but its ``sync``: node id, peers, dialling."""
        ...

    def block_sync_status(self) -> SyncStatus:
        """Where block sync stands."""
        ...

    def state_sync_status(self) -> StateSyncStatus | None:
        """Where the snapshot download stands, while the node fetches one (else None)."""
        ...

    def snapshots(self) -> dict[str, Any]:
        """The /v1/node/snapshots JSON: the snapshots this node serves to state sync."""
        ...

    def peer_count(self) -> int:
        """Peers connected."""
        ...

    @property
    def rdma_status(self) -> dict[str, object]:
        """What the node found of RDMA at start (get_info's ``rdma``)."""
        ...

    def connect(self, address: tuple[str, int]) -> bool:
        """Dial ``address`` and keep redialling it; False if it is dialled already."""
        ...

    async def disconnect(self, peer_id: str) -> bool:
        """Send peer ``peer_id`` away; False if no such peer is connected."""
        ...


def _export_plan(chain: Chain) -> tuple[ExportPlan, BlockStore]:
    # The store goes with the plan: the blocks up to the LIB are never rewritten, so a
    # worker thread reads them while the chain thread goes on (as a snapshot's state is).
    return export_plan(chain), chain.store


@dataclass(frozen=True, slots=True)
class EncodedJson:
    """A handler's result that is JSON already (the HTTP shell sends the bytes as they are)."""

    body: bytes


class Api:
    def __init__(
        self,
        runner: ChainRunner,
        metrics: NodeMetrics,
        watch: InclusionWatch,
        admitter: Admitter,
        network: NetworkApi | None = None,
        *,
        reads: ChainReads | None = None,
        pacer: ReadPacer | None = None,
        commit_wait_cap_s: float | None = None,
        finality: Callable[[], dict[str, Any]] | None = None,
        snapshot_writer: SnapshotWriter | None = None,
        exports: tuple[Path, Path] | None = None,
        call_fuel: int,
    ) -> None:
        """``reads`` and ``pacer`` default to ``ChainReads`` and ``ReadPacer`` tuned for a
        node; tests pass their own. A push in commit mode waits at most
        ``commit_wait_cap_s`` (the HTTP layer's time limit less a margin), then answers
        ``pending``. ``finality`` gives the node's side of get_finalizer_info (its own
        finalizers, whether production is paused). Snapshots that the admin RPC asks for
        are written by ``snapshot_writer``; the history it exports goes to ``exports[0]``,
        with a copy of the genesis ``exports[1]`` beside it. A read-only contract call uses
        ``call_fuel`` at most (the option http-call-fuel)."""
        self.runner = runner
        self.metrics = metrics
        self.watch = watch
        self.admitter = admitter
        self.network = network
        self.read = reads or ChainReads(runner, metrics)
        self.pacer = pacer or ReadPacer(lambda: admitter.admitting(WRITES_WINDOW_S), metrics)
        self.blocks = BlockJsonCache(runner.view.params)
        # The head's id, the head, its producers and get_producers' answers for it, by request.
        self._producers: (
            tuple[BlockId, HeaderState, list[Producer], dict[tuple[Any, ...], bytes]] | None
        ) = None
        self.commit_wait_cap_s = commit_wait_cap_s
        self.finality = finality
        self.snapshot_writer = snapshot_writer
        self.exports = exports
        self._export_running = False
        self.contracts = ContractApi(self.read, call_fuel=call_fuel)
        self.routes: dict[str, Route] = route_table(self, runner.view.params) | contract_routes(
            self.contracts, self.paced, runner.view.params.max_tx_bytes
        )

    async def run(self) -> None:
        """Serve the reads that go to the chain thread, until cancelled (the node runs this
        beside the admission task)."""
        await self.read.run()

    def paced(self, handler: Handler) -> Handler:
        """``handler`` behind the read pacer: reads yield to writes."""

        async def paced(args: dict[str, Any]) -> Any:
            await self.pacer.turn()
            return await handler(args)

        return paced

    def chain_updated(self, update: ChainUpdate) -> None:
        """A subscriber of the chain's updates: the block cache follows our chain."""
        self.blocks.follow(update.events.steps)

    # --- chain API: from the view where it holds the answer -------------------------------

    async def get_info(self, args: dict[str, Any]) -> dict[str, Any]:
        view = self.runner.view
        head, p = view.head, view.params
        lib_known = view.lib_num > 0
        info = {
            "server_version": SERVER_VERSION,
            "chain_id": view.chain_id.hex(),
            "head_block_num": head.num,
            "head_block_id": head.id.hex(),
            "head_block_time": slot_iso(head.slot),
            "head_block_producer": head.producer,
            "last_irreversible_block_num": view.lib_num,
            "last_irreversible_block_id": (view.lib_id if lib_known else head.id).hex(),
            "last_irreversible_block_time": slot_iso(view.lib_slot if lib_known else head.slot),
            "schedule_version": head.active.version,
            "token_symbol": p.token_symbol,
            "token_precision": p.token_precision,
            "mempool_size": view.mempool_size,
            "fork_db_size": view.fork_db_size,
        }
        antelope = info_fields(p, head.num, head.id.hex(), SERVER_VERSION)
        return info | antelope | self._network_summary()

    def _network_summary(self) -> dict[str, Any]:
        """What get_info adds from the peer layer, when the node has one."""
        network = self.network
        if network is None:
            return {}
        fetching = network.state_sync_status() is not None
        return (
            {"peer_count": network.peer_count()}
            | sync_summary_json(None if fetching else network.block_sync_status())
            | {"rdma": network.rdma_status}
        )

    async def health(self, args: dict[str, Any]) -> dict[str, Any]:
        head = self.runner.view.head
        age = time.time() - slot_start_s(head.slot)
        return {"status": "ok", "head_block_num": head.num, "head_age_s": round(age, 3)}

    # --- node and net API -------------------------------------------------------------------

    def _require_network(self) -> NetworkApi:
        if self.network is None:
            raise RpcError(404, "not_found", "this node runs without a network")
        return self.network

    async def sync_status(self, args: dict[str, Any]) -> dict[str, Any]:
        network = self._require_network()
        state_sync = network.state_sync_status()
        if state_sync is not None:
            return {"stage": "state_sync", "state_sync": state_sync_json(state_sync)}
        return sync_json(network.block_sync_status())

    async def snapshots(self, args: dict[str, Any]) -> dict[str, Any]:
        return self._require_network().snapshots()

    async def net_peers(self, args: dict[str, Any]) -> dict[str, Any]:
        network = self._require_network()
        return network.status() | {"sync": sync_json(network.block_sync_status())}

    async def net_connect(self, args: dict[str, Any]) -> dict[str, Any]:
        network = self._require_network()
        text = args["address"]
        try:
            address = parse_endpoint("address", text)  # a bad host must not reach a dial
        except ConfigError as err:
            raise RpcError(400, "invalid_address", err.reason) from err
        started = network.connect(address)
        return {"address": text, "status": "dialling" if started else "already dialling"}

    async def net_disconnect(self, args: dict[str, Any]) -> dict[str, Any]:
        network = self._require_network()
        peer = args["peer"]
        if not await network.disconnect(peer):
            raise RpcError(404, "not_found", "no such peer is connected")
        return {"peer": peer, "status": "disconnected"}

    async def create_snapshot(self, args: dict[str, Any]) -> dict[str, Any]:
        """Write the LIB's state to a snapshot file (nodeos' producer API name), by the
        node's one snapshot writer."""
        if self.snapshot_writer is None:
            raise RpcError(404, "not_found", "this node writes no snapshots")
        try:
            written = await self.snapshot_writer.write()
        except SnapshotBusy as err:
            raise RpcError(409, "snapshot_in_progress", str(err)) from err
        block, summary = written.head.block, written.summary
        return {
            "head_block_id": block.id.hex(),
            "head_block_num": block.num,
            "head_block_time": slot_iso(block.header.slot),
            "version": SNAPSHOT_VERSION,
            "snapshot_name": str(written.path.absolute()),  # not the node's cwd's
            "entries": summary.entries,
            "bytes": summary.size,
            "content_hash": summary.content_hash.hex(),
        }

    async def export_history(self, args: dict[str, Any]) -> dict[str, Any]:
        """Write the irreversible history this node holds to a block log in its data dir, as
        ``bor-node export`` does on a stopped node: one export at a time, each replacing the
        last one's file (so repeated calls do not fill the disk), written on a worker
        thread while the chain goes on."""
        if self.exports is None:
            raise RpcError(404, "not_found", "this node exports no history")
        if self._export_running:
            raise RpcError(409, "export_in_progress", "an export is being written already")
        self._export_running = True
        path, genesis = self.exports
        try:
            plan, store = await self.runner.call(_export_plan)
            log.info("history_exporting", first=plan.first, last=plan.last, file=str(path))

            def write() -> None:
                path.parent.mkdir(parents=True, exist_ok=True)
                export_history(store, plan, path)
                shutil.copyfile(genesis, genesis_beside(path))

            await asyncio.to_thread(write)
        except NothingToExport as err:
            raise RpcError(409, "nothing_to_export", str(err)) from err
        finally:
            self._export_running = False
        log.info("history_exported", first=plan.first, last=plan.last, file=str(path))
        return {  # absolute: the caller does not know the node's working directory
            "file": str(path.absolute()),
            "genesis": str(genesis_beside(path).absolute()),
            "first_block_num": plan.first,
            "last_block_num": plan.last,
            "snapshot_block_num": plan.snapshot_block,
            "blocks": plan.describe(),
        }

    # --- chain API: through the chain thread ------------------------------------------------

    async def get_block(self, args: dict[str, Any]) -> EncodedJson:
        key: int | str | bytes = args["block_num_or_id"]
        view = self.runner.view
        block_id: BlockId | None
        if isinstance(key, bytes):
            block_id = BlockId(key)
        else:
            num = int(key)  # at most 10 ASCII digits: the field's pattern
            if num > view.head.num:
                raise ce.NotFound(f"no block {num} on this chain")
            block_id = self.blocks.id_at(num, view)
            if block_id is None:
                found, lib = await self.read(lambda c: (c.block_by_num(num), c.lib))
                self.blocks.learn(num, found.id, lib)
                return EncodedJson(self.blocks.encode(found, self.runner.view.lib_num))
        encoded = self.blocks.encoded(block_id, view.lib_num)
        if encoded is not None:
            return EncodedJson(encoded)
        wanted = block_id
        block = self.blocks.recent(wanted)
        if block is None:
            block = await self.read(lambda c: c.block_by_id(wanted))
        return EncodedJson(self.blocks.encode(block, self.runner.view.lib_num))

    async def get_account(self, args: dict[str, Any]) -> dict[str, Any]:
        name = AccountName(args["account_name"])

        def read(c: Chain) -> tuple[Account, list[Producer], int, HeaderState]:
            return c.account(name), c.producers(), ram.used(StateView(c.store), name), c.head

        account, producers, used, head = await self.read(read)
        producer = next((p for p in producers if p.name == name), None)
        at = (head.num, slot_iso(head.slot))
        return account_json(account, producer, self.runner.view.params, at, used)

    async def get_producers(self, args: dict[str, Any]) -> EncodedJson:
        # Producers change only with a block: answers are kept until the head moves.
        asked = (args["json"], args["lower_bound"], args["limit"])
        head_id = self.runner.view.head.id
        if self._producers is None or self._producers[0] != head_id:
            head, producers = await self.read(lambda c: (c.head, c.producers()))
            self._producers = (head.id, head, producers, {})
        _, head, producers, answers = self._producers
        if asked not in answers:
            if len(answers) >= MAX_PRODUCER_ANSWERS:
                answers.clear()
            active = set(head.active.names())
            page = producers_page(
                producers, active, args["lower_bound"], args["limit"], args["json"]
            )
            schedules = {
                "active": schedule_json(head.active),
                "pending": schedule_json(head.pending),
            }
            answers[asked] = dumps(page | schedules)
        return EncodedJson(answers[asked])

    async def get_transaction(self, args: dict[str, Any]) -> dict[str, Any]:
        tx_id = TxId(args["id"])

        def find(chain: Chain) -> tuple[SignedTransaction, BlockNum, BlockNum] | None:
            try:
                stx, num = chain.transaction(tx_id)
            except ce.NotFound:
                if tx_id in chain.mempool:
                    return None
                raise
            return stx, num, chain.lib

        try:
            found = await self.read(find)
        except ce.NotFound:
            # An async push answered before admission: its refusal is told here.
            refusal = self.admitter.refusal(tx_id)
            if refusal is None:
                raise
            return {
                "id": tx_id.hex(),
                "status": "refused",
                "error": refusal.name,
                "reason": refusal.reason,
            }
        if found is None:
            return {"id": tx_id.hex(), "status": "pending"}
        stx, num, lib = found
        status = "irreversible" if num <= lib else "executed"
        shown = transaction_json(stx, self.runner.view.params)
        return shown | {"block_num": num, "status": status}

    async def get_finalizer_info(self, args: dict[str, Any]) -> dict[str, Any]:
        now_ms = int(time.time() * 1000)
        chain_side = await self.read(lambda c: finalizer_info_json(c, now_ms))
        node_side = self.finality() if self.finality is not None else {}
        return chain_side | {"local_finalizers": [], "production_paused": False} | node_side

    async def get_evidence(self, args: dict[str, Any]) -> dict[str, Any]:
        blocks = await self.read(lambda c: c.evidence())
        lib = self.runner.view.lib_num
        params = self.runner.view.params
        return {"blocks": [block_json(b, lib, params) for b in blocks]}

    # --- transactions -----------------------------------------------------------------------

    async def push_transaction(self, args: dict[str, Any]) -> dict[str, Any]:
        try:
            stx = decode_signed_parts(args["packed_trx"], args["signatures"])
        except EncodingError as err:
            raise ce.MalformedTransaction(str(err)) from err
        return await self._submit(stx, args["mode"], args["timeout_ms"])

    async def push_transactions(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        """Each transaction of the batch decoded and its signatures recovered in one executor
        call (``node.api.batch``), then admitted in one chain-thread call (``admit_many``) or,
        in mode async, queued; each answer is push_transaction's or the error it would have
        had."""
        batch: Batch = args["batch"]
        loop = asyncio.get_running_loop()
        prepared = await loop.run_in_executor(None, prepare, batch, self.runner.view.chain_id)
        self.metrics.rpc_push_batches.inc()
        self.metrics.rpc_push_batch_txs.inc(len(prepared))
        mode, wait_s = args["mode"], self._wait_s(args["timeout_ms"])
        ready = [p for p in prepared if isinstance(p, Prepared)]
        outcomes: list[Any] = [None] * len(ready)
        for i, p in enumerate(ready if mode == "async" else ()):
            try:
                self.admitter.admit_later(p.stx, p.keys)
            except ce.MempoolFull as err:
                outcomes[i] = err
        watches = [self.watch.watch(p.stx.id) if mode == "commit" else None for p in ready]
        try:
            if mode != "async":
                outcomes = await self.admitter.admit_many([(p.stx, p.keys) for p in ready])
            settled = iter(zip(ready, outcomes, watches, strict=True))
            jobs = [item if isinstance(item, Exception) else next(settled) for item in prepared]
            return list(
                await asyncio.gather(*(self._batch_answer(job, mode, wait_s) for job in jobs))
            )
        finally:
            for p, included in zip(ready, watches, strict=True):
                if included is not None:
                    self.watch.forget(p.stx.id, included)

    async def _batch_answer(self, job: Any, mode: str, wait_s: float) -> dict[str, Any]:
        """A batch's answer for one transaction: its error entry, or push_transaction's."""
        try:
            if isinstance(job, Exception):
                raise job
            prepared, outcome, included = job
            if isinstance(outcome, Exception):
                raise outcome
            if mode == "async":
                return {"transaction_id": prepared.stx.id.hex(), "status": "submitted"}
            return await self._answer(prepared.stx, outcome, included, wait_s)
        except Exception as err:
            status, body = error_response(err)
            if status == 500:
                log.exception("push_in_batch_failed")
            return {"error": {"code": status} | body["error"]}

    def _wait_s(self, timeout_ms: int) -> float:
        wait_s = timeout_ms / 1000
        if self.commit_wait_cap_s is not None:
            wait_s = min(wait_s, self.commit_wait_cap_s)
        return wait_s

    async def _submit(
        self,
        stx: SignedTransaction,
        mode: str,
        timeout_ms: int,
        keys: frozenset[PublicKey] | None = None,
    ) -> dict[str, Any]:
        """Admit ``stx`` (its signer ``keys`` recovered already, if given) and answer as
        ``mode`` asks: at once, after admission, or after inclusion."""
        if mode == "async":
            self.admitter.admit_later(stx, keys)
            return {"transaction_id": stx.id.hex(), "status": "submitted"}
        included = self.watch.watch(stx.id) if mode == "commit" else None
        try:
            trace = await self.admitter.admit(stx, keys)
            return await self._answer(stx, trace, included, self._wait_s(timeout_ms))
        finally:
            if included is not None:
                self.watch.forget(stx.id, included)

    async def _answer(
        self,
        stx: SignedTransaction,
        trace: TxTrace | None,
        included: asyncio.Future[BlockNum] | None,
        wait_s: float,
    ) -> dict[str, Any]:
        """push_transaction's answer for an admitted ``stx``: its trace and, if ``included``
        is watched, its block (or pending after ``wait_s``)."""
        # What its contract actions did on the head state (the block may differ).
        traced = {} if trace is None else {"trace": await self.contracts.trace_json(trace)}
        if included is None:
            return {"transaction_id": stx.id.hex(), "status": "accepted"} | traced
        try:
            async with asyncio.timeout(wait_s):
                num = await asyncio.shield(included)
        except TimeoutError:
            return {"transaction_id": stx.id.hex(), "status": "pending"} | traced
        return {"transaction_id": stx.id.hex(), "status": "included", "block_num": num} | traced
