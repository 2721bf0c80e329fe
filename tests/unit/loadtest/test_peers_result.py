"""A run's result summarized from recorded windows: rates, and whether the phase kept up."""

from __future__ import annotations

import pytest

from loadtest.peers.histogram import Windows
from loadtest.peers.rate_search import RateSearch, Step
from loadtest.peers.result import summarize
from loadtest.peers.workload import Workload

S = 1_000_000_000


def recorded(published: int, consumed: int, seconds: int = 10) -> Windows:
    windows = Windows()
    windows.start(0)
    tally = windows.at(S)
    assert tally is not None
    tally.published_batch(published, 5.0)
    tally.consumed_batch([(8.0, consumed)])
    windows.stop(seconds * S)
    return windows


def test_a_fixed_rate_that_was_kept_up() -> None:
    workload = Workload("w", producer_rate=1000)
    result = summarize(
        workload, "redis", recorded(10_000, 10_000), RateSearch(), rate=1000, errors=0
    )
    assert (result.publish_rate, result.consume_rate) == (1000.0, 1000.0)
    assert result.sustained
    assert result.e2e_latency.p50 == pytest.approx(8.0, rel=1e-3)


@pytest.mark.parametrize(("published", "consumed"), [(8_000, 8_000), (10_000, 9_000)])
def test_falling_behind_is_not_held(published: int, consumed: int) -> None:
    workload = Workload("w", producer_rate=1000)
    windows = recorded(published, consumed)
    assert not summarize(workload, "nats", windows, RateSearch(), rate=1000, errors=0).sustained


def test_fan_out_counts_every_subscription() -> None:
    workload = Workload("w", producer_rate=1000, subscriptions_per_topic=4)
    windows = recorded(10_000, 40_000)
    result = summarize(workload, "yak-rest", windows, RateSearch(), rate=1000, errors=0)
    assert result.consume_rate == 4000.0
    assert result.sustained


def test_a_max_rate_run_needs_a_sustained_search() -> None:
    workload = Workload("w")
    search = RateSearch(max_steps=2)
    search.observe(Step(None, 2000, 2000, 1.0))
    search.observe(Step(1800, 1000, 1000, 1.0))  # not held: estimated only
    result = summarize(workload, "yak-sdk", recorded(9_000, 9_000), search, rate=900, errors=2)
    assert not result.sustained
    assert [s.held for s in result.search] == [False, False]
    assert result.errors == 2


def test_a_backlog_splits_produce_and_drain() -> None:
    workload = Workload("w", backlog_records=10_000)
    windows = recorded(10_000, 10_000, seconds=10)
    result = summarize(workload, "redis", windows, RateSearch(), rate=0, errors=0, drain_s=4.0)
    assert result.publish_rate == pytest.approx(10_000 / 6)
    assert result.consume_rate == pytest.approx(10_000 / 4)
    assert result.sustained
    assert result.drain_s == 4.0
