"""The restart policy as a pure machine: backoff, its reset, and the crash-loop bound.

Times are made-up monotonic seconds (the policy never reads a clock).
"""

from __future__ import annotations

import pytest

from yak.supervisor import GiveUp, Restart, RestartHistory, RestartPolicy

POLICY = RestartPolicy(
    initial_backoff_s=1, max_backoff_s=30, stable_after_s=60, max_crashes=5, crash_window_s=300
)


def crash_loop(history: RestartHistory, start: float, uptime_s: float, times: int) -> list[float]:
    """Crash ``times`` times, each process up ``uptime_s``, restarted after its delay."""
    delays: list[float] = []
    now = start
    history.started(now)
    for _ in range(times):
        now += uptime_s
        decision = history.crashed(now)
        assert isinstance(decision, Restart)
        delays.append(decision.delay_s)
        now += decision.delay_s
        history.started(now)
    return delays


def test_backoff_doubles_from_one_second_up_to_thirty() -> None:
    policy = RestartPolicy(max_crashes=100, crash_window_s=300)
    assert crash_loop(RestartHistory(policy), 0, 0.5, 8) == [1, 2, 4, 8, 16, 30, 30, 30]


def test_a_process_that_stayed_up_a_while_starts_the_backoff_again() -> None:
    history = RestartHistory(POLICY)
    assert crash_loop(history, 0, 2, 3) == [1, 2, 4]
    now = 1_000.0
    history.started(now)
    decision = history.crashed(now + 60)  # up for stable_after_s: healthy
    assert decision == Restart(1, 1)  # the early crashes left the window too


def test_a_crash_just_short_of_stable_keeps_doubling() -> None:
    history = RestartHistory(POLICY)
    assert crash_loop(history, 0, 2, 2) == [1, 2]
    history.started(10)
    decision = history.crashed(10 + 59.9)
    assert isinstance(decision, Restart)
    assert decision.delay_s == 4


def test_the_fifth_crash_within_five_minutes_gives_up() -> None:
    history = RestartHistory(POLICY)
    assert crash_loop(history, 0, 1, 4) == [1, 2, 4, 8]
    assert history.crashed(20) == GiveUp(5, 300)


def test_crashes_older_than_the_window_are_forgotten() -> None:
    """A process that crashes every 100 s is restarted forever: at most 3 crashes in 300 s."""
    history = RestartHistory(POLICY)
    for n in range(1, 20):
        history.started(n * 100 - 99)
        decision = history.crashed(n * 100)
        assert isinstance(decision, Restart), n
        assert decision.crashes == min(n, 3)
        assert decision.delay_s == 1  # 99 s up each time: stable, so the backoff resets


def test_a_crash_before_any_start_counts_with_no_uptime() -> None:
    history = RestartHistory(POLICY)
    assert history.crashed(5) == Restart(1, 1)


@pytest.mark.parametrize(
    "knobs",
    [
        {"initial_backoff_s": 0},
        {"initial_backoff_s": 5, "max_backoff_s": 1},
        {"max_crashes": 0},
        {"crash_window_s": 0},
        {"stable_after_s": -1},
    ],
)
def test_nonsense_knobs_are_refused(knobs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="need "):
        RestartPolicy(**knobs)  # type: ignore[arg-type]
