"""bench_tls's summary of its rounds: medians of each round's own figures."""

from __future__ import annotations

from scripts.bench_tls import summarise


def test_summary_is_the_median_of_the_rounds() -> None:
    """100 MB in 1, 2 and 4 s with 0.5, 1.0 and 3.0 CPU-s: MB/s 100, 50, 25 give 50; CPU per
    MB 5, 10, 30 ms give 10; cores used 0.5, 0.5, 0.75 give 0.5."""
    figures = summarise(100, [(1.0, 0.5), (2.0, 1.0), (4.0, 3.0)])
    assert figures == {"mb_per_s": 50.0, "cpu_ms_per_mb": 10.0, "cores_used": 0.5, "rounds": 3}
