"""A real one-producer node, run in this process until it has produced a few blocks, and
what its public listener serves at /metrics and get_info then: the cheapest real node whose
metrics the process-metric test and the dashboard and alert checks read."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import io
import re
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from node.app import Node
from node.cli import main
from node.config.file import load_config
from tests.support.wait import until

# Blocks the node produces before the scrape: a LIB past genesis, finality votes counted.
BLOCKS = 3


@dataclass(frozen=True)
class Scrape:
    metrics: str  # the /metrics text
    chain_id: str  # get_info's chain_id


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _run(data: Path, signature_provider: str) -> Scrape:
    http_port = free_port()
    ns = argparse.Namespace(
        config=None,
        data_dir=str(data),
        http_server_address=f"127.0.0.1:{http_port}",
        admin_http_server_address=f"127.0.0.1:{free_port()}",
        p2p_listen_endpoint=f"127.0.0.1:{free_port()}",
        producer_name=["producera"],
        signature_provider=[signature_provider],
        rdma="off",
    )
    node = Node(load_config(ns))
    running = asyncio.create_task(node.run())
    base = f"http://127.0.0.1:{http_port}"
    try:
        async with aiohttp.ClientSession() as http:

            async def produced() -> bool:
                if running.done():
                    running.result()  # a node that stopped says why
                try:
                    async with http.post(f"{base}/v1/chain/get_info", json={}) as r:
                        return int((await r.json())["head_block_num"]) >= BLOCKS
                except aiohttp.ClientError:
                    return False

            await until(produced, f"the node producing {BLOCKS} blocks", 30)
            async with http.post(f"{base}/v1/chain/get_info", json={}) as r:
                chain_id = str((await r.json())["chain_id"])
            async with http.get(f"{base}/metrics") as r:
                metrics = await r.text()
    finally:
        node.stop()
        await running
    return Scrape(metrics, chain_id)


@functools.cache
def scrape() -> Scrape:
    """Run the node once per test process (a few seconds) and keep what it served."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        said = io.StringIO()
        with contextlib.redirect_stdout(said):  # it prints the key's config line
            assert main(["genesis", "new", "--producers", "1", "--out", str(root / "g")]) == 0
        key = re.search(r"^signature-provider = (\S+)$", said.getvalue(), re.M)
        assert key is not None, said.getvalue()
        genesis = str(root / "g" / "genesis.json")
        assert main(["init", "--genesis", genesis, "--data-dir", str(root / "node")]) == 0
        return asyncio.run(_run(root / "node", key.group(1)))


def metric_names(text: str) -> set[str]:
    """Every sample name in a /metrics text (``_bucket``, ``_total`` and the rest included)."""
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.add(line.split("{", 1)[0].split(" ", 1)[0])
    return names
