"""Wiring: build the chain, RPC and producer from a NodeConfig and run them until stopped."""

from __future__ import annotations

import asyncio
import signal
import time

import structlog
from aiohttp import web

from chain.block import SignedBlock
from chain.controller import Chain
from chain.crypto import recover_many
from chain.mempool import Mempool
from chain.sigpool import ParallelRecoverer
from chain.store import BlockStore
from genesis.model import load_genesis
from node.admission import Admitter
from node.config import NodeConfig
from node.errors import NodeError
from node.http import make_app
from node.metrics import NodeMetrics
from node.producer import ProducerLoop
from node.rpc import Api
from node.runner import ChainRunner, InclusionWatch

log = structlog.get_logger("node")


def open_chain(config: NodeConfig, recoverer: ParallelRecoverer | None = None) -> Chain:
    genesis = load_genesis(config.genesis_json)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    store = BlockStore(str(config.data_dir / "blocks"))
    try:
        return Chain(
            store,
            genesis.to_initial_state(),
            mempool=Mempool(config.max_mempool_txs, config.max_mempool_per_account),
            recoverer=recoverer or recover_many,
        )
    except BaseException:
        store.close()
        raise


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.metrics = NodeMetrics()
        self.watch = InclusionWatch()
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    def _on_block(self, block: SignedBlock) -> None:
        self.watch.included([t.id for t in block.transactions], block.num)

    async def run(self) -> None:
        config = self.config
        recoverer = (
            ParallelRecoverer(config.signature_workers) if config.signature_workers else None
        )
        chain = open_chain(config, recoverer)
        runner = ChainRunner(chain)
        admitter = Admitter(runner, self.metrics)
        api = Api(runner, self.metrics, self.watch, admitter)
        app = make_app(api, self.metrics, config.max_http_body_bytes)
        http = web.AppRunner(app, access_log=None)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stop)
        try:
            await http.setup()
            site = web.TCPSite(http, config.http_host, config.http_port)
            try:
                await site.start()
            except OSError as err:
                where = f"{config.http_host}:{config.http_port}"
                raise NodeError(f"cannot serve the RPC on {where}: {err.strerror}") from err
            log.info(
                "node_started",
                chain_id=chain.chain_id.hex(),
                head=chain.head.num,
                lib=chain.lib,
                rpc=f"http://{config.http_host}:{config.http_port}",
                started_at=time.time(),
            )
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(admitter.run(), name="admission")]
                if config.producers:
                    producer = ProducerLoop(
                        runner, config.producers, config.signing_keys, self.metrics, self._on_block
                    )
                    tasks.append(tg.create_task(producer.run(), name="producer"))
                await self._stop.wait()
                for task in tasks:
                    task.cancel()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            await http.cleanup()
            runner.close()
            chain.store.close()
            if recoverer is not None:
                recoverer.close()
            log.info("node_stopped", head=chain.head.num, lib=chain.lib)
