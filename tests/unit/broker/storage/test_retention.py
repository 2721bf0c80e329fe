"""Tests for yak_broker.storage.retention: the pure choice of segments to delete."""

from __future__ import annotations

from yak_broker.storage.log_config import CleanupPolicy, LogConfig
from yak_broker.storage.retention import SegmentSummary, deletable_segments

NOW = 1_000_000


def segments(*sizes_and_times: tuple[int, int]) -> list[SegmentSummary]:
    """Segments of 10 offsets each: (size, largest timestamp)."""
    return [SegmentSummary(i * 10, size, ts) for i, (size, ts) in enumerate(sizes_and_times)]


LOG = segments((100, NOW - 5000), (100, NOW - 4000), (100, NOW - 3000), (100, NOW - 10))


def test_nothing_by_default() -> None:
    assert deletable_segments(LOG, LogConfig(), NOW, 0, 40) == 0


def test_by_time_walks_from_the_oldest_and_stops_at_the_first_young_one() -> None:
    config = LogConfig(retention_ms=3500)
    assert deletable_segments(LOG, config, NOW, 0, 40) == 2
    young_first = segments((100, NOW), (100, NOW - 9000), (100, NOW))
    assert deletable_segments(young_first, config, NOW, 0, 30) == 0


def test_by_size_keeps_at_least_retention_bytes() -> None:
    assert deletable_segments(LOG, LogConfig(retention_bytes=250), NOW, 0, 40) == 1
    assert deletable_segments(LOG, LogConfig(retention_bytes=200), NOW, 0, 40) == 2
    assert deletable_segments(LOG, LogConfig(retention_bytes=0), NOW, 0, 40) == 3


def test_never_the_active_segment_nor_above_the_high_watermark() -> None:
    config = LogConfig(retention_ms=0)
    assert deletable_segments(LOG, config, NOW, 0, 40) == 3  # the active one stays
    assert deletable_segments(LOG, config, NOW, 0, 25) == 2  # segment 2 ends at 30 > 25
    assert deletable_segments(LOG, config, NOW, 0, 19) == 1
    assert deletable_segments(LOG, config, NOW, 0, 9) == 0


def test_log_start_offset_breach_applies_even_without_the_delete_policy() -> None:
    compact = LogConfig(cleanup_policy=CleanupPolicy.COMPACT, retention_ms=0)
    assert deletable_segments(LOG, compact, NOW, 25, 40) == 2
    assert deletable_segments(LOG, compact, NOW, 19, 40) == 1
