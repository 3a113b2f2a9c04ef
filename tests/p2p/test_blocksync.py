"""The block sync reactor acts on its sync manager's drops: a ban for a peer shown to lie, a
plain send-away for one that was only slow."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import cast

from p2p.block_relay import BlockRelay
from p2p.blocksync import BlockSync
from p2p.messages import GoAwayReason
from p2p.service import ChainService
from p2p.sync import DropPeer, SyncConfig
from tests.p2p.fakes import FakePeer, FakeSwitch


def test_a_drop_with_a_ban_punishes_and_one_without_only_sends_away() -> None:
    """DropPeer(ban=True) goes to the switch's punish (ban and go_away), DropPeer(ban=False)
    to its send_away alone."""

    async def body() -> None:
        chain = SimpleNamespace(position=lambda: SimpleNamespace(head_num=1, lib_num=1))
        sync = BlockSync(cast(ChainService, chain), SyncConfig(), cast(BlockRelay, None))
        switch = FakeSwitch([FakePeer("liar"), FakePeer("slow")])
        sync.bind(switch)
        sync._act(
            [
                DropPeer("liar", GoAwayReason.BENIGN_OTHER, "sent none"),
                DropPeer("slow", GoAwayReason.BENIGN_OTHER, "2 ranges late", ban=False),
            ]
        )
        assert switch.punished == [("liar", GoAwayReason.BENIGN_OTHER, "sent none")]
        assert switch.sent_away == ["slow"]

    asyncio.run(body())
