"""bench_sync's summary of repeated import/sync pairs (medians, and the ratio as the median
of the pairs' own ratios) and how often it asks a syncing node for its head."""

from __future__ import annotations

from scripts.bench_sync import POLL_MAX_S, POLL_MIN_S, POLL_START_S, poll_delay, summarise


def run(seconds: float) -> dict[str, float]:
    return {
        "seconds": seconds,
        "cpu_s": 1.0,
        "own_s": 1.0,
        "busiest_s": 1.0,
        "source_cpu_s": 0.1,
        "bytes": 2e6,
    }


def test_ratio_is_the_median_of_the_pairs_ratios() -> None:
    # Pair ratios 1.0, 0.5, 1.1: their median is 1.0 (the ratio of the medians, 22 / 20,
    # would be 1.1).
    imports = [run(10.0), run(40.0), run(22.0)]
    syncs = [run(10.0), run(80.0), run(20.0)]
    figures = summarise(imports, syncs, lib=100, txs=1000, size=10**6)
    assert figures["ratio_samples"] == [1.0, 0.5, 1.1]
    assert figures["ratio_sync_import"] == 1.0
    assert figures["import_s"] == 22.0
    assert figures["sync_s"] == 20.0
    assert figures["sync_tx_per_s"] == 50
    assert figures["sync_mb_per_s"] == 0.05  # the history's size over the median sync
    assert figures["pairs"] == 3


def test_ratio_follows_the_pairs_not_the_medians() -> None:
    # Pair ratios 1.0, 1.5, 1.0: their median is 1.0, while the medians alone (import 30 s,
    # sync 20 s) would say 1.5.
    imports = [run(10.0), run(30.0), run(60.0)]
    syncs = [run(10.0), run(20.0), run(60.0)]
    figures = summarise(imports, syncs, lib=100, txs=1000, size=10**6)
    assert figures["ratio_sync_import"] == 1.0
    assert figures["import_s"] / figures["sync_s"] == 1.5


def test_poll_delay_is_a_quarter_of_the_time_left_within_bounds() -> None:
    # 100 of 400 blocks in 10 s: 30 s left at that rate, a quarter of it capped at 0.25 s;
    # 399 of 400 in 20 s: 0.05 s left, 0.0125 s raised to the minimum; 392 of 400 in
    # 39.2 s: 0.8 s left, 0.2 s.
    assert poll_delay(100, 400, 10.0) == POLL_MAX_S
    assert poll_delay(399, 400, 20.0) == POLL_MIN_S
    assert poll_delay(392, 400, 39.2) == 0.2
    assert poll_delay(0, 400, 0.5) == POLL_START_S  # no rate to go by yet


def test_cores_used_is_the_median_of_the_runs_own() -> None:
    """Cores used (receiver, receiver with sender, import) is the median over the runs of
    each run's CPU seconds over its seconds, not the ratio of the medians."""
    # Receiver 3, 1 and 2 cores: median 2 (median CPU 30 s over median 20 s would say 1.5);
    # with the sender 4, 1.5 and 3.
    syncs = [
        {
            "seconds": 10.0,
            "cpu_s": 30.0,
            "own_s": 9.0,
            "busiest_s": 9.0,
            "source_cpu_s": 10.0,
            "bytes": 1.0,
        },
        {
            "seconds": 20.0,
            "cpu_s": 20.0,
            "own_s": 10.0,
            "busiest_s": 10.0,
            "source_cpu_s": 10.0,
            "bytes": 1.0,
        },
        {
            "seconds": 40.0,
            "cpu_s": 80.0,
            "own_s": 36.0,
            "busiest_s": 36.0,
            "source_cpu_s": 40.0,
            "bytes": 1.0,
        },
    ]
    imports = [run(10.0), run(20.0), run(40.0)]  # 1 CPU-s each: 0.1, 0.05, 0.025 cores
    figures = summarise(imports, syncs, lib=100, txs=1000, size=10**6)
    assert figures["receiver_cores_used"] == 2.0
    assert figures["cores_used"] == 3.0
    assert figures["import_cores_used"] == 0.05


def test_process_and_busiest_thread_are_the_medians_of_the_runs_shares() -> None:
    """The node's own process's and its busiest thread's shares of the wall time are, like
    cores used, the medians of each run's own shares, not ratios of medians."""

    def sync(seconds: float, own_s: float, busiest_s: float) -> dict[str, float]:
        return {**run(seconds), "cpu_s": 2 * own_s, "own_s": own_s, "busiest_s": busiest_s}

    # Process 0.95, 0.6, 0.95: median 0.95; busiest thread 0.9, 0.5, 0.9: median 0.9 (median
    # 10 s over median 20 s would say 0.5). The imports' busiest: 0.1, 0.05, 0.025.
    syncs = [sync(10.0, 9.5, 9.0), sync(20.0, 12.0, 10.0), sync(40.0, 38.0, 36.0)]
    imports = [run(10.0), run(20.0), run(40.0)]
    figures = summarise(imports, syncs, lib=100, txs=1000, size=10**6)
    assert figures["receiver_process_cores_used"] == 0.95
    assert figures["receiver_busiest_thread"] == 0.9
    assert figures["import_busiest_thread"] == 0.05
