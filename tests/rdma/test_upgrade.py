"""The RDMA upgrade's decline paths: whoever cannot set up RDMA says so, and the connection
stays on TCP — with an in-memory channel pair and a device whose buffer pool is exhausted
(no verbs are reached on these paths, so they run everywhere)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

import pytest

from p2p.errors import HandshakeFailed
from p2p.rdma.upgrade import RdmaUpgrade
from p2p.rdma.verbs import RdmaFailure
from p2p.wire.messages import GoAwayReason, RdmaSetup, RdmaStep, Time
from tests.support.channels import MemoryChannel


@dataclass
class ExhaustedDevice:
    """Stands in for ``RdmaDevice`` with every buffer region taken."""

    slots: int = 8
    slot_size: int = 4096

    def take_region(self) -> int:
        raise RdmaFailure("no free RDMA buffer region (raise rdma-max-peers)")


def upgrade_with(device: Any) -> RdmaUpgrade:
    return RdmaUpgrade(device, probe_timeout=1.0)


def test_a_dialler_whose_pool_is_exhausted_declines_and_stays_on_tcp() -> None:
    """The dialling side cannot make an RDMA channel: it sends DECLINE with the reason,
    keeps the TCP channel, and backs off RDMA with that node."""

    async def main() -> None:
        ours, theirs = MemoryChannel.pair()
        upgrade = upgrade_with(ExhaustedDevice())
        node = os.urandom(32)
        assert upgrade.offered(node)
        kept = await upgrade.upgrade(ours, node, dialed=True)
        assert kept is ours and not ours.closed
        decline = await theirs.recv()
        assert isinstance(decline, RdmaSetup) and decline.step == RdmaStep.DECLINE
        assert "no free RDMA buffer region" in decline.detail
        assert not upgrade.offered(node), "RDMA with that node waits for its back-off"
        await theirs.send(Time(0, 0, 1, 0))
        assert await ours.recv() == Time(0, 0, 1, 0), "the TCP channel still carries messages"

    asyncio.run(main())


def test_a_listener_told_decline_stays_on_tcp() -> None:
    """The listening side receives DECLINE instead of an offer: it keeps the TCP channel."""

    async def main() -> None:
        ours, theirs = MemoryChannel.pair()
        upgrade = upgrade_with(ExhaustedDevice())
        await theirs.send(RdmaSetup(RdmaStep.DECLINE, (), "no device today"))
        kept = await upgrade.upgrade(ours, os.urandom(32), dialed=False)
        assert kept is ours and not ours.closed

    asyncio.run(main())


def test_a_listener_whose_pool_is_exhausted_answers_decline() -> None:
    """An offer arrives but our pool is exhausted: we answer DECLINE and stay on TCP."""

    async def main() -> None:
        ours, theirs = MemoryChannel.pair()
        upgrade = upgrade_with(ExhaustedDevice())
        endpoint = (1, 2, "0000:0000:0000:0000:0000:ffff:0a00:0001", 3, 4096, 5, 8, 4096)
        await theirs.send(RdmaSetup(RdmaStep.OFFER, endpoint))
        node = os.urandom(32)
        kept = await upgrade.upgrade(ours, node, dialed=False)
        assert kept is ours
        answer = await theirs.recv()
        assert isinstance(answer, RdmaSetup) and answer.step == RdmaStep.DECLINE
        assert not upgrade.offered(node)

    asyncio.run(main())


def test_a_listener_sent_something_else_than_an_offer_refuses_the_connection() -> None:
    """Anything but rdma_setup where the offer belongs ends the handshake (FATAL_OTHER)."""

    async def main() -> None:
        ours, theirs = MemoryChannel.pair()
        await theirs.send(Time(0, 0, 1, 0))
        with pytest.raises(HandshakeFailed) as refused:
            await upgrade_with(ExhaustedDevice()).upgrade(ours, os.urandom(32), dialed=False)
        assert refused.value.reason == GoAwayReason.FATAL_OTHER

    asyncio.run(main())
