"""The aiohttp shell: JSON bodies and headers as before the encoders changed, /metrics
scrapes close together sharing one rendering, and the docs naming only routes it serves."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from genesis.testing import DevNet
from node.admission import Admitter
from node.api import http as http_module
from node.api.http import make_admin_app, make_app
from node.api.rpc import Api
from node.api.stream.hub import StreamHub
from node.metrics import NodeMetrics
from node.runner import ChainRunner, InclusionWatch
from tests.node.api.limits import CALL_FUEL, http_limits, stream_limits

ROOT = Path(__file__).resolve().parents[3]
Client = TestClient[web.Request, web.Application]


Check = Callable[[Client, ChainRunner, DevNet], Awaitable[None]]


def _serve(tmp_path: Path, metrics_ttl_s: float, check: Check) -> None:
    async def main() -> None:
        net = DevNet.create(1)
        chain = net.open(tmp_path)
        runner = ChainRunner(chain)
        metrics = NodeMetrics()
        api = Api(runner, metrics, InclusionWatch(), Admitter(runner, metrics), call_fuel=CALL_FUEL)
        app = make_app(
            api, metrics, http_limits(max_body_bytes=1 << 16), metrics_ttl_s=metrics_ttl_s
        )
        client: Client = TestClient(TestServer(app))
        await client.start_server()
        reads = asyncio.create_task(api.run())
        try:
            await check(client, runner, net)
        finally:
            reads.cancel()
            await client.close()
            runner.close()

    asyncio.run(main())


def test_answers_are_utf8_json_with_the_same_content(tmp_path: Path) -> None:
    """Answers keep ``application/json; charset=utf-8``, errors included, and the body is the
    JSON the handler returned."""

    async def check(client: Client, runner: ChainRunner, net: DevNet) -> None:
        for path, status in (("/v1/node/health", 200), ("/v1/chain/get_block", 400)):
            response = await client.post(path, json={})
            assert response.status == status
            assert response.headers["Content-Type"] == "application/json; charset=utf-8"
            assert isinstance(json.loads(await response.read()), dict)
        info = await (await client.post("/v1/chain/get_info", json={})).json()
        assert info["head_block_num"] == runner.view.head.num == 0

    _serve(tmp_path, 1.0, check)


def test_metrics_are_rendered_once_per_ttl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scrape within the TTL of the last one gets the same text; after it, the new head
    (the HTTP shell's clock is the test's)."""
    now = [1000.0]
    monkeypatch.setattr(http_module, "time", SimpleNamespace(monotonic=lambda: now[0]))

    async def check(client: Client, runner: ChainRunner, net: DevNet) -> None:
        before = await (await client.get("/metrics")).text()
        await runner.call(net.produce)
        now[0] += 1.9
        assert await (await client.get("/metrics")).text() == before
        now[0] += 0.1
        after = await (await client.get("/metrics")).text()
        assert "bor_head_block_num 0.0" in before and "bor_head_block_num 1.0" in after

    _serve(tmp_path, 2.0, check)


def test_every_path_the_docs_name_is_served(tmp_path: Path) -> None:
    """Each ``/v1/...``, ``/openapi.json`` or ``/metrics`` path that README.md or docs/*.md
    names is a path the public or the admin listener serves (a renamed route or a mistyped
    document path fails here, not at a reader's 404)."""
    path_re = re.compile(r"(?<![\w.])/(?:v1/[\w/.]*\w|openapi\.json|metrics)\b")
    named = {
        (doc.relative_to(ROOT).as_posix(), path)
        for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        for path in path_re.findall(doc.read_text())
    }

    async def served() -> set[str]:
        runner = ChainRunner(DevNet.create(1).open(tmp_path))
        try:
            metrics = NodeMetrics()
            admitter = Admitter(runner, metrics)
            api = Api(runner, metrics, InclusionWatch(), admitter, call_fuel=CALL_FUEL)
            hub = StreamHub(runner, stream_limits(), metrics)
            limits = http_limits()
            apps = [make_app(api, metrics, limits, stream=hub), make_admin_app(api, limits)]
            return {r.canonical for app in apps for r in app.router.resources()}
        finally:
            runner.close()

    paths = asyncio.run(served())
    assert len({path for _, path in named}) > 15, "the scan finds the documented routes"
    assert {(doc, path) for doc, path in named if path not in paths} == set()
