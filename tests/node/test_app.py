"""The node as a whole, in this process: a part that crashes stops it cleanly."""

from __future__ import annotations

import argparse
import asyncio
import socket
from pathlib import Path

import pytest

from node.admission import Admitter
from node.app import Node
from node.cli import main
from node.config.file import load_config
from node.data_dir import open_chain
from tests.support.wait import until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_crashing_part_stops_the_node_and_releases_its_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception in one long-lived part (here admission) ends ``Node.run`` with that
    error instead of leaving a half-alive node; the RPC, network and chain thread stop and the
    LevelDB lock is released, so the data dir opens again on the same head."""
    assert main(["genesis", "new", "--producers", "1", "--out", str(tmp_path / "g")]) == 0
    data = tmp_path / "node"
    assert main(["init", "--genesis", str(tmp_path / "g" / "genesis.json"),
                 "--data-dir", str(data)]) == 0  # fmt: skip
    http_port = free_port()
    ns = argparse.Namespace(
        config=None,
        data_dir=str(data),
        http_server_address=f"127.0.0.1:{http_port}",
        p2p_listen_endpoint=f"127.0.0.1:{free_port()}",
        rdma="off",
    )
    config = load_config(ns)

    async def serving() -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", http_port)
        except OSError:
            return False
        writer.close()
        return True

    async def crash(self: Admitter) -> None:
        await until(serving, "the node serving its RPC", 10)  # a node up and running
        raise RuntimeError("admission bug")

    monkeypatch.setattr(Admitter, "run", crash)

    async def run() -> None:
        async with asyncio.timeout(20):
            await Node(config).run()

    with pytest.raises(ExceptionGroup) as stopped:
        asyncio.run(run())
    assert stopped.value.subgroup(RuntimeError) is not None
    chain = open_chain(config)  # would raise StoreError if the lock were still held
    try:
        assert chain.head.num == 0
    finally:
        chain.store.close()


@pytest.mark.parametrize(("option", "status"), [(None, 200), ("on", 200), ("off", 404)])
def test_the_public_listener_serves_the_explorer_unless_turned_off(
    tmp_path: Path, option: str | None, status: int
) -> None:
    """``http-explorer`` is on by default: the node's public RPC answers /explorer/ with the
    page; ``off`` leaves the route out (404)."""
    assert main(["genesis", "new", "--producers", "1", "--out", str(tmp_path / "g")]) == 0
    data = tmp_path / "node"
    assert main(["init", "--genesis", str(tmp_path / "g" / "genesis.json"),
                 "--data-dir", str(data)]) == 0  # fmt: skip
    http_port = free_port()
    ns = argparse.Namespace(
        config=None,
        data_dir=str(data),
        http_server_address=f"127.0.0.1:{http_port}",
        admin_http_server_address="",
        p2p_listen_endpoint="",
        rdma="off",
    )
    if option is not None:
        ns.http_explorer = option
    config = load_config(ns)

    async def fetch() -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", http_port)
        writer.write(b"GET /explorer/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        status_line = await reader.readline()
        writer.close()
        return int(status_line.split()[1])

    async def serving() -> bool:
        try:
            await fetch()
        except OSError:
            return False
        return True

    async def run() -> int:
        node = Node(config)
        async with asyncio.timeout(20), asyncio.TaskGroup() as tasks:
            running = tasks.create_task(node.run())
            await until(serving, "the node serving its RPC", 10)
            answer = await fetch()
            running.cancel()
        return answer

    assert asyncio.run(run()) == status
