"""What one run of the latency benchmark measures and where it writes (``Options``), and the
settings recorded in ``latency.json``; ``loadtest.bench_latency.parse`` makes them from the
command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtest.latency.baseline import ROOT
from loadtest.latency.measure import (
    CPU_CLIENTS,
    CPU_RECORDS_PER_REQUEST,
    E2E_PARTITIONS,
    VALUE_BYTES,
    IdleSettings,
)

__all__ = ["DEFAULT_BASELINE", "DOC", "RESULTS", "Options"]

RESULTS = ROOT / "loadtest" / "results" / "latency.json"
DOC = ROOT / "docs" / "performance.md"
DEFAULT_BASELINE = "5db3bf7"


@dataclass(frozen=True)
class Options:
    idle: IdleSettings = field(default_factory=IdleSettings)
    rates: tuple[int, ...] = (1_000, 10_000)
    e2e_warmup_s: float = 5.0
    e2e_duration_s: float = 10.0
    cpu_records: int = 400_000
    cpu_warmup_requests: int = 40
    baseline: str | None = DEFAULT_BASELINE
    baseline_e2e: bool = True
    results: Path = RESULTS
    doc: Path | None = DOC
    report_only: bool = False
    command: str = "python -m loadtest.bench_latency"

    def settings(self) -> dict[str, Any]:
        return {
            "value_bytes": VALUE_BYTES,
            "idle_samples": self.idle.samples,
            "idle_warmup": self.idle.warmup,
            "idle_interval_s": self.idle.interval_s,
            "e2e_rates": list(self.rates),
            "e2e_partitions": E2E_PARTITIONS,
            "e2e_warmup_s": self.e2e_warmup_s,
            "e2e_duration_s": self.e2e_duration_s,
            "cpu_records": self.cpu_records,
            "cpu_clients": CPU_CLIENTS,
            "cpu_records_per_request": CPU_RECORDS_PER_REQUEST,
            "cpu_warmup_requests": self.cpu_warmup_requests,
            "baseline_e2e": self.baseline_e2e and self.baseline is not None,
        }
