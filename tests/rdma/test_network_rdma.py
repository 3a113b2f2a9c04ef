"""Networks in one process whose sessions run over RDMA: bad input is handled as on TCP."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from p2p.rdma.device import RdmaDevice, detect
from tests.node.test_network import Members, ranges_beyond_the_head_get_the_asker_sent_away, run


def test_ranges_beyond_our_head_over_rdma_get_the_peer_sent_away(tmp_path: Path) -> None:
    """Over RDMA as over TCP, a peer that keeps asking for ranges beyond our head is sent away."""
    info = detect()
    if not info.available:
        if os.environ.get("BOR_RDMA_REQUIRED"):
            pytest.fail(f"RDMA required but unavailable: {info.reason}")
        pytest.skip(f"no RDMA here: {info.reason}")

    async def body(members: Members) -> None:
        device = RdmaDevice(info, channels=4, slots=8, slot_size=4096)
        device.start(asyncio.get_running_loop())
        try:
            transport = await ranges_beyond_the_head_get_the_asker_sent_away(members, device)
            assert transport == "rdma"
        finally:
            await members.stop()
            members.made.clear()
            device.close()

    run(tmp_path, body)
