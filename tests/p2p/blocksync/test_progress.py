"""Block-sync progress: rates, ETA and when a progress line is due, with a fake clock."""

from __future__ import annotations

from p2p.blocksync.manager import Stage, SyncManager
from p2p.blocksync.progress import MAX_SAMPLES, Progress, SyncProgress
from tests.p2p.configs import sync_config


def stage(sync: SyncManager) -> Stage:
    return sync.stage  # read through a call: mypy would narrow the attribute across events


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rates_are_the_slope_of_head_and_transactions_over_the_window() -> None:
    """200 blocks of 5 transactions in 2 s read as 100 blocks/s, 500 tx/s, and the ETA is
    what is left at that rate."""
    meter = SyncProgress(window=10.0)
    meter.advanced(0.0, 0, 0)
    for i in range(1, 201):
        meter.advanced(i / 100, i, 5)
    reading = meter.reading(2.0, head=200, target=1200)
    assert reading == Progress(200, 1200, 100.0, 500.0, 10.0)


def test_rates_fall_while_nothing_comes_and_reach_zero_after_a_window() -> None:
    """A stalled sync does not go on showing its old rate: the rate is taken up to now, and
    once a whole window passes with no block it is 0 and there is no ETA."""
    meter = SyncProgress(window=10.0)
    meter.advanced(0.0, 0, 0)
    meter.advanced(5.0, 500, 1000)
    assert meter.rates(5.0) == (100.0, 200.0)
    assert meter.rates(10.0) == (50.0, 100.0)
    meter.advanced(12.0, 500, 0)  # an update with no block: the first sample leaves
    assert meter.rates(30.0) == (0.0, 0.0)
    assert meter.reading(30.0, head=500, target=900).eta_s is None


def test_a_fork_switch_lowering_the_head_is_no_negative_rate() -> None:
    """Our head going back (a fork switch) reads as no progress, never as a negative rate."""
    meter = SyncProgress()
    meter.advanced(0.0, 100, 0)
    meter.advanced(1.0, 97, 0)
    assert meter.rates(1.0) == (0.0, 0.0)


def test_nothing_left_means_no_eta() -> None:
    """At (or past) the target there is no ETA, whatever the rate."""
    meter = SyncProgress()
    meter.advanced(0.0, 0, 0)
    meter.advanced(1.0, 50, 0)
    assert meter.reading(1.0, head=50, target=50).eta_s is None
    assert meter.reading(1.0, head=50, target=40).eta_s is None


def test_samples_are_bounded() -> None:
    """However many updates come within a window, at most MAX_SAMPLES are kept, and the rate
    over what is kept is still the true one."""
    meter = SyncProgress(window=1000.0)
    for i in range(3 * MAX_SAMPLES):
        meter.advanced(i / 1000, i, 1)
    assert len(meter._samples) == MAX_SAMPLES
    blocks, txs = meter.rates((3 * MAX_SAMPLES - 1) / 1000)
    assert round(blocks) == round(txs) == 1000


def test_a_line_is_due_every_interval_of_a_catch_up_and_never_in_sync() -> None:
    """The first line comes one interval into a catch-up, then one per interval; in sync none
    is due, and a new catch-up starts the count again."""
    meter = SyncProgress(interval=5.0)
    assert not meter.due(0.0, catching_up=False)
    assert not meter.due(1.0, catching_up=True)  # catch-up begins
    assert not meter.due(5.9, catching_up=True)
    assert meter.due(6.0, catching_up=True)
    assert not meter.due(10.0, catching_up=True)
    assert meter.due(11.0, catching_up=True)
    assert not meter.due(20.0, catching_up=False)
    assert not meter.due(21.0, catching_up=True)
    assert not meter.due(25.0, catching_up=True)
    assert meter.due(26.0, catching_up=True)


def test_an_interval_of_zero_logs_nothing() -> None:
    """progress_interval 0 turns the lines off."""
    meter = SyncProgress(interval=0.0)
    assert not any(meter.due(float(t), catching_up=True) for t in range(100))


def test_the_sync_manager_reports_progress_of_a_catch_up_towards_its_target() -> None:
    """A manager catching up to a peer's LIB gives, an interval in, a reading with that target,
    the rate its chain advanced at and the time left; its status shows the same figures, and
    in sync no line is due."""
    clock = Clock()
    sync = SyncManager(
        config=sync_config(sync_fetch_span=100, sync_progress_interval_ms=5000), clock=clock
    )
    sync.peer_position("a", lib=1000, head=1002)
    assert stage(sync) == Stage.LIB_CATCHUP
    assert sync.progress_due() is None  # the catch-up's start
    for num in range(1, 501):
        clock.now += 0.009
        sync.block_received("a", num)
        sync.chain_advanced(num, max(0, num - 10), txs=2)
    assert sync.progress_due() is None, "under an interval in"
    clock.now += 0.5
    reading = sync.progress_due()
    assert reading is not None
    assert (reading.head, reading.target) == (500, 1000)
    assert 85 <= reading.blocks_per_s <= 100 and 170 <= reading.txs_per_s <= 200
    assert reading.eta_s is not None and 5.0 <= reading.eta_s <= 6.0
    status = sync.status()
    assert (status.blocks_per_s, status.txs_per_s) == (
        reading.blocks_per_s,
        reading.txs_per_s,
    )
    assert (status.eta_s, status.peers) == (reading.eta_s, 1)
    for num in range(501, 1003):
        sync.block_received("a", num)
        sync.chain_advanced(num, num - 2)
    assert stage(sync) == Stage.IN_SYNC
    clock.now += 60
    assert sync.progress_due() is None


def test_a_catch_up_rate_counts_from_the_catch_up_not_the_idle_time_before() -> None:
    """A node idle at head 10 for a minute, then catching up 100 blocks in 1 s, reads
    100 blocks/s, not 100 over the idle span as well."""
    clock = Clock()
    sync = SyncManager(config=sync_config(sync_fetch_span=100), clock=clock)
    sync.chain_advanced(10, 9)
    clock.now += 5
    sync.peer_position("a", lib=1000, head=1002)
    for num in range(11, 111):
        clock.now += 0.01
        sync.block_received("a", num)
        sync.chain_advanced(num, num - 1)
    assert sync.progress().blocks_per_s == 100.0
