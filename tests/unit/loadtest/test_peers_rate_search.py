"""The maximum-rate search, fed synthetic step measurements."""

from __future__ import annotations

import pytest

from loadtest.peers.rate_search import RateSearch, Step


def system(capacity: float, latency_ms: float = 5.0) -> object:
    """A system that publishes and consumes up to ``capacity`` msg/s."""

    def measure(target: float | None) -> Step:
        offered = 2 * capacity if target is None else target
        done = min(offered, capacity)
        slow = target is not None and target > capacity
        return Step(target, done, done, latency_ms * (100 if slow else 1))

    return measure


def run(search: RateSearch, measure: object) -> list[float | None]:
    assert callable(measure)
    targets: list[float | None] = [None]
    while (following := search.observe(measure(targets[-1]))) is not None:
        targets.append(following)
    return targets


def test_it_converges_below_the_capacity_within_tolerance() -> None:
    search = RateSearch(max_steps=10, tolerance=0.05)
    targets = run(search, system(40_000))
    assert search.sustained
    assert 40_000 / 1.06 <= search.best <= 40_000
    assert len(targets) <= 10


def test_starved_consumers_start_at_half_the_probe() -> None:
    search = RateSearch()
    first = search.observe(Step(None, published=40_000, consumed=4_000, publish_p99_ms=100))
    assert first == pytest.approx(20_000)


def test_consumers_that_keep_up_start_just_below_them() -> None:
    search = RateSearch()
    first = search.observe(Step(None, published=40_000, consumed=30_000, publish_p99_ms=10))
    assert first == pytest.approx(27_000)


@pytest.mark.parametrize(
    ("step", "held"),
    [
        (Step(1000, 990, 990, 10), True),
        (Step(1000, 900, 900, 10), False),  # producers fell behind
        (Step(1000, 1000, 800, 10), False),  # the backlog grew
        (Step(1000, 1000, 1000, 5_000), False),  # latency exploded
        (Step(None, 5000, 5000, 1), False),  # the probe is never "held"
    ],
)
def test_what_counts_as_sustained(step: Step, held: bool) -> None:
    assert RateSearch().held(step) is held


def test_it_grows_past_the_probe_when_the_probe_was_pessimistic() -> None:
    search = RateSearch(growth=1.25)
    search.observe(Step(None, 1000, 1000, 1))
    assert search.observe(Step(900, 900, 900, 1)) == pytest.approx(950)  # bisect to 1000
    assert search.observe(Step(950, 950, 950, 1)) is None  # within 10 % of 1000: done
    assert search.best == 950


def test_after_the_step_budget_the_best_sustained_rate_stands() -> None:
    search = RateSearch(max_steps=3)
    search.observe(Step(None, 10_000, 10_000, 1))
    search.observe(Step(9_000, 9_000, 9_000, 1))
    assert search.observe(Step(9_500, 9_000, 9_000, 1)) is None
    assert search.best == 9_000


def test_a_system_that_sustains_nothing_is_estimated_and_flagged() -> None:
    search = RateSearch(max_steps=3)
    search.observe(Step(None, 10_000, 2_000, 1))
    search.observe(Step(5_000, 3_000, 2_000, 1))
    assert search.observe(Step(2_500, 2_000, 1_500, 1)) is None
    assert not search.sustained
    assert search.best == pytest.approx(0.9 * 2_000)
