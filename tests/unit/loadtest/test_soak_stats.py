"""The soak test's pure arithmetic: durations, percentiles, slopes, delivery accounting."""

from __future__ import annotations

import pytest

from loadtest.soak_stats import (
    ACKED,
    FAILED,
    PENDING,
    ProcessSample,
    account_delivery,
    linear_slope,
    parse_duration,
    per_hour,
    percentile,
    process_slopes,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("20s", 20.0), ("5m", 300.0), ("1.5h", 5400.0), ("1h30m", 5400.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "m5", "5 m", "-3s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([7.0], 99.9) == 7.0
    assert percentile([], 99) is None


def test_slope_of_a_line_and_of_noise_around_it() -> None:
    xs = [0.0, 1.0, 2.0, 3.0]
    assert linear_slope(xs, [1.0, 3.0, 5.0, 7.0]) == pytest.approx(2.0)
    assert linear_slope(xs, [1.0, 2.0, 1.0, 2.0]) == pytest.approx(0.2)
    assert linear_slope(xs, [5.0, None, 5.0, None]) == pytest.approx(0.0)


def test_no_slope_without_two_distinct_points() -> None:
    assert linear_slope([1.0], [2.0]) is None
    assert linear_slope([1.0, 1.0], [2.0, 3.0]) is None
    assert linear_slope([1.0, 2.0], [None, 3.0]) is None


def test_per_hour_scales_seconds() -> None:
    assert per_hour([0.0, 60.0], [100.0, 101.0]) == pytest.approx(60.0)


def test_each_incarnation_is_fitted_on_its_own() -> None:
    """A restart drops a broker's memory: fitted as one line that would read as a shrinking
    process; per incarnation both grow by 36 MB/hour (0.01 MB/s)."""
    samples = [
        ProcessSample("broker-0", 10, t, 100.0 + 0.01 * t, 40) for t in (0.0, 100.0, 200.0)
    ] + [
        ProcessSample("broker-0", 11, t, 80.0 + 0.01 * (t - 300), 40 + int(t > 400))
        for t in (300.0, 400.0, 500.0, 600.0)
    ]
    slopes = process_slopes(samples)["broker-0"]
    assert slopes["rss_mb_per_hour"] == pytest.approx(36.0)
    incarnations = slopes["incarnations"]
    assert isinstance(incarnations, list)
    assert [i["pid"] for i in incarnations] == [10, 11]
    assert incarnations[1]["fds_per_hour"] == pytest.approx(14.4)
    # Weighted by span: (200 s x 0 + 300 s x 14.4) / 500 s.
    assert slopes["fds_per_hour"] == pytest.approx(8.64)


def test_anonymous_memory_is_fitted_apart_from_the_resident_total() -> None:
    """File-backed pages (a mapped file being read) grow RSS; the anonymous part is the heap."""
    samples = [
        ProcessSample("etcd-0", 7, t, 60.0 + 0.02 * t, 30, anon_mb=30.0 + 0.001 * t)
        for t in (0.0, 100.0, 200.0)
    ]
    slopes = process_slopes(samples)["etcd-0"]
    assert slopes["rss_mb_per_hour"] == pytest.approx(72.0)
    assert slopes["anon_mb_per_hour"] == pytest.approx(3.6)
    without = process_slopes([ProcessSample("x", 1, t, 1.0, 1) for t in (0.0, 1.0, 2.0)])["x"]
    assert without["anon_mb_per_hour"] is None  # a sample source without the split


def test_short_incarnations_are_listed_not_fitted() -> None:
    samples = [ProcessSample("broker-1", 5, t, 50.0 + t, 9) for t in (0.0, 5.0)]
    slopes = process_slopes(samples, min_samples=3)["broker-1"]
    assert slopes["rss_mb_per_hour"] is None
    incarnations = slopes["incarnations"]
    assert isinstance(incarnations, list)
    assert incarnations[0]["samples"] == 2


def test_delivery_counts_loss_duplicates_and_written_failures() -> None:
    states = bytearray([ACKED, ACKED, ACKED, FAILED, FAILED, PENDING, ACKED])
    counts = bytearray([1, 3, 0, 1, 0, 0, 1])
    delivery = account_delivery(states, counts)
    assert delivery.acked == 4
    assert delivery.failed_sends == 2
    assert delivery.consumed == 6
    assert delivery.consumed_unique == 4
    assert delivery.lost == 1
    assert delivery.lost_sample == (2,)
    assert delivery.duplicates == 2
    assert delivery.unacked_consumed == 1
    assert not delivery.ok


def test_everything_delivered_once_is_ok_even_with_a_short_count_array() -> None:
    delivery = account_delivery(bytearray([ACKED] * 3), bytearray([1, 1, 1]))
    assert delivery.ok
    assert delivery.duplicates == 0
    # Records after the consumer's last one: the count array is shorter than the states.
    lost = account_delivery(bytearray([ACKED] * 3), bytearray([1]))
    assert lost.lost == 2
    assert lost.lost_sample == (1, 2)
