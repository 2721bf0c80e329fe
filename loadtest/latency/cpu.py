"""CPU per record, the latency benchmark's third measurement: CPU seconds read from the text of
``/proc/<pid>/stat``, and the fixed-size produce phase they are counted over (``CpuPhase``).

User + system CPU seconds (``/proc/<pid>/stat`` fields 14 and 15, in clock ticks) of the
rest-proxy and every broker, after minus before a fixed-size produce phase, divided by the
records that phase got acknowledged, in µs. Pure: the ``/proc`` texts and the phase's figures
come from the caller (``loadtest.latency.measure``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from loadtest.latency.rows import rounded

__all__ = ["CpuPhase", "cpu_seconds_of_stat", "parse_proc_stat"]


def parse_proc_stat(text: str) -> tuple[int, int]:
    """(utime, stime) in clock ticks from the text of ``/proc/<pid>/stat``.

    The second field, the command name, is in parentheses and may hold spaces and parentheses
    itself, so the fields are counted from the last ``)``: state is field 3, utime 14, stime 15.
    """
    head, paren, rest = text.rpartition(")")
    if not paren or "(" not in head:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:80]!r}")
    fields = rest.split()
    if len(fields) < 13:
        raise ValueError(f"too few fields in /proc/<pid>/stat: {text[:80]!r}")
    return int(fields[11]), int(fields[12])


def cpu_seconds_of_stat(text: str, ticks_per_s: int) -> float:
    """User + system CPU seconds of a ``/proc/<pid>/stat`` text."""
    utime, stime = parse_proc_stat(text)
    return (utime + stime) / ticks_per_s


@dataclass
class CpuPhase:
    """A fixed-size max-rate produce phase on one build (``current`` or ``baseline``):
    records acknowledged, records answered with an error, whole requests that failed, its
    length, and CPU seconds per process (``rest-proxy-0``, ``broker-N``; ``coordinator`` too,
    shown but not counted) spent during it."""

    build: str
    records: int
    errors: int
    failed_requests: int
    elapsed_s: float
    cpu_s: dict[str, float] = field(default_factory=dict)
    #: Processes whose CPU is counted in ``cpu_us_per_record``.
    counted: tuple[str, ...] = ()
    #: The 1-minute load average when the phase started.
    load: float | None = None

    @property
    def records_per_s(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def us_per_record(self, names: Iterable[str]) -> float | None:
        if self.records <= 0:
            return None
        return sum(self.cpu_s[name] for name in names) * 1e6 / self.records

    @property
    def cpu_us_per_record(self) -> float | None:
        return self.us_per_record(self.counted)

    def to_json(self) -> dict[str, Any]:
        per_process = {name: self.us_per_record([name]) for name in self.cpu_s}
        return {
            "build": self.build,
            "records": self.records,
            "errors": self.errors,
            "failed_requests": self.failed_requests,
            "elapsed_s": round(self.elapsed_s, 3),
            "records_per_s": round(self.records_per_s, 1),
            "cpu_s": {k: round(v, 3) for k, v in self.cpu_s.items()},
            "counted": list(self.counted),
            "cpu_us_per_record": rounded(self.cpu_us_per_record),
            "cpu_us_per_record_by_process": {k: rounded(v) for k, v in per_process.items()},
            "load": self.load,
        }
