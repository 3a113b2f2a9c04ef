"""TLS between real node processes: what a tap on the wire sees, a relay that terminates TLS
with its own certificate, and one end with ``p2p-tls = on`` against one with ``off``."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from chain.core.primitives.crypto import PrivateKey
from node.commands.devnet import plan, prepare
from p2p.errors import P2PError
from p2p.transport.tcp import TcpChannel
from p2p.transport.tls import TlsIdentity, negotiate, preamble
from p2p.wire.messages import GoAway, GoAwayReason, Handshake, Message
from tests.integration.conftest import NodeProcess, Nodes, free_port, wait_for
from tests.integration.network.test_network import _transfer_body

T = TypeVar("T")
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Background:
    """An event loop in a thread, serving the taps and relays between node processes."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.servers: list[asyncio.Server] = []

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def serve(self, handler: Handler) -> int:
        """Listen on a loopback port for ``handler``; returns the port."""

        async def start() -> asyncio.Server:
            return await asyncio.start_server(handler, "127.0.0.1", 0)

        server = self.run(start())
        self.servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    def close(self) -> None:
        async def shutdown() -> None:
            for server in self.servers:
                server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.run(shutdown())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def background() -> Iterator[Background]:
    bg = Background()
    yield bg
    bg.close()


class Tap:
    """A TCP proxy to ``target`` that keeps a copy of every byte it forwards, both ways."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.captured = bytearray()

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(1 << 16):
                    self.captured += data
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass  # one side went away; the other is closed below
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))


class Relay:
    """A man in the middle that terminates TLS at each end with a certificate of its own and
    forwards every message, decrypted, in between (keeping what it forwarded)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.identity = TlsIdentity.generate()
        self.forwarded: list[tuple[str, Message]] = []

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        dialler = TcpChannel(reader, writer)
        listener = await TcpChannel.connect("127.0.0.1", self.target)
        try:
            await negotiate(dialler, self.identity, dialed=False, timeout=5)
            await negotiate(listener, self.identity, dialed=True, timeout=5)
        except P2PError:
            await dialler.close()
            await listener.close()
            return

        async def pump(src: TcpChannel, dst: TcpChannel, direction: str) -> None:
            try:
                while True:
                    message = await src.recv()
                    self.forwarded.append((direction, message))
                    await dst.send(message)
            except P2PError:
                pass
            finally:
                await dst.close()

        await asyncio.gather(
            pump(dialler, listener, "to_listener"), pump(listener, dialler, "to_dialler")
        )

    def seen(self, direction: str, kind: type) -> list[Message]:
        return [m for d, m in self.forwarded if d == direction and isinstance(m, kind)]


def producer(nodes: Nodes, tmp: Path, tls: str) -> tuple[NodeProcess, int]:
    """A one-producer chain's node with ``p2p-tls = tls``, and its p2p port. The admin port is
    its own: plan's default (the RPC port + 1) is the p2p port free_port() picks next."""
    (node,) = plan(1, ("127.0.0.1", free_port()), free_port(), free_port())
    prepare(tmp, [node])
    return nodes.run(tmp / node.name, "--p2p-tls", tls, rpc_port=node.rpc[1]), node.p2p[1]


def joiner(nodes: Nodes, tmp: Path, port: int, tls: str) -> NodeProcess:
    """A fresh node of the same chain that dials ``port`` with ``p2p-tls = tls``."""
    data = tmp / "joiner"
    data.mkdir()
    shutil.copy(tmp / "genesis.json", data / "genesis.json")
    return nodes.run(data, "--p2p-peer-address", f"127.0.0.1:{port}", "--p2p-tls", tls)


def events(node: NodeProcess, name: str) -> list[dict[str, Any]]:
    """The node's log lines of event ``name``."""
    found = []
    for line in node.log.read_text().splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("event") == name:
                found.append(entry)
    return found


@pytest.mark.parametrize("tls", ["on", "off"])
def test_a_tap_between_two_nodes_sees_no_block_transaction_or_chain_with_tls(
    nodes: Nodes, tmp_path: Path, background: Background, tls: str
) -> None:
    """A joiner syncs and relays a transfer through a tap: with p2p-tls = on the tap sees
    TLS 1.3 and none of the chain id, block ids or the transfer's signature; with off (the
    control, showing the tap can see them) it sees all of them."""
    source, p2p_port = producer(nodes, tmp_path, tls)
    source.start(wait_head=3)
    tap = Tap(p2p_port)
    node = joiner(nodes, tmp_path, background.serve(tap.connection), tls).start()
    node.wait_for_head(5)
    keys = json.loads((tmp_path / "keys.json").read_text())
    _, body = _transfer_body(node.info(), PrivateKey.from_text(keys["alice"]), "over the tap")
    pushed = node.rpc("/v1/chain/push_transaction", body | {"mode": "commit"})
    assert pushed["status"] == "included", pushed
    head = node.wait_for_head(pushed["block_num"] + 1)["head_block_num"]
    secrets = {
        "chain id": bytes.fromhex(node.info()["chain_id"]),
        "transfer signature": bytes.fromhex(body["signatures"][0]),
    }
    for num in range(1, head):  # block n's id travels in block n + 1's header
        block = node.rpc("/v1/chain/get_block", {"block_num_or_id": num})
        secrets[f"block {num} id"] = bytes.fromhex(block["id"])
    wire = bytes(tap.captured)
    visible = sorted(name for name, secret in secrets.items() if secret in wire)
    assert wire.startswith(preamble(tls == "on"))
    if tls == "on":
        assert visible == []
        sessions = events(node, "p2p_tls") + events(source, "p2p_tls")
        assert len(sessions) >= 2 and {s["version"] for s in sessions} == {"TLSv1.3"}
    else:
        assert visible == sorted(secrets)
        assert events(node, "p2p_tls") == []


def test_a_relay_terminating_tls_with_its_own_certificate_is_refused_by_both_nodes(
    nodes: Nodes, tmp_path: Path, background: Background
) -> None:
    """A man in the middle that completes TLS with both nodes and forwards their messages
    gets both handshakes through, and each node refuses the other's (AUTHENTICATION): the
    signed certificate hashes differ. The joiner never syncs a block."""
    source, p2p_port = producer(nodes, tmp_path, "on")
    source.start(wait_head=2)
    relay = Relay(p2p_port)
    node = joiner(nodes, tmp_path, background.serve(relay.connection), "on").start()

    def refused(each: NodeProcess) -> bool:
        return any("relay terminating TLS" in r["why"] for r in events(each, "peer_refused"))

    wait_for(lambda: refused(node) and refused(source), 20, "both nodes to refuse the relay")
    # Both handshakes went through the relay: TLS at both ends worked, the binding did not.
    assert relay.seen("to_listener", Handshake) and relay.seen("to_dialler", Handshake)
    # The first go_away ends the relay's connection, so the second may not reach it.
    away = relay.seen("to_listener", GoAway) + relay.seen("to_dialler", GoAway)
    assert away and all(
        isinstance(m, GoAway) and m.reason == GoAwayReason.AUTHENTICATION for m in away
    )
    assert node.info()["head_block_num"] == 0
    assert source.rpc("/v1/net/peers")["peers"] == []


@pytest.mark.parametrize(("producer_tls", "joiner_tls"), [("on", "off"), ("off", "on")])
def test_one_end_with_tls_and_one_without_refuse_each_other_clearly(
    nodes: Nodes, tmp_path: Path, producer_tls: str, joiner_tls: str
) -> None:
    """p2p-tls differs: both nodes log a TLS_MISMATCH refusal naming both settings within
    seconds (no hang, no TLS error), and the joiner's dial status says why."""
    source, p2p_port = producer(nodes, tmp_path, producer_tls)
    source.start(wait_head=1)
    node = joiner(nodes, tmp_path, p2p_port, joiner_tls).start()

    def refused(each: NodeProcess, ours: str, theirs: str) -> bool:
        detail = f"peer has p2p-tls = {theirs} and this node p2p-tls = {ours}"
        return any(
            r["reason"] == "TLS_MISMATCH" and detail in r["why"]
            for r in events(each, "peer_refused")
        )

    wait_for(lambda: refused(node, joiner_tls, producer_tls), 10, "the joiner's refusal")
    wait_for(lambda: refused(source, producer_tls, joiner_tls), 10, "the producer's refusal")
    dialing = node.rpc("/v1/net/peers")["dialing"]
    assert [d["error"] for d in dialing] == ["refused: TLS_MISMATCH"]
    assert node.info()["head_block_num"] == 0
