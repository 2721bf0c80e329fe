"""HDR latency histograms and 10-second windows, with times given by the test."""

from __future__ import annotations

import pytest

from loadtest.peers.drivers.base import make_payload, payload_timestamp
from loadtest.peers.histogram import LatencyHistogram, Percentiles, Tally, Windows

S = 1_000_000_000  # ns per second


def test_percentiles_of_a_known_distribution() -> None:
    histogram = LatencyHistogram()
    for ms in range(1, 1001):  # 1..1000 ms, once each
        histogram.record(ms)
    p = histogram.percentiles()
    assert p.samples == 1000
    assert p.p50 == pytest.approx(500, rel=1e-3)
    assert p.p90 == pytest.approx(900, rel=1e-3)
    assert p.p99 == pytest.approx(990, rel=1e-3)
    assert p.p999 == pytest.approx(999, rel=1e-3)
    assert p.max == pytest.approx(1000, rel=1e-3)


def test_counts_weight_a_latency_and_extremes_are_clamped() -> None:
    histogram = LatencyHistogram()
    histogram.record(2.0, count=99)
    histogram.record(10_000_000.0)  # beyond an hour: clamped, still counted
    histogram.record(0.0)  # below 1 µs: clamped
    p = histogram.percentiles()
    assert p.samples == 101
    assert p.p50 == pytest.approx(2.0, rel=1e-3)
    assert p.max == pytest.approx(3_600_000, rel=1e-3)


def test_an_empty_histogram_reports_zeros() -> None:
    assert LatencyHistogram().percentiles() == Percentiles(0, 0.0, 0.0, 0.0, 0.0, 0.0)


def test_windows_split_by_observation_time_and_drop_outside() -> None:
    windows = Windows(window_s=10.0)
    start = 100 * S
    assert windows.at(start) is None  # not started
    windows.start(start)
    assert windows.at(start - 1) is None  # warm-up
    first, second = windows.at(start + 3 * S), windows.at(start + 12 * S)
    assert first is not None
    assert second is not None
    first.published_batch(1000, latency_ms=5.0)
    first.consumed_batch([(20.0, 600), (40.0, 400)])
    second.published_batch(250, latency_ms=50.0)
    windows.stop(start + 15 * S)
    assert windows.at(start + 16 * S) is None  # cool-down
    summaries = windows.summaries()
    assert [w.start_s for w in summaries] == [0.0, 10.0]
    assert summaries[0].publish_rate == pytest.approx(100.0)
    assert summaries[0].consume_rate == pytest.approx(100.0)
    assert summaries[0].e2e_latency.p50 == pytest.approx(20.0, rel=1e-3)
    assert summaries[0].e2e_latency.p90 == pytest.approx(40.0, rel=1e-3)
    assert summaries[1].publish_rate == pytest.approx(50.0)  # 250 over the last 5 s
    overall = windows.overall()
    assert (overall.published, overall.consumed) == (1250, 1000)
    assert overall.publish_latency.percentile(99.0) == pytest.approx(50.0, rel=1e-3)
    assert windows.elapsed_s == pytest.approx(15.0)


def test_a_tally_counts_errors_apart() -> None:
    tally = Tally()
    tally.published_batch(10, 1.0)
    tally.errors += 3
    assert (tally.published, tally.errors, tally.publish_latency.count) == (10, 3, 10)


@pytest.mark.parametrize("size", [48, 100, 1024])
def test_payloads_have_the_exact_size_and_carry_their_stamp(size: int) -> None:
    payload = make_payload(size, 123_456_789)
    assert len(payload) == size
    assert payload_timestamp(payload) == 123_456_789
    assert payload_timestamp(payload.decode()) == 123_456_789
    with pytest.raises(ValueError, match="at least"):
        make_payload(20, 1)
