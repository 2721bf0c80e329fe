"""Latency histograms and 10-second windows of what a benchmark run measured.

Latencies are recorded in microseconds into HDR histograms (``hdrhistogram``: 1 µs to one hour,
3 significant digits, so every percentile is within 0.1 % of the exact value) and reported in
milliseconds. Two latencies are kept per window and overall:

- **publish latency**: from handing a batch to the client library until the system acknowledged
  it (every message of a batch gets the batch's latency);
- **end-to-end latency**: from the producer's timestamp inside the payload until a consumer
  received the message (producer and consumers share this process's monotonic clock).

``Windows`` assigns each observation to the window of the time it was observed (acknowledged or
received), counted from ``start``; observations before ``start`` or after ``stop`` are dropped
(warm-up and cool-down). Rates are messages per second of each window, the last window divided
by its actual length. Pure: times come from the caller, nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from hdrh.histogram import HdrHistogram

__all__ = ["LatencyHistogram", "Percentiles", "Tally", "WindowSummary", "Windows"]

_LOWEST_US = 1
_HIGHEST_US = 3_600_000_000
_DIGITS = 3
WINDOW_S = 10.0


class Percentiles(NamedTuple):
    """Latency percentiles in milliseconds over ``samples`` messages (all 0 when empty)."""

    samples: int
    p50: float
    p90: float
    p99: float
    p999: float
    max: float


class LatencyHistogram:
    """An HDR histogram of latencies in ms (stored as µs, clamped to 1 µs .. 1 h)."""

    def __init__(self) -> None:
        self._hdr = HdrHistogram(_LOWEST_US, _HIGHEST_US, _DIGITS)

    def record(self, latency_ms: float, count: int = 1) -> None:
        micros = min(max(round(latency_ms * 1000), _LOWEST_US), _HIGHEST_US)
        self._hdr.record_value(micros, count)

    def add(self, other: LatencyHistogram) -> None:
        self._hdr.add(other._hdr)

    @property
    def count(self) -> int:
        return int(self._hdr.get_total_count())

    def percentile(self, percent: float) -> float:
        """The latency (ms) at ``percent`` (0..100); 0 when empty."""
        if not self.count:
            return 0.0
        return int(self._hdr.get_value_at_percentile(percent)) / 1000

    def percentiles(self) -> Percentiles:
        if not self.count:
            return Percentiles(0, 0.0, 0.0, 0.0, 0.0, 0.0)
        return Percentiles(
            self.count,
            self.percentile(50.0),
            self.percentile(90.0),
            self.percentile(99.0),
            self.percentile(99.9),
            int(self._hdr.get_max_value()) / 1000,
        )


@dataclass
class Tally:
    """Messages published and consumed and publish latencies over some span (a window, a
    step of the rate search)."""

    published: int = 0
    consumed: int = 0
    errors: int = 0
    publish_latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    e2e_latency: LatencyHistogram = field(default_factory=LatencyHistogram)

    def published_batch(self, count: int, latency_ms: float) -> None:
        self.published += count
        self.publish_latency.record(latency_ms, count)

    def consumed_batch(self, e2e_ms: Iterable[tuple[float, int]]) -> None:
        """``(latency ms, messages)`` pairs: messages sent together share one latency."""
        for latency_ms, count in e2e_ms:
            self.consumed += count
            self.e2e_latency.record(latency_ms, count)


class WindowSummary(NamedTuple):
    """One window: its start (s after ``start``), rates (msg/s) and latency percentiles."""

    start_s: float
    publish_rate: float
    consume_rate: float
    publish_latency: Percentiles
    e2e_latency: Percentiles


class Windows:
    """Per-window and overall tallies between ``start`` and ``stop`` (see the module doc)."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._start_ns: int | None = None
        self._stop_ns: int | None = None
        self._windows: list[Tally] = []

    def start(self, now_ns: int) -> None:
        self._start_ns = now_ns
        self._stop_ns = None
        self._windows = []

    def stop(self, now_ns: int) -> None:
        self._stop_ns = now_ns

    @property
    def elapsed_s(self) -> float:
        if self._start_ns is None or self._stop_ns is None:
            return 0.0
        return (self._stop_ns - self._start_ns) / 1e9

    def at(self, now_ns: int) -> Tally | None:
        """The window ``now_ns`` falls in, or None outside the measured span."""
        if self._start_ns is None or now_ns < self._start_ns:
            return None
        if self._stop_ns is not None and now_ns > self._stop_ns:
            return None
        index = int((now_ns - self._start_ns) / 1e9 // self.window_s)
        while len(self._windows) <= index:
            self._windows.append(Tally())
        return self._windows[index]

    def summaries(self) -> list[WindowSummary]:
        out = []
        for index, tally in enumerate(self._windows):
            begin = index * self.window_s
            length = min(self.window_s, max(self.elapsed_s - begin, 1e-9))
            out.append(
                WindowSummary(
                    begin,
                    tally.published / length,
                    tally.consumed / length,
                    tally.publish_latency.percentiles(),
                    tally.e2e_latency.percentiles(),
                )
            )
        return out

    def overall(self) -> Tally:
        """Every window merged into one tally."""
        total = Tally()
        for tally in self._windows:
            total.published += tally.published
            total.consumed += tally.consumed
            total.errors += tally.errors
            total.publish_latency.add(tally.publish_latency)
            total.e2e_latency.add(tally.e2e_latency)
        return total
