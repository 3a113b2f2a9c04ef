"""A partition's reader on a real JetStream server: reading on after a full batch takes the
batch read ahead, in order, with nothing skipped or repeated; reading from another offset
drops what was held ahead; a reader without read-ahead reads the same; waiting for a
stream's leader ends, one way or the other."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator

import nats
import pytest
from nats.js.api import StreamConfig

from bps.cluster import server_binary
from bps.errors import Unavailable
from bps.streams import Reader, await_leader, stream_name, subject
from tests.integration.conftest import free_port
from tests.support.wait import wait_until


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    store = tmp_path_factory.mktemp("js")
    process = subprocess.Popen(
        [server_binary(), "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(store)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"nats://127.0.0.1:{port}"
        wait_until(lambda: asyncio.run(_reachable(url)), 20, "nats-server up")
        yield url
    finally:
        process.terminate()
        process.wait(10)


async def _reachable(url: str) -> bool:
    try:
        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=1)
    except Exception:
        return False
    await nc.close()
    return True


async def _read_all(url: str, read_ahead: bool) -> tuple[list[int], list[int], list[bytes]]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    topic_id = 7 if read_ahead else 8
    await js.add_stream(
        StreamConfig(name=stream_name(topic_id, 0), subjects=[subject(topic_id, 0)])
    )
    for i in range(1, 251):
        await js.publish(subject(topic_id, 0), b"m%d" % i)
    reader = Reader(js, topic_id, 0, read_ahead=read_ahead)
    try:
        on: list[int] = []
        while len(on) < 250:
            got = await reader.read(len(on) + 1, 40, 1.0)
            assert got, f"nothing after offset {len(on)}"
            on.extend(m.offset for m in got)
        await reader.read(1, 40, 1.0)  # full: 41-80 read ahead
        part = [m.offset for m in await reader.read(41, 5, 1.0)]  # 46-80 held
        assert part == [41, 42, 43, 44, 45]
        back = [m.offset for m in await reader.read(101, 5, 1.0)]
        payloads = [m.payload for m in await reader.read(106, 3, 1.0)]
    finally:
        await reader.close()
        await nc.close()
    return on, back, payloads


@pytest.mark.parametrize("read_ahead", [True, False])
def test_reading_on_and_back(server: str, read_ahead: bool) -> None:
    """Offsets 1-250 in batches of 40 come once each and in order; then, with 46-80 held
    ahead, 101-105 and 106-108 come from the stream, not from what was held."""
    on, back, payloads = asyncio.run(_read_all(server, read_ahead))
    assert on == list(range(1, 251))
    assert back == [101, 102, 103, 104, 105]
    assert payloads == [b"m106", b"m107", b"m108"]


def test_await_leader_returns_for_a_stream_and_refuses_one_that_never_comes(server: str) -> None:
    """A stream that exists (on one server it leads itself) is ready at once; a name with no
    stream behind it is Unavailable once the timeout has passed, not a hang."""

    async def go() -> float:
        nc = await nats.connect(server)
        js = nc.jetstream(timeout=1)
        try:
            await js.add_stream(StreamConfig(name="LED", subjects=["led"]))
            await await_leader(js, "LED", timeout=0.5)
            started = time.monotonic()
            with pytest.raises(Unavailable, match=r"stream NONE has no leader after 0\.3 s"):
                await await_leader(js, "NONE", timeout=0.3)
            return time.monotonic() - started
        finally:
            await nc.close()

    assert 0.3 <= asyncio.run(go()) < 5
