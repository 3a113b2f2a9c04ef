"""push_transactions: the body's two shapes, and a batch answered per transaction, in order,
by the RPC served on loopback over a real chain."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from chain.core.execution.actions import Transfer
from node.api.batch import Batch, BatchBody, NotABatch
from node.api.fields import BadField, MissingField
from node.api.routes import MAX_BATCH
from node.producer import ProducerLoop
from tests.node.api.test_rpc import A, B, Rig, _body, _run
from tests.support.wait import until

PATH = "/v1/chain/push_transactions"


def _batch_body(rig: Rig) -> BatchBody:
    body = rig.api.routes[PATH].body
    assert isinstance(body, BatchBody)
    return body


def test_the_body_is_an_array_or_an_object_and_nothing_else(tmp_path: Path) -> None:
    """An array is Antelope's form (mode sync, default timeout); an object carries mode and
    timeout_ms; an empty or over-long list, a non-object item, a bad mode, or a body of any
    other JSON type is refused, naming what is wrong."""

    async def scenario(rig: Rig) -> None:
        body = _batch_body(rig)
        items: list[dict[str, Any]] = [{"packed_trx": "00"}, {"x": 1}]
        args = body.parse(items)
        assert (args["mode"], args["timeout_ms"]) == ("sync", 30_000)
        assert args["batch"] == Batch(items, body.item_fields)
        args = body.parse({"transactions": items, "mode": "commit", "timeout_ms": 5})
        assert (args["mode"], args["timeout_ms"], args["batch"].items) == ("commit", 5, items)
        bad: list[tuple[Any, type[Exception], str]] = [
            ([], BadField, "transactions"),
            ([{}] * (MAX_BATCH + 1), BadField, "transactions"),
            ([{}, 1], BadField, "transactions"),
            ({"transactions": []}, BadField, "transactions"),
            ({}, MissingField, "transactions"),
            ({"transactions": [{}], "mode": "later"}, BadField, "mode"),
            ({"transactions": [{}], "timeout_ms": 0}, BadField, "timeout_ms"),
            (None, NotABatch, "body"),
            ("[]", NotABatch, "body"),
            (7, NotABatch, "body"),
        ]
        for value, error, field in bad:
            with pytest.raises(error) as caught:
                body.parse(value)
            assert caught.value.field == field, value  # type: ignore[attr-defined]
        assert [f.name for f in body.item_fields] == [
            "packed_trx",
            "signatures",
            "compression",
            "packed_context_free_data",
        ]

    _run(tmp_path, scenario)


def test_each_transaction_of_a_batch_gets_its_own_answer_in_order(tmp_path: Path) -> None:
    """A batch holding a bad signature, a duplicate, an expired transaction, malformed hex,
    bytes that are not a transaction and Antelope's compression other than none answers each
    with the error push_transaction would have given (its code, name and reason), while the
    good ones around them are admitted; /metrics counts the batch and its transactions."""

    async def scenario(rig: Rig) -> None:
        goods = [await rig.tx(Transfer(A, B, n)) for n in (1, 2, 3)]
        expired = await rig.tx(Transfer(A, B, 9), expiration=1)
        items = [
            _body(goods[0]),
            _body(goods[1]) | {"signatures": ["00" * 65]},
            _body(goods[0]),
            _body(expired),
            {"packed_trx": "zz", "signatures": ["00" * 65]},
            {"packed_trx": "9401", "signatures": ["00" * 65]},
            _body(goods[1]) | {"compression": "zlib"},
            _body(goods[2]) | {"compression": 0, "packed_context_free_data": ""},
            _body(goods[1]) | {"compression": "none"},
        ]
        status, answers = await rig.post(PATH, items)
        assert status == 200 and len(answers) == len(items)
        errors = [a["error"] for a in answers if "error" in a]
        assert [(e["code"], e["name"]) for e in errors] == [
            (401, "bad_signature"),
            (409, "tx_duplicate"),
            (422, "tx_expired"),
            (400, "bad_field"),
            (422, "malformed_transaction"),
            (400, "bad_field"),
        ]
        assert all(e["what"] for e in errors)
        assert "compression" in errors[-1]["what"] and "packed_trx" in errors[3]["what"]
        accepted = [answers[i] for i in (0, 7, 8)]
        assert accepted == [
            {"transaction_id": stx.id.hex(), "status": "accepted"}
            for stx in (goods[0], goods[2], goods[1])
        ]
        pending = await rig.runner.call(lambda c: {p.tx.id for p in c.mempool.pending()})
        assert pending == {stx.id for stx in goods}
        metrics = await (await rig.client.get("/metrics")).text()
        assert "bor_rpc_push_batches_total 1.0" in metrics
        assert f"bor_rpc_push_batch_transactions_total {len(items)}.0" in metrics
        assert "bor_transactions_accepted_total 3.0" in metrics

    _run(tmp_path, scenario)


def test_a_batch_in_async_and_commit_modes(tmp_path: Path) -> None:
    """mode async answers submitted for each and admits them after; mode commit answers
    each with the block that included it."""

    async def scenario(rig: Rig) -> None:
        first = [await rig.tx(Transfer(A, B, n)) for n in (1, 2)]
        body = {"transactions": [_body(stx) for stx in first], "mode": "async"}
        status, answers = await rig.post(PATH, body)
        assert status == 200 and [a["status"] for a in answers] == ["submitted"] * 2
        await until(lambda: rig.runner.view.mempool_size == 2, "the async batch admitted")
        producer = ProducerLoop(
            rig.runner,
            ("producera",),
            {rig.net.keys["producera"].public_key: rig.net.keys["producera"]},
            rig.api.metrics,
        )
        assert await producer.maybe_produce(rig.runner.view.head.slot + 1) is not None
        second = [await rig.tx(Transfer(A, B, n)) for n in (3, 4)]
        body = {"transactions": [_body(stx) for stx in second], "mode": "commit"}
        push = asyncio.create_task(rig.post(PATH, body))
        await until(lambda: rig.runner.view.mempool_size == 2, "the commit batch admitted")
        block = await producer.maybe_produce(rig.runner.view.head.slot + 1)
        assert block is not None
        status, answers = await push
        assert status == 200
        assert answers == [
            {"transaction_id": stx.id.hex(), "status": "included", "block_num": block.num}
            for stx in second
        ]

    _run(tmp_path, scenario)


def test_a_batch_that_is_not_one_is_a_single_400(tmp_path: Path) -> None:
    """An empty body, an empty or over-long array, an object without transactions and a
    batch past the body limit each get one 400 (413 for the size) with a JSON reason, and
    nothing is admitted; GET is not served."""

    async def scenario(rig: Rig) -> None:
        stx = await rig.tx(Transfer(A, B, 1))
        over = [_body(stx)] * (MAX_BATCH + 1)
        for raw in (b"", b"[]", b"{}", b'"x"', b"[1]", b"{nope"):
            response = await rig.client.post(PATH, data=raw)
            assert response.status == 400, raw
            assert (await response.json())["error"]["what"]
        status, answer = await rig.post(PATH, over)  # 150 KB: past this rig's 64 KiB body
        assert (status, answer["error"]["name"]) == (413, "body_too_large")
        few: list[dict[str, Any]] = [{}] * (MAX_BATCH + 1)
        status, answer = await rig.post(PATH, few)  # within the body limit, over the count
        assert (status, answer["error"]["name"]) == (400, "bad_field")
        assert str(MAX_BATCH) in answer["error"]["what"]
        assert (await rig.client.get(PATH)).status == 405
        assert rig.runner.view.mempool_size == 0

    _run(tmp_path, scenario)


def test_the_openapi_document_describes_both_shapes(tmp_path: Path) -> None:
    """The document gives push_transactions a required body that is an array of at most
    MAX_BATCH objects or an object with transactions, mode and timeout_ms, and an answer that
    is an array."""

    async def scenario(rig: Rig) -> None:
        doc = await (await rig.client.get("/openapi.json")).json()
        operation = doc["paths"][PATH]
        assert set(operation) == {"post"}
        body = operation["post"]["requestBody"]
        assert body["required"] is True
        array, obj = body["content"]["application/json"]["schema"]["anyOf"]
        assert (array["type"], array["maxItems"], array["items"]) == (
            "array",
            MAX_BATCH,
            {"type": "object"},
        )
        assert obj["required"] == ["transactions"]
        assert set(obj["properties"]) == {"transactions", "mode", "timeout_ms"}
        answer = operation["post"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert answer["type"] == "array"

    _run(tmp_path, scenario)
