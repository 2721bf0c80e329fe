"""The result rows of the latency benchmark: one per measured path, with exact nearest-rank
percentiles, and how every figure is rounded in ``latency.json``.

- **Rows**: one per measured path — ``system`` (``yak``, ``yak-before`` for the baseline
  build, ``redis``), ``path`` (``broker``: ``BrokerClient.produce`` to the leader; ``proxy``:
  the rest-proxy's native produce route; ``xadd``; ``e2e``: producer to consumer at ``rate``
  msg/s), the topic's replication factor ``rf``, ``acks`` (``0``, ``1``, ``all``; None for
  Redis) and percentiles in ms over ``samples`` observations (``p999`` and ``max`` for e2e,
  with ``ack_p50``/``ack_p99`` the producer's batch → acknowledgement time), and ``load``, the
  1-minute load average when its measurement started.
- **Percentiles** of the idle rows are exact nearest-rank over every sample (a few hundred);
  the e2e rows come from the peers harness's HDR histograms (within 0.1 %).

Pure: the samples come from the caller (``tests/unit/loadtest/test_bench_latency.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Row", "find_row", "latency_row", "percentile", "rate_label", "rounded"]


def percentile(ordered: Sequence[float], percent: float) -> float:
    """Nearest-rank ``percent`` (0..100) of an ascending, non-empty sequence."""
    if not ordered:
        raise ValueError("no samples")
    if not 0 <= percent <= 100:
        raise ValueError(f"a percentile is within 0..100, not {percent}")
    rank = math.ceil(percent / 100 * len(ordered))
    return float(ordered[min(max(rank, 1), len(ordered)) - 1])


@dataclass(frozen=True)
class Row:
    """One measured path (see the module docstring); latencies in ms."""

    system: str
    path: str
    rf: int | None
    acks: str | None
    p50: float | None
    p90: float | None
    p99: float | None
    samples: int
    p999: float | None = None
    max: float | None = None
    rate: int | None = None
    errors: int = 0
    #: e2e: publish latency (batch handed to the client → acknowledged), p50 and p99.
    ack_p50: float | None = None
    ack_p99: float | None = None
    #: The 1-minute load average when the row's measurement started (a shared machine).
    load: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


def latency_row(
    system: str,
    path: str,
    rf: int | None,
    acks: str | None,
    samples_ms: Iterable[float],
    *,
    errors: int = 0,
) -> Row:
    """The idle row of ``samples_ms`` (exact percentiles over every sample; None without
    any)."""
    ordered = sorted(samples_ms)
    p50, p90, p99 = (percentile(ordered, q) if ordered else None for q in (50, 90, 99))
    return Row(system, path, rf, acks, p50, p90, p99, samples=len(ordered), errors=errors)


def rate_label(rate: int) -> str:
    """``1k`` for 1,000 msg/s, ``10k`` for 10,000, ``250`` for 250 (the headline keys' suffix)."""
    return f"{rate // 1000}k" if rate >= 1000 and rate % 1000 == 0 else str(rate)


def find_row(
    rows: Sequence[Row],
    system: str,
    path: str,
    *,
    rf: int | None = None,
    acks: str | None = None,
    rate: int | None = None,
) -> Row | None:
    """The first row with these fields (None ones match anything)."""
    for row in rows:
        if (row.system, row.path) != (system, path):
            continue
        if rf is not None and row.rf != rf:
            continue
        if acks is not None and row.acks != acks:
            continue
        if rate is not None and row.rate != rate:
            continue
        return row
    return None


def rounded(value: float | None, digits: int = 3) -> float | None:
    """A figure as ``latency.json`` holds it: rounded to ``digits`` decimals, None kept."""
    return None if value is None else round(value, digits)
