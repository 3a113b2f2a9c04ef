"""Moving a fresh TCP connection to RDMA, and backing off RDMA with a node that failed.

After both handshakes, when both sides advertised RDMA, the dialling side offers its queue
pair and ring over TCP (``RdmaSetup`` OFFER), the listening side answers ACCEPT with its own
or DECLINE with a reason, and each proves the path with a probe write the other must see in
time. Any failure then, or later under a live session (a broken or silent channel), keeps
the connection — or the next one — on TCP with that node for a while, doubling each time.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from p2p.errors import ChannelClosed, HandshakeFailed, MalformedMessage
from p2p.rdma.channel import RdmaChannel
from p2p.rdma.device import RdmaDevice
from p2p.rdma.verbs import RdmaFailure
from p2p.rdma.wire import Endpoint
from p2p.transport.channel import Channel
from p2p.wire.messages import GoAwayReason, RdmaSetup, RdmaStep, Time

log = structlog.get_logger("p2p")

RETRY_SECONDS = 30.0  # after an RDMA failure with a node: TCP, then RDMA again later
MAX_RETRY_SECONDS = 900.0


class RdmaUpgrade:
    def __init__(self, device: RdmaDevice, probe_timeout: float = 5.0) -> None:
        self.device = device
        self.probe_timeout = probe_timeout
        self._backoff: dict[bytes, tuple[float, int]] = {}

    def offered(self, node_id: bytes) -> bool:
        """Whether we advertise RDMA to ``node_id``: no recent RDMA failure with it."""
        until = self._backoff.get(node_id)
        return until is None or until[0] <= time.monotonic()

    def failed(self, node_id: bytes, why: str) -> None:
        _, count = self._backoff.get(node_id, (0.0, 0))
        seconds = min(RETRY_SECONDS * 2**count, MAX_RETRY_SECONDS)
        self._backoff[node_id] = (time.monotonic() + seconds, count + 1)
        log.warning("rdma_failed", node=node_id.hex()[:16], why=why, retry_in_s=seconds)

    async def upgrade(self, tcp: Channel, node_id: bytes, dialed: bool) -> Channel:
        """Exchange queue pairs over ``tcp`` and prove the path with a probe each way.
        Returns the RDMA channel (which owns ``tcp`` from then on), or ``tcp`` if either side
        declines. A probe that fails ends the connection (HandshakeFailed, retryable)."""
        rdma: RdmaChannel | None = None
        try:
            if dialed:
                try:
                    rdma = RdmaChannel(self.device, tcp.remote, control=tcp)
                except RdmaFailure as err:
                    await tcp.send(RdmaSetup(RdmaStep.DECLINE, (), str(err)[:200]))
                    self.failed(node_id, str(err))
                    return tcp
                await tcp.send(RdmaSetup(RdmaStep.OFFER, rdma.endpoint().to_wire()))
                reply = await tcp.recv()
                if not isinstance(reply, RdmaSetup) or reply.step == RdmaStep.OFFER:
                    raise HandshakeFailed(GoAwayReason.FATAL_OTHER, "expected rdma_setup")
                if reply.step == RdmaStep.DECLINE:
                    log.info("rdma_declined", why=reply.detail)
                    self.failed(node_id, f"declined: {reply.detail}")
                    await rdma.release()
                    return tcp
                rdma.connect(Endpoint.from_wire(reply.endpoint))
                await rdma.send(Time(0, 0, time.time_ns(), 0))
                await self._probe(rdma)
            else:
                offer = await tcp.recv()
                if not isinstance(offer, RdmaSetup) or offer.step == RdmaStep.ACCEPT:
                    raise HandshakeFailed(GoAwayReason.FATAL_OTHER, "expected rdma_setup")
                if offer.step == RdmaStep.DECLINE:
                    log.info("rdma_declined", why=offer.detail)
                    return tcp
                try:
                    rdma = RdmaChannel(self.device, tcp.remote, control=tcp)
                    rdma.connect(Endpoint.from_wire(offer.endpoint))
                except (RdmaFailure, MalformedMessage) as err:
                    if rdma is not None:
                        await rdma.release()
                    await tcp.send(RdmaSetup(RdmaStep.DECLINE, (), str(err)[:200]))
                    self.failed(node_id, str(err))
                    return tcp
                await tcp.send(RdmaSetup(RdmaStep.ACCEPT, rdma.endpoint().to_wire()))
                await self._probe(rdma)
                await rdma.send(Time(0, 0, time.time_ns(), 0))
        except (ChannelClosed, MalformedMessage, TimeoutError) as err:
            if rdma is not None:
                await rdma.close()
            self.failed(node_id, f"set-up failed: {type(err).__name__}: {err}")
            raise HandshakeFailed(GoAwayReason.BENIGN_OTHER, "RDMA set-up failed") from err
        except BaseException:
            if rdma is not None:
                await rdma.close()
            raise
        self._backoff.pop(node_id, None)
        log.info("rdma_connected", remote=tcp.remote)
        return rdma

    async def _probe(self, rdma: RdmaChannel) -> None:
        async with asyncio.timeout(self.probe_timeout):
            probe = await rdma.recv()
        if not isinstance(probe, Time):
            raise MalformedMessage("RDMA probe is not a time message")
