"""When a crashed child is started again: exponential backoff and a bound on crash loops.

A pure state machine, one per child: ``started(now)`` when a process of the child is spawned,
``crashed(now)`` when it exits on its own; the answer is ``Restart(delay_s)`` or ``GiveUp``.
Times are the caller's monotonic seconds, so tests drive it with made-up numbers.

- **Backoff.** The first restart waits ``initial_backoff_s`` (1 s), each next one twice the
  last, at most ``max_backoff_s`` (30 s). A process that stayed up ``stable_after_s`` (60 s)
  before it crashed counts as healthy: the backoff starts again from ``initial_backoff_s``.
- **Bound.** The ``max_crashes``-th crash (5) within ``crash_window_s`` (300 s) gives up: the
  child stays down and the supervisor says so. Crashes older than the window are forgotten, so
  a child that crashes now and then (an OOM a day) is restarted every time.

Not thread-safe: each child's watcher thread owns its history.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["GiveUp", "Restart", "RestartHistory", "RestartPolicy"]


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """The knobs of backoff and of the crash-loop bound (see the module doc)."""

    initial_backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    stable_after_s: float = 60.0
    max_crashes: int = 5
    crash_window_s: float = 300.0

    def __post_init__(self) -> None:
        if not 0 < self.initial_backoff_s <= self.max_backoff_s:
            raise ValueError("need 0 < initial_backoff_s <= max_backoff_s")
        if self.max_crashes < 1 or self.crash_window_s <= 0 or self.stable_after_s < 0:
            raise ValueError("need max_crashes >= 1, crash_window_s > 0, stable_after_s >= 0")


class Restart(NamedTuple):
    """Start the child again after ``delay_s``; ``crashes`` in the current window so far."""

    delay_s: float
    crashes: int


class GiveUp(NamedTuple):
    """Leave the child down: ``crashes`` crashes within ``window_s``."""

    crashes: int
    window_s: float


class RestartHistory:
    """One child's crashes and its next backoff."""

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy
        self._next_backoff_s = policy.initial_backoff_s
        self._crashes: deque[float] = deque()
        self._started_at: float | None = None

    def started(self, now: float) -> None:
        """A process of this child was spawned at ``now``."""
        self._started_at = now

    def crashed(self, now: float) -> Restart | GiveUp:
        """The process exited on its own at ``now``: restart it (after a delay) or give up."""
        policy = self.policy
        uptime = now - self._started_at if self._started_at is not None else 0.0
        if uptime >= policy.stable_after_s:
            self._next_backoff_s = policy.initial_backoff_s
        self._crashes.append(now)
        while self._crashes[0] <= now - policy.crash_window_s:
            self._crashes.popleft()
        if len(self._crashes) >= policy.max_crashes:
            return GiveUp(len(self._crashes), policy.crash_window_s)
        delay = self._next_backoff_s
        self._next_backoff_s = min(delay * 2, policy.max_backoff_s)
        return Restart(delay, len(self._crashes))
