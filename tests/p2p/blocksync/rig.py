"""The sync manager's test rig: a fake clock, a manager on the declared defaults, and a
peer delivering a range."""

from __future__ import annotations

from p2p.blocksync.manager import Stage, SyncManager
from tests.p2p.configs import sync_config


def stage(sync: SyncManager) -> Stage:
    return sync.stage


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def manager(**config: int | float) -> tuple[SyncManager, Clock]:
    clock = Clock()
    tuned = {"sync_fetch_span": 100, "sync_ranges": 3, "window": 1000, "timeout": 5.0}
    cfg = sync_config(**tuned | config)
    return SyncManager(config=cfg, clock=clock), clock


def deliver(sync: SyncManager, peer: str, start: int, end: int) -> list[object]:
    actions: list[object] = []
    for num in range(start, end + 1):
        actions += sync.block_received(peer, num)
        actions += sync.chain_advanced(num, max(0, num - 10))
    return actions


def deliver_only(sync: SyncManager, peer: str, start: int, end: int) -> list[object]:
    """Blocks arrive from ``peer`` without our chain moving (they do not become our head)."""
    actions: list[object] = []
    for num in range(start, end + 1):
        actions += sync.block_received(peer, num)
    return actions
