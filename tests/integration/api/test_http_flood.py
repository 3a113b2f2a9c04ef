"""Hostile HTTP clients against a real node process: idle connections past the fd limit,
clients that pipeline requests and never read an answer, bad peer host names and cross-site
requests to the admin listener.

The node runs under ``prlimit`` with a small fd limit (1,400, soft and hard), so that the
flood that once exhausted 4,096 fds takes a second here. Hostile clients come from loopback
addresses of their own (127.1.x.y), the honest one from 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from genesis.testing import DevNet
from node.commands.devnet import plan, prepare
from scripts.bench_flood import rss_mib
from tests.integration.conftest import BIN, NodeProcess, Nodes, free_port, wait_for
from tests.node.api.test_http_budget import BIG_BLOCK_TXS, add_big_block
from tests.support.wait import hold, observe, wait_until

FD_LIMIT = 1400
# What node.process.fds leaves the public listener under FD_LIMIT with the default p2p caps:
# 1,400 - 1,100 (own files) - 121 (peers) = 179, less 32 for the admin listener; a quarter
# of it per address.
PUBLIC_CAP = 147
PER_ADDRESS_CAP = 36


def source(i: int, sources: int) -> str:
    n = 2 + i % sources
    return f"127.1.{n // 256}.{n % 256}"


def producer(nodes: Nodes, tmp: Path, *extra: str) -> tuple[NodeProcess, int]:
    """A one-producer devnet node (it votes, so it writes its finalizer safety file each
    block) under an fd limit of FD_LIMIT, started; and its admin port."""
    [dev] = plan(1, ("127.0.0.1", free_port()), free_port(), free_port())
    prepare(tmp / "net", [dev])
    node = nodes.run(tmp / "net" / dev.name, *extra, rpc_port=dev.rpc[1])
    node.prefix = ["prlimit", f"--nofile={FD_LIMIT}:{FD_LIMIT}", "--"]
    node.start(wait_head=1)
    assert dev.admin is not None
    return node, dev.admin[1]


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@contextlib.contextmanager
def many_fds() -> Iterator[None]:
    """This test process may hold a few thousand sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def connect_many(
    port: int, count: int, sources: int, send: bytes = b""
) -> list[socket.socket]:
    """``count`` connections to ``port`` from ``sources`` addresses, each sending ``send``
    and then nothing; those not accepted within 2 s are dropped."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(200)

    async def one(i: int) -> socket.socket | None:
        sock = socket.socket()
        sock.setblocking(False)
        sock.bind((source(i, sources), 0))
        async with gate:
            try:
                async with asyncio.timeout(2):
                    await loop.sock_connect(sock, ("127.0.0.1", port))
                if send:
                    sock.send(send)  # into an empty send buffer: all of it
            except (TimeoutError, OSError):
                sock.close()
                return None
        return sock

    return [s for s in await asyncio.gather(*(one(i) for i in range(count))) if s is not None]


def get_info(url: str) -> tuple[int, dict[str, object]]:
    """(status, body) of get_info; 0 if no answer came within 5 s."""
    request = urllib.request.Request(
        url + "/v1/chain/get_info", data=b"{}", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())
    except OSError:
        return 0, {}


def refusal_at_accept(port: int) -> bytes:
    """What the node sends a connection it refuses, before the client has said anything."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        return answer


def test_idle_connections_past_the_fd_limit_neither_stop_the_node_nor_lock_out_others(
    nodes: Nodes, tmp_path: Path
) -> None:
    """Under a 1,400 fd limit, 200 idle connections from one address get PER_ADDRESS_CAP
    places while another client is served; then 1,500 from 100 addresses (more than the fd
    limit) get PUBLIC_CAP places, every other one a 503 at accept, the node keeps producing
    and finalizing, and once they close a fresh client is served at once."""
    node, _ = producer(nodes, tmp_path, "--http-read-timeout-ms", "60000")
    assert node.proc is not None
    pid = node.proc.pid
    with many_fds():
        held = asyncio.run(connect_many(node.port, 200, 1))
        wait_for(lambda: open_fds(pid) < FD_LIMIT, 5, "the node's fds")
        assert get_info(node.url)[0] == 200  # another address is served
        for sock in held:
            sock.close()
        before = node.info()
        held = asyncio.run(connect_many(node.port, 1500, 100))
        started = time.monotonic()
        try:
            assert len(held) >= PUBLIC_CAP
            hold(max(0.0, 4 - (time.monotonic() - started)), "blocks and votes go on for 4 s")
            assert node.running, node.tail()
            assert open_fds(pid) < FD_LIMIT - 1000  # the reserve is untouched
            answer = refusal_at_accept(node.port)
            assert answer.startswith(b"HTTP/1.1 503"), answer
            assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["name"] == "busy"
        finally:
            for sock in held:
                sock.close()
    status, after = get_info(node.url)
    assert status == 200, node.tail()
    assert int(str(after["head_block_num"])) >= before["head_block_num"] + 4
    assert int(str(after["last_irreversible_block_num"])) > before["last_irreversible_block_num"]


def test_clients_that_never_read_are_cut_off_and_their_memory_returns(
    nodes: Nodes, tmp_path: Path
) -> None:
    """100 clients from 100 addresses each pipeline 40 GET /openapi.json and never read: the
    node closes every one of them within http-write-timeout-ms (2 s here) and a bit, its fds
    and RSS come back to where they were, and the kernel holds at most 512 KiB of unsent
    answer for each meanwhile."""
    node, _ = producer(nodes, tmp_path, "--http-write-timeout-ms", "2000")
    assert node.proc is not None
    pid = node.proc.pid
    request = f"GET /openapi.json HTTP/1.1\r\nHost: 127.0.0.1:{node.port}\r\n\r\n".encode()
    hold(1, "start-up allocations settle before the baseline")
    fds_before, rss_before = open_fds(pid), rss_mib(pid)
    with many_fds():
        held = asyncio.run(connect_many(node.port, 100, 100, request * 40))
        try:
            assert len(held) == 100
            wait_until(
                lambda: all(sock_send_queue(s) > 0 for s in held),
                5,
                "answers waiting, unread, for every client",
                interval=0.05,
            )
            queued = [sock_send_queue(s) for s in held]
            rss_during = rss_mib(pid)
            wait_for(lambda: open_fds(pid) <= fds_before + 2, 8, "never-reading clients cut off")
            rss_after = rss_mib(pid)
        finally:
            for sock in held:
                sock.close()
    print(
        f"RSS {rss_before:.0f} -> {rss_during:.0f} -> {rss_after:.0f} MiB; "
        f"fds {fds_before}; largest peer receive queue {max(queued) >> 10} KiB"
    )
    # Measured 26 MiB above the start (the chain's own growth and the allocator's arenas);
    # the 100 never-reading clients held 592 MiB for good.
    assert rss_after - rss_before < 50
    assert get_info(node.url)[0] == 200


def chain_with_a_big_block(data_dir: Path) -> int:
    """A data dir (genesis.json, blocks/) of a one-producer chain with a 2.27 MB block,
    built here in a blink rather than pushed through a live node; that block's number."""
    net = DevNet.create(1)
    data_dir.mkdir()
    (data_dir / "genesis.json").write_text(json.dumps(net.genesis.to_json()))
    chain = net.open(data_dir / "blocks")
    try:
        return add_big_block(net, chain).num
    finally:
        chain.store.close()


def test_clients_that_pipeline_big_blocks_and_never_read_leave_no_memory_behind(
    nodes: Nodes, tmp_path: Path
) -> None:
    """100 clients from 100 addresses each pipeline 3 get_block requests for a 2.27 MB block
    and never read: the node's RSS grows by at most ~twice the 64 MiB budget of answers in
    flight while they sit (another client's get_block is a 503 busy, its get_info a 200), and
    3 s after they close it is back within a few MiB of where it was."""
    num = chain_with_a_big_block(tmp_path / "data")
    node = nodes.run(tmp_path / "data").start(wait_head=num + 1)
    assert node.proc is not None
    pid = node.proc.pid
    body = json.dumps({"block_num_or_id": num}).encode()
    request = (
        f"POST /v1/chain/get_block HTTP/1.1\r\nHost: 127.0.0.1:{node.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    block = node.rpc("/v1/chain/get_block", {"block_num_or_id": num})  # encoded and cached
    assert len(block["transactions"]) == BIG_BLOCK_TXS
    hold(1, "start-up allocations settle before the baseline")
    rss_before = rss_mib(pid)
    with many_fds():
        held = asyncio.run(connect_many(node.port, 100, 100, request * 3))
        try:
            assert len(held) == 100
            peak = rss_before

            def bounded() -> bool:
                nonlocal peak
                peak = max(peak, rss_mib(pid))
                return peak - rss_before < 160

            # 5 s, within the 10 s write timeout: they leave first. Measured: 90 -> 204 -> 91
            # MiB; without the budget the peak was 474, and without node.process.malloc the
            # memory stayed at the peak (the 188 -> 780 -> 780).
            observe(5, bounded, "the RSS within 160 MiB of the start", interval=0.05)
            try:
                node.rpc("/v1/chain/get_block", {"block_num_or_id": num})
                raise AssertionError("a big answer was sent past the budget")
            except urllib.error.HTTPError as err:
                assert (err.code, json.loads(err.read())["error"]["name"]) == (503, "busy")
            info_status = get_info(node.url)[0]
        finally:
            for sock in held:
                sock.close()
    wait_until(
        lambda: rss_mib(pid) - rss_before < 15,
        3,
        f"the RSS back within 15 MiB of the start, {rss_before:.0f} MiB",
        interval=0.05,
    )
    rss_after = rss_mib(pid)
    print(f"RSS {rss_before:.0f} -> peak {peak:.0f} -> {rss_after:.0f} MiB after close")
    assert node.running, node.tail()
    assert info_status == 200
    assert (
        len(node.rpc("/v1/chain/get_block", {"block_num_or_id": num})["transactions"])
        == BIG_BLOCK_TXS
    )


def sock_send_queue(sock: socket.socket) -> int:
    """Bytes waiting in ``sock``'s receive queue (what the node sent and it did not read)."""
    import fcntl
    import termios

    return int.from_bytes(fcntl.ioctl(sock, termios.FIONREAD, b"\0\0\0\0"), "little")


def test_a_bad_peer_host_is_a_400_and_at_start_a_one_line_error(
    nodes: Nodes, tmp_path: Path
) -> None:
    """/v1/net/connect with a 64-character label or an empty one answers 400 with a JSON
    reason and the node stays up; the same host in --p2p-peer-address stops the node at
    start with one line and a non-zero exit."""
    node, admin_port = producer(nodes, tmp_path)
    admin = f"http://127.0.0.1:{admin_port}/v1/net/connect"
    for host in ("a" * 64 + ".example", "a..b"):
        request = urllib.request.Request(
            admin,
            data=json.dumps({"address": f"{host}:9876"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            urllib.request.urlopen(request, timeout=5)
            raise AssertionError(f"{host} was accepted")
        except urllib.error.HTTPError as err:
            assert err.code == 400
            assert json.loads(err.read())["error"]["name"] == "invalid_address"
    observe(1, lambda: node.running, "the node running after the bad hosts", interval=0.1)
    assert get_info(node.url)[0] == 200, node.tail()
    assert node.stop() == 0
    bad = "a" * 64 + ".example:9876"
    run = subprocess.run(
        [str(BIN / "bor-node"), "run", "--data-dir", str(node.data_dir), "--p2p-peer-address", bad],
        capture_output=True,
        timeout=30,
    )
    assert run.returncode != 0
    lines = run.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "p2p-peer-address" in lines[0], run.stderr


def test_the_admin_listener_refuses_what_another_site_may_send(
    nodes: Nodes, tmp_path: Path
) -> None:
    """Without a token, the admin listener refuses a "simple" cross-site connect (text/plain,
    Origin: http://evil.example: 403), a form-encoded create_snapshot (415) and a GET of it
    (405), and still serves its own JSON requests."""
    node, admin_port = producer(nodes, tmp_path)
    base = f"http://127.0.0.1:{admin_port}"

    def post(path: str, body: bytes, headers: dict[str, str]) -> int:
        request = urllib.request.Request(base + path, data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as err:
            return err.code

    connect = json.dumps({"address": "127.0.0.1:9"}).encode()
    evil = {"Origin": "http://evil.example"}
    assert post("/v1/net/connect", connect, {"Content-Type": "text/plain"} | evil) == 403
    assert post("/v1/net/connect", connect, {"Content-Type": "text/plain"}) == 415
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert post("/v1/producer/create_snapshot", b"a=b", form) == 415
    try:
        urllib.request.urlopen(base + "/v1/producer/create_snapshot", timeout=5)
        raise AssertionError("GET create_snapshot served")
    except urllib.error.HTTPError as err:
        assert err.code == 405
    own = {"Content-Type": "application/json", "Origin": base}
    assert post("/v1/net/connect", connect, own) == 200
    assert node.running
