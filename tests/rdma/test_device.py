"""The RDMA device resources and poller thread, on a real (Soft-RoCE) device."""

from __future__ import annotations

import asyncio
import os
import statistics
import time

import pytest

from p2p.rdma.channel import RdmaChannel
from p2p.rdma.device import RdmaDevice, RdmaInfo, detect
from p2p.rdma.verbs import RdmaFailure, load, open_comp_channel
from tests.support.wait import hold_async


def device_info() -> RdmaInfo:
    info = detect()
    if not info.available:
        if os.environ.get("BOR_RDMA_REQUIRED"):
            pytest.fail(f"RDMA required but unavailable: {info.reason}")
        pytest.skip(f"no RDMA here: {info.reason}")
    return info


def test_detection_names_the_device_and_a_roce_v2_gid() -> None:
    """Detection names the device and a RoCE v2 (IPv4-mapped) GID, with its index and the MTU."""
    info = device_info()
    assert info.device and info.gid.startswith("0000:0000:0000:0000:0000:ffff:")
    assert info.gid_index >= 0 and info.mtu > 0


def test_detection_explains_a_missing_device() -> None:
    """Detecting a device that does not exist reports it unavailable, naming it in the reason."""
    device_info()
    info = detect(device="nosuchdevice")
    assert not info.available and "nosuchdevice" in info.reason


def test_the_completion_channel_fd_is_found_on_either_pyverbs_generation() -> None:
    """The fd the poller waits on is the completion channel's: pyverbs' own ``fd`` where it
    has one (rdma-core >= 57), else the one new infinibandevent fd (44 to 56)."""
    info = device_info()
    v = load()
    ctx = v.Context(name=info.device)
    try:
        channel, fd = open_comp_channel(v, ctx)
        try:
            assert os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[infinibandevent]"
            assert fd == getattr(channel, "fd", fd)
        finally:
            channel.close()
    finally:
        ctx.close()


def test_an_idle_poller_does_not_hold_the_gil() -> None:
    """The poller waits in select (GIL released): the loop's timers stay on time. A poller
    holding the GIL through its 0.2 s wait would make a typical 10 ms sleep end 0.1 s late or
    more; the median is taken, so that one hiccup of an emulated guest on a busy host is not
    mistaken for that."""
    device = RdmaDevice(device_info(), channels=2, slots=4, slot_size=4096)

    async def main() -> list[float]:
        device.start(asyncio.get_running_loop())
        late: list[float] = []
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            t = time.monotonic()
            await hold_async(0.01, "a 10 ms timer, whose lateness is what is measured")
            late.append(time.monotonic() - t - 0.01)
        return late

    try:
        late = asyncio.run(main())
    finally:
        device.close()
    typical = statistics.median(late)
    assert typical < 0.05, f"a 10 ms sleep typically ended {typical * 1000:.0f} ms late"


def test_the_pool_uses_huge_pages_when_the_host_has_them() -> None:
    """The device's memory pool uses huge pages exactly when the host has some reserved."""
    device = RdmaDevice(device_info(), channels=2, slots=4, slot_size=4096)
    try:
        with open("/proc/sys/vm/nr_hugepages") as f:
            reserved = int(f.read()) > 0
        assert device.huge_pages == reserved
    finally:
        device.close()


def test_more_channels_than_regions_fail_with_rdma_failure() -> None:
    """Each channel takes one region of the pool: one channel more than the device was sized
    for fails with RdmaFailure naming the setting to raise (the dialler then DECLINEs and
    stays on TCP), and a closed channel's region serves the next one."""

    async def main() -> None:
        device = RdmaDevice(device_info(), channels=2, slots=4, slot_size=4096)
        device.start(asyncio.get_running_loop())
        channels = [RdmaChannel(device, "a"), RdmaChannel(device, "b")]
        try:
            with pytest.raises(RdmaFailure, match="rdma-max-peers"):
                RdmaChannel(device, "c")
            freed = channels[0]._region
            await channels.pop(0).close()
            channels.append(RdmaChannel(device, "c"))
            assert channels[-1]._region == freed
        finally:
            for channel in channels:
                await channel.close()
            device.close()

    asyncio.run(main())
