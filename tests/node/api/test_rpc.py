"""The HTTP RPC on a real chain and LevelDB store, served by aiohttp on loopback."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from chain.controller import Chain
from chain.core.consensus.block import SignedBlock
from chain.core.execution.actions import Action, Transfer
from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName
from genesis.testing import DevNet
from node.admission import Admitter
from node.api.http import make_admin_app, make_app
from node.api.reads import ChainReads
from node.api.rpc import Api, NetworkApi
from node.api.views import block_json
from node.metrics import NodeMetrics
from node.producer import ProducerLoop
from node.runner import ChainRunner, InclusionWatch
from node.snapshots.writer import SnapshotWriter
from p2p.blocksync.manager import Stage, SyncStatus
from p2p.statesync.fetch import StateSyncStatus
from tests.node.api.limits import CALL_FUEL, http_limits
from tests.support.wait import until

A, B = AccountName("alice"), AccountName("bob")
Client = TestClient[web.Request, web.Application]


@dataclass
class Rig:
    """A node's RPC on loopback over a real chain; the test reaches the chain only through
    the runner, as the node does."""

    client: Client
    admin: Client  # the admin listener
    api: Api
    net: DevNet
    runner: ChainRunner

    async def tx(self, *actions: Action, **kwargs: Any) -> SignedTransaction:
        return await self.runner.call(self.net.tx, *actions, **kwargs)

    async def produce(self) -> SignedBlock:
        return await self.runner.call(self.net.produce)

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        client = self.admin if self.api.routes[path].admin else self.client
        response = await client.post(path, json=body)
        return response.status, await response.json()


Scenario = Callable[[Rig], Awaitable[None]]


def _run(
    tmp_path: Path,
    scenario: Scenario,
    net: DevNet | None = None,
    wrap: Callable[[Chain], Chain] | None = None,
    network: NetworkApi | None = None,
    make_reads: Callable[[ChainRunner, NodeMetrics], ChainReads] | None = None,
    cache_follows: bool = True,
) -> None:
    async def main() -> None:
        devnet = net or DevNet.create(1)
        chain = devnet.open(tmp_path)
        runner = ChainRunner(chain if wrap is None else wrap(chain))
        await runner.call(_arm)
        metrics, watch = NodeMetrics(), InclusionWatch()
        runner.subscribe(watch.chain_updated)
        admitter = Admitter(runner, metrics)
        api = Api(
            runner,
            metrics,
            watch,
            admitter,
            network,
            call_fuel=CALL_FUEL,
            reads=None if make_reads is None else make_reads(runner, metrics),
            snapshot_writer=SnapshotWriter(runner, tmp_path / "snapshots"),
            exports=(tmp_path / "exports" / "history.log", tmp_path / "genesis-copy.json"),
        )
        (tmp_path / "genesis-copy.json").write_text("{}")  # what the export copies beside
        if cache_follows:
            runner.subscribe(api.chain_updated)
        limits = http_limits(max_body_bytes=1 << 16)
        client = TestClient(TestServer(make_app(api, metrics, limits)))
        admin = TestClient(TestServer(make_admin_app(api, limits)))
        await client.start_server()
        await admin.start_server()
        admission = asyncio.create_task(admitter.run())
        reads = asyncio.create_task(api.run())
        try:
            await scenario(Rig(client, admin, api, devnet, runner))
        finally:
            admission.cancel()
            reads.cancel()
            await client.close()
            await admin.close()
            runner.close()

    asyncio.run(main())


def _body(stx: SignedTransaction, **extra: Any) -> dict[str, Any]:
    return {"packed_trx": stx.packed.hex(), "signatures": [s.hex() for s in stx.signatures]} | extra


def test_get_info_block_account(tmp_path: Path) -> None:
    """get_info, get_block (by number and by id), get_account and get_producers answer a
    produced chain, by POST and by GET."""

    async def scenario(rig: Rig) -> None:
        await rig.produce()
        status, info = await rig.post("/v1/chain/get_info", {})
        assert status == 200 and info["head_block_num"] == 1
        assert info["chain_id"] == rig.net.genesis.to_initial_state().chain_id.hex()
        assert info["last_irreversible_block_num"] == 1
        assert info["last_irreversible_block_id"] == info["head_block_id"]
        status, block = await rig.post("/v1/chain/get_block", {"block_num_or_id": 1})
        assert status == 200 and block["id"] == info["head_block_id"]
        by_id = await rig.post("/v1/chain/get_block", {"block_num_or_id": block["id"]})
        assert by_id == (200, block)
        status, account = await rig.post("/v1/chain/get_account", {"account_name": "bob"})
        assert status == 200 and account["balance"] == 10**10
        status, prods = await rig.post("/v1/chain/get_producers", {})
        assert prods["active"]["producers"][0]["producer_name"] == "producera"
        response = await rig.client.get("/v1/chain/get_info")
        assert response.status == 200

    _run(tmp_path, scenario)


def test_push_modes_and_inclusion(tmp_path: Path) -> None:
    """sync push is accepted, commit push resolves with its block, async push is admitted in
    the background, and /metrics counts them."""

    async def scenario(rig: Rig) -> None:
        stx = await rig.tx(Transfer(A, B, 5))
        status, result = await rig.post("/v1/chain/push_transaction", _body(stx))
        assert (status, result["status"]) == (200, "accepted")
        producer = ProducerLoop(
            rig.runner,
            ("producera",),
            {rig.net.keys["producera"].public_key: rig.net.keys["producera"]},
            rig.api.metrics,
        )
        committed = await rig.tx(Transfer(A, B, 6))
        push = asyncio.create_task(
            rig.post("/v1/chain/push_transaction", _body(committed, mode="commit"))
        )
        # The commit push admitted (its answer waits for the block).
        await until(lambda: rig.runner.view.mempool_size == 2, "the commit push admitted", 10)
        block = await producer.maybe_produce(rig.runner.view.head.slot + 1)
        assert block is not None
        status, result = await push
        assert result == {
            "transaction_id": committed.id.hex(),
            "status": "included",
            "block_num": block.num,
        }
        status, tx = await rig.post("/v1/chain/get_transaction", {"id": stx.id.hex()})
        assert (status, tx["block_num"], tx["status"]) == (200, block.num, "irreversible")
        status, account = await rig.post("/v1/chain/get_account", {"account_name": "bob"})
        assert account["balance"] == 10**10 + 11
        asynced = await rig.tx(Transfer(A, B, 7))
        status, result = await rig.post("/v1/chain/push_transaction", _body(asynced, mode="async"))
        assert (status, result["status"]) == (200, "submitted")
        # The queued transaction is admitted in the background.
        await until(lambda: rig.runner.view.mempool_size == 1, "the async push admitted")
        status, pending = await rig.post("/v1/chain/get_transaction", {"id": asynced.id.hex()})
        assert (status, pending["status"]) == (200, "pending")
        metrics = await (await rig.client.get("/metrics")).text()
        assert "bor_head_block_num 1.0" in metrics
        assert "bor_mempool_transactions 1.0" in metrics
        assert "bor_transactions_accepted_total 3.0" in metrics

    _run(tmp_path, scenario)


# The largest transaction the RPC takes (a setcode of the largest module) is past this rig's
# body limit: the body limit answers first (test_rpc_inputs pins the packed_trx cap itself).
_PACKED_CAP = ChainParams().max_tx_bytes + ChainParams().max_code_bytes


def test_bad_requests_get_named_4xx_and_change_nothing(tmp_path: Path) -> None:
    """Malformed, unsigned, unaffordable or duplicate pushes and bad reads get their named 4xx,
    and leave the state and the mempool as they were (but for the one good push)."""

    async def scenario(rig: Rig) -> None:
        good = await rig.tx(Transfer(A, B, 1))
        wrong_signer = await rig.tx(Transfer(A, B, 1), signers=["bob"])
        cases: list[tuple[Any, int, str]] = [
            ({"packed_trx": "zz", "signatures": ["00"]}, 400, "bad_field"),
            ({"packed_trx": "9401", "signatures": ["00" * 65]}, 422, "malformed_transaction"),
            (_body(good) | {"signatures": ["00" * 65]}, 401, "bad_signature"),
            (_body(wrong_signer), 401, "missing_authority"),
            (_body(await rig.tx(Transfer(A, B, 10**15))), 402, "insufficient_funds"),
            (_body(await rig.tx(Transfer(A, AccountName("nobody"), 1))), 404, "unknown_account"),
            (_body(await rig.tx(Transfer(A, B, 1), expiration=1)), 422, "tx_expired"),
            (_body(good, mode="sometimes"), 400, "bad_field"),
            ({"packed_trx": "00" * (_PACKED_CAP + 1), "signatures": ["00"]}, 413, "body_too_large"),
        ]
        before = await rig.post("/v1/chain/get_account", {"account_name": "alice"})
        for body, status, name in cases:
            got_status, got = await rig.post("/v1/chain/push_transaction", body)
            assert (got_status, got["error"]["name"]) == (status, name), body
        await rig.post("/v1/chain/push_transaction", _body(good))
        status, dup = await rig.post("/v1/chain/push_transaction", _body(good))
        assert (status, dup["error"]["name"]) == (409, "tx_duplicate")
        response = await rig.client.post("/v1/chain/get_block", data=b"{nope")
        assert response.status == 400
        assert (await response.json())["error"]["name"] == "malformed_json"
        status, missing = await rig.post("/v1/chain/get_block", {"block_num_or_id": 99})
        assert (status, missing["error"]["name"]) == (404, "not_found")
        status, _ = await rig.post("/v1/chain/get_account", {"account_name": "Nope!"})
        assert status == 400
        huge = await rig.client.post("/v1/chain/get_info", data=b"x" * (1 << 17))
        assert huge.status == 413
        assert await rig.post("/v1/chain/get_account", {"account_name": "alice"}) == before
        pending = await rig.runner.call(lambda chain: [p.tx.id for p in chain.mempool.pending()])
        assert pending == [good.id]  # only the one good transaction

    _run(tmp_path, scenario)


def test_openapi_describes_every_route(tmp_path: Path) -> None:
    """Each listener's /openapi.json lists exactly the paths it serves (admin routes only on
    the admin listener), and push_transaction's fields with their types and which are
    required."""

    async def scenario(rig: Rig) -> None:
        doc = await (await rig.client.get("/openapi.json")).json()
        admin_doc = await (await rig.admin.get("/openapi.json")).json()
        admin = {path for path, route in rig.api.routes.items() if route.admin}
        assert admin == {
            "/v1/net/connect",
            "/v1/net/disconnect",
            "/v1/producer/create_snapshot",
            "/v1/node/export_history",
        }
        assert set(doc["paths"]) == set(rig.api.routes) - admin | {"/metrics", "/openapi.json"}
        assert set(admin_doc["paths"]) == admin | {"/openapi.json"}
        body = doc["paths"]["/v1/chain/push_transaction"]["post"]["requestBody"]
        schema = body["content"]["application/json"]["schema"]
        assert schema["required"] == ["packed_trx", "signatures"]
        assert schema["properties"]["mode"]["enum"] == ["async", "sync", "commit"]
        assert schema["properties"]["timeout_ms"]["type"] == "integer"

    _run(tmp_path, scenario)


def test_admin_answers_name_absolute_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """create_snapshot and export_history name their files by absolute paths, though the
    node's data dir was given relative to its working directory."""
    monkeypatch.chdir(tmp_path)

    async def scenario(rig: Rig) -> None:
        for _ in range(3):
            await rig.produce()
        status, made = await rig.post("/v1/producer/create_snapshot", {})
        assert status == 200, made
        status, exported = await rig.post("/v1/node/export_history", {})
        assert status == 200, exported
        for path in (made["snapshot_name"], exported["file"], exported["genesis"]):
            assert Path(path).is_absolute() and Path(path).is_relative_to(Path.cwd()), path
            assert Path(path).exists(), path

    _run(Path("."), scenario)


class ChainThreadOnly:
    """Stands in for the runner's chain: once armed on the chain thread, reading any attribute
    from another thread is recorded (and fails), so a test sees every stray access."""

    def __init__(self, chain: Chain) -> None:
        self._chain = chain
        self.owner: int | None = None  # the runner's constructor reads the first view
        self.strays: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if self.owner is not None and threading.get_ident() != self.owner:
            self.strays.append(f"{name} from {threading.current_thread().name}")
            raise AssertionError(f"Chain.{name} read off the chain thread")
        return getattr(self._chain, name)


def _arm(chain: Chain) -> None:
    """On the chain thread: a guarded chain refuses every other thread from now on."""
    if isinstance(chain, ChainThreadOnly):
        chain.owner = threading.get_ident()


class FakeNetwork:
    """A ``NetworkApi`` that answers from fixed dicts and remembers what it was asked."""

    def __init__(self) -> None:
        self.dialled: list[tuple[str, int]] = []
        self.rdma_status: dict[str, object] = {"available": False}

    def status(self) -> dict[str, Any]:
        return {"peers": [{"id": "p1"}]}

    def block_sync_status(self) -> SyncStatus:
        return SyncStatus(Stage.IN_SYNC, 2, 1, 3, 3, (), 0, 0.0, 0.0, None, 1, False)

    def state_sync_status(self) -> StateSyncStatus | None:
        return None

    def snapshots(self) -> dict[str, Any]:
        return {"snapshots": []}

    def peer_count(self) -> int:
        return 1

    def connect(self, address: tuple[str, int]) -> bool:
        self.dialled.append(address)
        return True

    async def disconnect(self, peer_id: str) -> bool:
        return peer_id == "p1"


def test_no_route_touches_the_chain_off_its_thread(tmp_path: Path) -> None:
    """Every route, the producer loop and admission reach the chain only on the chain thread
    (the chain is wrapped so that any other thread's attribute read fails)."""
    guards: list[ChainThreadOnly] = []

    def wrap(chain: Chain) -> Chain:
        guards.append(ChainThreadOnly(chain))
        return cast(Chain, guards[-1])

    network = FakeNetwork()

    async def scenario(rig: Rig) -> None:
        producer = ProducerLoop(
            rig.runner,
            ("producera",),
            {rig.net.keys["producera"].public_key: rig.net.keys["producera"]},
            rig.api.metrics,
        )
        stx = await rig.tx(Transfer(A, B, 5))
        status, _ = await rig.post("/v1/chain/push_transaction", _body(stx, mode="sync"))
        assert status == 200
        block = await producer.maybe_produce(rig.runner.view.head.slot + 1)
        assert block is not None and len(block.transactions) == 1
        asynced = await rig.tx(Transfer(A, B, 6))
        await rig.post("/v1/chain/push_transaction", _body(asynced, mode="async"))
        batched = await rig.tx(Transfer(A, B, 7))
        block_id = block.id.hex()
        calls: list[tuple[str, Any, int]] = [
            ("/v1/chain/push_transactions", [_body(batched)], 200),
            ("/v1/chain/get_info", {}, 200),
            ("/v1/chain/get_block", {"block_num_or_id": 1}, 200),
            ("/v1/chain/get_block", {"block_num_or_id": block_id}, 200),
            ("/v1/chain/get_block", {"block_num_or_id": 7}, 404),
            ("/v1/chain/get_account", {"account_name": "producera"}, 200),
            ("/v1/chain/get_producers", {}, 200),
            ("/v1/chain/get_transaction", {"id": stx.id.hex()}, 200),
            ("/v1/chain/get_transaction", {"id": asynced.id.hex()}, 200),
            ("/v1/chain/get_evidence", {}, 200),
            ("/v1/chain/get_finalizer_info", {}, 200),
            ("/v1/node/health", {}, 200),
            ("/v1/node/sync", {}, 200),
            ("/v1/node/snapshots", {}, 200),
            ("/v1/net/peers", {}, 200),
            ("/v1/net/connect", {"address": "127.0.0.1:9876"}, 200),
            ("/v1/net/disconnect", {"peer": "p1"}, 200),
            ("/v1/producer/create_snapshot", {}, 200),
            ("/v1/node/export_history", {}, 200),
            ("/v1/chain/get_code", {"account": "alice"}, 404),
            ("/v1/chain/get_abi", {"account": "alice"}, 404),
            ("/v1/chain/get_currency_balance", {"code": "eosio.token", "account": A}, 200),
            ("/v1/chain/get_currency_stats", {"code": "eosio.token", "symbol": "BOR"}, 200),
            ("/v1/chain/get_table_rows", {"code": "alice", "scope": "a", "table": "t"}, 404),
            ("/v1/chain/call", {"contract": "alice", "action": "get"}, 404),
        ]
        assert {path for path, _, _ in calls} == set(rig.api.routes) - {
            "/v1/chain/push_transaction"
        }
        for path, body, expected in calls:
            status, answer = await rig.post(path, body)
            assert status == expected, (path, answer)
        assert (await rig.client.get("/metrics")).status == 200
        assert (await rig.client.get("/openapi.json")).status == 200
        assert network.dialled == [("127.0.0.1", 9876)]

    _run(tmp_path, scenario, wrap=wrap, network=network)
    assert len(guards) == 1 and guards[0].strays == []


def test_block_json_is_cached_and_irreversible_follows_the_lib(tmp_path: Path) -> None:
    """get_block answers recent blocks from JSON encoded once, without the chain thread, and
    its ``irreversible`` turns true once the LIB passes the block; every answer equals the
    block's JSON made afresh."""

    async def scenario(rig: Rig) -> None:
        metrics = rig.api.metrics.registry
        first = await rig.produce()
        status, early = await rig.post("/v1/chain/get_block", {"block_num_or_id": 1})
        assert status == 200 and rig.runner.view.lib_num == 0
        params = rig.runner.view.params
        assert early == block_json(first, 0, params) and early["irreversible"] is False
        assert rig.api.blocks.encoded(first.id, 0) is not None
        while rig.runner.view.lib_num < 1:
            await rig.produce()
        for key in (1, "1", first.id.hex()):
            status, late = await rig.post("/v1/chain/get_block", {"block_num_or_id": key})
            assert status == 200 and late == block_json(first, 1, params)
            assert late["irreversible"] is True
        assert metrics.get_sample_value("bor_rpc_chain_reads_total") == 0

    _run(tmp_path, scenario, net=DevNet.create(3, blocks_per_turn=1))


def test_a_block_not_seen_at_commit_is_read_once(tmp_path: Path) -> None:
    """A block the RPC's cache did not see committed (one from before a restart) is read on
    the chain thread once; later requests, by number or id, are answered from the cache."""

    async def scenario(rig: Rig) -> None:
        metrics = rig.api.metrics.registry
        block = await rig.runner.call(rig.net.produce)  # the cache does not follow the chain
        answers = [
            await rig.post("/v1/chain/get_block", {"block_num_or_id": key})
            for key in (1, 1, block.id.hex())
        ]
        assert answers == [(200, block_json(block, 1, rig.runner.view.params))] * 3
        assert metrics.get_sample_value("bor_rpc_chain_reads_total") == 1

    _run(tmp_path, scenario, cache_follows=False)


def test_reads_beyond_the_bound_get_503_busy(tmp_path: Path) -> None:
    """With the chain thread held up, reads queue for it up to the bound; the next read is
    refused at once with 503 and a JSON reason, and the queued ones are answered later."""

    async def scenario(rig: Rig) -> None:
        gate = threading.Event()
        blocker = asyncio.create_task(rig.runner.call(lambda _: gate.wait(5)))
        body = {"account_name": "alice"}
        (chain_reads,) = made
        # One in the batch on its way to the chain thread, then two waiting.
        queued = [asyncio.create_task(rig.post("/v1/chain/get_account", body))]
        await until(
            lambda: chain_reads._arrived.is_set() and not chain_reads._waiting,
            "the first read taken into a batch",
        )
        queued += [asyncio.create_task(rig.post("/v1/chain/get_account", body)) for _ in "ab"]
        await until(lambda: len(chain_reads._waiting) == 2, "two reads waiting")
        status, refused = await rig.post("/v1/chain/get_account", body)
        assert status == 503 and refused["error"]["name"] == "busy"
        assert "waiting for the chain" in refused["error"]["what"]
        gate.set()
        assert await blocker
        assert [status for status, _ in await asyncio.gather(*queued)] == [200] * 3
        metrics = rig.api.metrics.registry
        assert metrics.get_sample_value("bor_rpc_reads_refused_total") == 1

    made: list[ChainReads] = []

    def reads(runner: ChainRunner, metrics: NodeMetrics) -> ChainReads:
        made.append(ChainReads(runner, metrics, max_waiting=2))
        return made[-1]

    _run(tmp_path, scenario, make_reads=reads)


def test_finalizer_info_and_the_qc_of_a_block(tmp_path: Path) -> None:
    """On a votes chain get_finalizer_info lists the policy and each finalizer's last vote,
    and get_block shows a block's claim and the QC it carries."""

    async def scenario(rig: Rig) -> None:
        first = await rig.produce()
        for vote in await rig.runner.call(rig.net.votes, first.id):
            await rig.runner.call(Chain.add_vote, vote, 0)
        second = await rig.produce()
        status, info = await rig.post("/v1/chain/get_finalizer_info", {})
        assert status == 200 and info["finality"] == "votes"
        assert info["policy"]["threshold"] == 3
        rows = {r["name"]: r for r in info["policy"]["finalizers"]}
        assert rows["producerc"]["last_vote"]["block_num"] == 1
        assert rows["producerc"]["votes"] == 1
        status, block = await rig.post("/v1/chain/get_block", {"block_num_or_id": second.num})
        assert status == 200
        assert block["qc_claim"] == {"block_num": 1, "strong": True}
        assert block["qc"]["block_id"] == first.id.hex()
        assert block["qc"]["strong_votes"] == [0, 1, 2, 3] and block["qc"]["weak_votes"] == []

    _run(tmp_path, scenario, DevNet.create(4, blocks_per_turn=1, finality="votes"))


def test_an_async_push_refused_at_admission_is_told_by_get_transaction(tmp_path: Path) -> None:
    """An async push answered "submitted" and then refused shows in get_transaction as
    "refused" with the error's name and reason, where it used to be a 404 like an unknown id."""

    async def scenario(rig: Rig) -> None:
        forged = await rig.tx(Transfer(A, B, 8), signers=["bob"])
        status, result = await rig.post("/v1/chain/push_transaction", _body(forged, mode="async"))
        assert (status, result["status"]) == (200, "submitted")
        answers: list[tuple[int, Any]] = []

        async def known() -> bool:  # admitted (here: refused) in the background
            answers.append(await rig.post("/v1/chain/get_transaction", {"id": forged.id.hex()}))
            return answers[-1][0] == 200

        await until(known, "the transaction known")
        status, answer = answers[-1]
        assert (status, answer["status"], answer["error"]) == (200, "refused", "missing_authority")
        assert "bob" in answer["reason"] or "alice" in answer["reason"], answer
        status, _ = await rig.post("/v1/chain/get_transaction", {"id": "00" * 32})
        assert status == 404

    _run(tmp_path, scenario)
