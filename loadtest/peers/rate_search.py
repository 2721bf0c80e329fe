"""The search for a system's maximum sustainable publish rate (workloads with rate 0).

A pure state machine fed with measurements of fixed-length steps, like the OpenMessaging
Benchmark's rate controller. The runner offers each step's target rate and reports what came
of it; ``observe`` answers the next target, or None when the search is over and ``best`` holds
the highest rate that was **sustained**:

- the producers published at least ``keep_up`` (95 %) of the target,
- every subscription consumed at least ``keep_up`` of what was published (the backlog did not
  grow by more than 5 % of the step's messages), and
- the publish p99 stayed under ``latency_limit_ms`` (latency "explodes" once queues build up).

The first step is a probe without a target (producers as fast as their in-flight window
allows): nothing sustains more than it published, so that is the first upper bound, and the
first target is 90 % of what the consumers kept up with (or half the bound when they were
starved). Then bisect between the best sustained and the lowest failed rate (above any
bound, after a sustained step, go up by ``growth``); stop when the two are within
``tolerance`` or after ``max_steps`` steps. A system that sustains nothing offered is reported
at 90 % of the most it actually kept up with, and ``sustained`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["RateSearch", "Step"]


@dataclass(frozen=True)
class Step:
    """What one step measured: target and achieved rates in msg/s (``consumed`` per
    subscription), and the publish p99 in ms. ``target`` None is the unthrottled probe."""

    target: float | None
    published: float
    consumed: float
    publish_p99_ms: float


@dataclass
class RateSearch:
    """See the module docstring."""

    max_steps: int = 6
    tolerance: float = 0.1
    growth: float = 1.25
    keep_up: float = 0.95
    latency_limit_ms: float = 1_000.0
    best: float = 0.0
    lowest_failed: float | None = None
    steps: list[tuple[Step, bool]] = field(default_factory=list)

    @property
    def sustained(self) -> bool:
        """True when some offered rate was sustained (else ``best`` is an estimate)."""
        return any(ok for step, ok in self.steps if step.target is not None)

    def held(self, step: Step) -> bool:
        """Whether ``step`` sustained its target (see the module docstring)."""
        if step.target is None or step.target <= 0:
            return False
        return (
            step.published >= self.keep_up * step.target
            and step.consumed >= self.keep_up * step.published
            and step.publish_p99_ms <= self.latency_limit_ms
        )

    def observe(self, step: Step) -> float | None:
        """Record ``step``; the next target rate, or None when the search is done."""
        ok = self.held(step)
        self.steps.append((step, ok))
        if step.target is None:
            # The probe: nothing sustains more than was published unthrottled.
            self.lowest_failed = step.published
            kept_up = min(step.published, step.consumed)
            first = 0.9 * kept_up if kept_up >= step.published / 2 else step.published / 2
            return first if first > 0 and len(self.steps) < self.max_steps else self._done()
        if ok:
            self.best = max(self.best, step.target)
        else:
            failed = step.target
            self.lowest_failed = min(self.lowest_failed or failed, failed)
        if len(self.steps) >= self.max_steps:
            return self._done()
        if self.lowest_failed is None or self.lowest_failed <= self.best:
            return self.best * self.growth
        if self.best and self.lowest_failed <= self.best * (1 + self.tolerance):
            return self._done()
        return (self.best + self.lowest_failed) / 2

    def _done(self) -> float | None:
        """End the search: None, with ``best`` set (estimated if nothing was sustained)."""
        if not self.best:
            candidates = [min(s.published, s.consumed) for s, _ in self.steps]
            self.best = 0.9 * max(candidates, default=0.0)
        return None
