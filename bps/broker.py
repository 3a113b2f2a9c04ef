"""One broker: its NATS server's sidecar, the anchorer, and the follower that keeps the
directory as the chain has it (reloaded when a block carries an action of the contract that
changes brokers, tenants, members, topics or ACLs; anchors change none of those).

The anchorer runs in a process of its own (``anchor``, started and restarted by the broker's
process) with its own connections and directory: it reads and hashes every message its
partitions receive, and beside the sidecar, on its loop or on a thread sharing its
interpreter, that work came between a producer's batch and its acknowledgement (the tail of
produce latency)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import nats
from aiohttp import web
from nats.aio.client import Client as Nats

from bor_client import ActionsFrame, AsyncClient, ClientError, Signer
from bps.anchorer import Anchorer
from bps.directory import CONTRACT, Directory
from bps.sidecar import Sidecar
from bps.streams import Streams
from chain.core.primitives.crypto import PrivateKey

log = logging.getLogger("bps.broker")
QUIET = frozenset({"anchor", "setenckey"})


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    name: str
    key: PrivateKey
    node_url: str
    nats_url: str
    nats_user: str
    nats_password: str
    host: str
    port: int
    cluster_size: int = 3
    anchor_interval_s: float = 0.5


async def follow(client: AsyncClient, directory: Directory) -> None:
    """Reload the directory whenever a block changes it; forever, resuming after drops."""
    while True:
        try:
            async with client.stream("actions", accounts=[CONTRACT]) as stream:
                async for frame in stream:
                    if isinstance(frame, ActionsFrame) and any(
                        a.get("name") not in QUIET for a in frame.actions
                    ):
                        await directory.load()
        except (ClientError, OSError) as err:
            log.warning("the chain's stream broke (%s); following again", err)
            await asyncio.sleep(1)


async def connect(config: BrokerConfig) -> Nats:
    return await nats.connect(
        config.nats_url,
        user=config.nats_user,
        password=config.nats_password,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.2,
    )


async def anchor(config: BrokerConfig) -> None:
    """The anchorer and a follower of its own directory, until cancelled."""
    nc = await connect(config)
    async with AsyncClient(config.node_url, Signer([config.key.to_text()])) as client:
        directory = Directory(client)
        await directory.load()
        streams = Streams(nc, config.cluster_size)
        anchorer = Anchorer(
            config.name, config.key, client, directory, streams, config.anchor_interval_s
        )
        await asyncio.gather(follow(client, directory), anchorer.run())


async def run(config: BrokerConfig, ready: asyncio.Event | None = None) -> None:
    nc = await connect(config)
    async with AsyncClient(config.node_url, Signer([config.key.to_text()])) as client:
        directory = Directory(client)
        await directory.load()
        streams = Streams(nc, config.cluster_size)
        sidecar = Sidecar(config.name, client, directory, streams)
        runner = web.AppRunner(sidecar.app(), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, config.host, config.port).start()
        log.info("broker %s serving on %s:%d", config.name, config.host, config.port)
        if ready is not None:
            ready.set()
        try:
            await follow(client, directory)
        finally:
            await runner.cleanup()
            await nc.close()
