"""The queue benchmark's pure parts (``loadtest.queue.calc``): percentiles, acknowledgement
ranges, the measured window, lateness and the goals' verdicts."""

from __future__ import annotations

import pytest

from loadtest.queue.calc import (
    GOALS,
    Window,
    accept_entries,
    goal_verdicts,
    lateness,
    percentile,
    summary_ms,
)


def test_percentile_is_nearest_rank_and_minus_one_when_empty() -> None:
    ordered = [float(v) for v in range(1, 101)]
    assert percentile(ordered, 0.5) == 50.0
    assert percentile(ordered, 0.99) == 99.0
    assert percentile(ordered, 1.0) == 100.0
    assert percentile([], 0.5) == -1.0


def test_summary_is_in_milliseconds() -> None:
    assert summary_ms([0.002, 0.001, 0.010]) == {
        "p50_ms": 2.0,
        "p99_ms": 10.0,
        "max_ms": 10.0,
        "samples": 3,
    }
    assert summary_ms([])["max_ms"] == -1.0


def test_contiguous_offsets_of_a_partition_become_one_range() -> None:
    acquired = [("t", 1, 7), ("t", 0, 3), ("t", 0, 4), ("t", 0, 5), ("t", 0, 9), ("t", 1, 8)]
    assert [
        (e["partition"], e["first_offset"], e["last_offset"]) for e in accept_entries(acquired)
    ] == [(0, 3, 5), (0, 9, 9), (1, 7, 8)]
    assert {e["type"] for e in accept_entries(acquired)} == {"accept"}


def test_ranges_do_not_span_topics_and_repeats_count_once() -> None:
    entries = accept_entries([("a", 0, 1), ("b", 0, 2), ("a", 0, 1)])
    assert [(e["topic"], e["first_offset"], e["last_offset"]) for e in entries] == [
        ("a", 1, 1),
        ("b", 2, 2),
    ]


def test_window_counts_only_inside_and_closes_at_the_last_record_when_data_ran_out() -> None:
    window = Window(start=10.0, end=20.0)
    window.count(100, 9.9)  # warm-up
    window.count(500, 12.0)
    window.count(500, 15.0)
    window.count(100, 20.0)  # after the end
    assert window.records == 1_000
    assert window.rate() == pytest.approx(100.0)
    window.exhausted_at = 16.0
    assert window.seconds() == pytest.approx(5.0)
    assert window.rate() == pytest.approx(200.0)


def test_a_window_that_saw_nothing_has_rate_zero() -> None:
    window = Window(start=10.0, end=20.0, exhausted_at=5.0)
    assert window.seconds() == 0.0
    assert window.rate() == 0.0


def test_lateness_keeps_early_records_out_of_the_percentiles() -> None:
    result = lateness([(1_010.0, 1_000.0), (1_050.0, 1_000.0), (995.0, 1_000.0), (1e3, 1e3)])
    assert result.late_ms == [0.0, 10.0, 50.0]
    assert result.early == 1
    figures = result.figures()
    assert figures["delay_lateness_p50_ms"] == 10.0
    assert figures["delay_lateness_max_ms"] == 50.0
    assert figures["delay_records_early"] == 1
    assert figures["delay_earliest_ms"] == -5.0


def test_verdicts_compare_each_goal_in_its_direction() -> None:
    results = {
        "share_ack_rps": 25_000.0,
        "share_vs_group_ratio": 0.4,
        "delay_lateness_p99_ms": 100.0,
        "delay_pending_1m_rss_mb": 250,
        "filter_cost_ratio": None,
    }
    verdicts = goal_verdicts(results)
    assert list(verdicts) == [g.key for g in GOALS]
    assert {k: v["met"] for k, v in verdicts.items()} == {
        "share_ack_rps": True,
        "share_vs_group_ratio": False,
        "delay_lateness_p99_ms": True,
        "delay_pending_1m_rss_mb": False,
        "filter_cost_ratio": False,
    }
    assert verdicts["share_ack_rps"]["value"] == 25_000.0


def test_a_negative_figure_means_not_measured_and_never_meets_a_goal() -> None:
    assert goal_verdicts({"delay_lateness_p99_ms": -1.0})["delay_lateness_p99_ms"]["met"] is False
