"""The views' time format: a slot's start as Antelope writes block times, UTC to the
millisecond and without a zone, the same from the cache as computed afresh."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from chain.core.primitives.params import slot_start_ms
from node.api.views import slot_iso


@given(st.integers(min_value=0, max_value=2**36))
def test_slot_iso_is_the_slots_start_in_utc_to_the_millisecond(slot: int) -> None:
    """Each slot's text is its start, counted from the epoch with integer milliseconds, and
    a second call (from the cache) gives the same text."""
    start = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=slot_start_ms(slot))
    expected = start.strftime("%Y-%m-%dT%H:%M:%S.") + f"{start.microsecond // 1000:03d}"
    assert slot_iso(slot) == expected
    assert slot_iso(slot) == expected
