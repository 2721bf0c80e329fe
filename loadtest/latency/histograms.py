"""The budget per hop's arithmetic: the services' stage histograms read from ``/metrics`` texts,
summed over processes, diffed over a measurement, and each stage's p50/p99 along a request's
path.

The stage histograms (``yak_proxy_produce_stage_seconds``, ``yak_proxy_poll_stage_seconds``,
``yak_broker_produce_stage_seconds``, ``yak_broker_fetch_stage_seconds``) and the runtime's
(event-loop lag, GC pauses — these also per generation, ``gc_key``) are read from ``/metrics``
texts (``stage_histograms``), summed over the brokers (``add_histograms``), the scrape before a
measurement subtracted from the one after (``diff_histograms``), and each stage's p50/p99
computed from the diffed buckets as Prometheus' ``histogram_quantile`` does
(``histogram_quantile``), in the order of the request's path (``budget_rows``;
``PRODUCE_PATH``, ``POLL_PATH``, ``RUNTIME_PATH``).

Pure: the ``/metrics`` texts come from the caller (``loadtest.latency.measure.scrape_stages``;
``loadtest.latency.budget`` scrapes around the measurements).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from loadtest.latency.rows import rate_label, rounded

__all__ = [
    "POLL_PATH",
    "PRODUCE_PATH",
    "RUNTIME_METRICS",
    "RUNTIME_PATH",
    "STAGE_METRICS",
    "Histograms",
    "StageFigure",
    "StageKey",
    "add_histograms",
    "budget_key",
    "budget_rows",
    "diff_histograms",
    "gc_key",
    "histogram_quantile",
    "stage_histograms",
]

#: A stage histogram's series: (service, request, stage), e.g. ``("broker", "replica_fetch",
#: "wait")``; service ``rest-proxy`` or ``broker``, request ``produce``, ``poll``, ``fetch`` or
#: ``replica_fetch``.
StageKey = tuple[str, str, str]
#: Stage series → cumulative bucket counts by upper bound in seconds (``+Inf`` included).
Histograms = dict[StageKey, dict[float, float]]

#: The stage histograms read from ``/metrics``: family name → (service, request); a family
#: without a ``request`` label takes the request given here.
STAGE_METRICS = {
    "yak_proxy_produce_stage_seconds": ("rest-proxy", "produce"),
    "yak_proxy_poll_stage_seconds": ("rest-proxy", "poll"),
    "yak_broker_produce_stage_seconds": ("broker", "produce"),
    "yak_broker_fetch_stage_seconds": ("broker", "fetch"),
}

#: The runtime's own histograms (``yak.observability.runtime``), labelled by service: family →
#: the stage they are shown as (the GC's generations summed).
RUNTIME_METRICS = {
    "yak_event_loop_lag_seconds": "event loop lag",
    "yak_gc_pause_seconds": "gc pause",
}
#: What each process's runtime added: a timer's lateness and the collector's pauses — time a
#: request spends in no stage of its own.
RUNTIME_PATH: tuple[StageKey, ...] = (
    ("rest-proxy", "runtime", "event loop lag"),
    ("rest-proxy", "runtime", "gc pause"),
    ("broker", "runtime", "event loop lag"),
    ("broker", "runtime", "gc pause"),
)

#: A produce through the proxy, stage by stage along its path: the proxy's own stages, the
#: leader's (with the followers' replica fetches that acks=all replication waits on), the
#: proxy's whole broker round trip around them, and the response.
PRODUCE_PATH: tuple[StageKey, ...] = (
    ("rest-proxy", "produce", "read"),
    ("rest-proxy", "produce", "parse"),
    ("rest-proxy", "produce", "queue"),
    ("rest-proxy", "produce", "sender"),
    ("broker", "produce", "receive"),
    ("broker", "produce", "append"),
    ("broker", "produce", "replication"),
    ("broker", "replica_fetch", "wait"),
    ("broker", "replica_fetch", "read"),
    ("broker", "produce", "answer"),
    ("rest-proxy", "produce", "broker"),
    ("rest-proxy", "produce", "render"),
)
#: A poll through the proxy: the member's reconciliation, the fetch (the leaders' long poll
#: and reads inside it), decoding, rendering, saving the positions.
POLL_PATH: tuple[StageKey, ...] = (
    ("rest-proxy", "poll", "reconcile"),
    ("rest-proxy", "poll", "fetch"),
    ("broker", "fetch", "wait"),
    ("broker", "fetch", "read"),
    ("rest-proxy", "poll", "decode"),
    ("rest-proxy", "poll", "render"),
    ("rest-proxy", "poll", "save"),
)


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """The ``q`` (0..1) quantile of a histogram given as cumulative counts by bucket upper
    bound, as Prometheus' ``histogram_quantile`` computes it: the bucket holding rank
    ``q * count`` is found and the value interpolated linearly inside it (the first bucket
    starting at 0); a rank in the ``+Inf`` bucket gives the highest finite bound. None where
    Prometheus gives NaN: no ``+Inf`` bucket, fewer than two buckets, no observations."""
    if not 0 <= q <= 1:
        raise ValueError(f"a quantile is within 0..1, not {q}")
    bounds = sorted(buckets)
    if len(bounds) < 2 or not math.isinf(bounds[-1]):
        return None
    counts = [float(buckets[bound]) for bound in bounds]
    for index in range(1, len(counts)):  # as Prometheus: non-monotonic counts are evened out
        counts[index] = max(counts[index], counts[index - 1])
    observations = counts[-1]
    if observations <= 0:
        return None
    rank = q * observations
    b = next((i for i in range(len(bounds) - 1) if counts[i] >= rank), len(bounds) - 1)
    if b == len(bounds) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    if count <= 0:  # q = 0 on an empty first bucket: its lower end
        return start
    return start + (end - start) * (rank / count)


def stage_histograms(text: str) -> Histograms:
    """The stage histograms (``STAGE_METRICS``) of a ``/metrics`` text (prometheus_client's
    parser); the families a build does not export are simply not there."""
    found: Histograms = {}
    for family in text_string_to_metric_families(text):
        runtime = RUNTIME_METRICS.get(family.name)
        if runtime is not None and family.type == "histogram":
            for sample in family.samples:
                if sample.name.endswith("_bucket") and "le" in sample.labels:
                    service = sample.labels.get("service", "")
                    keys = [(service, "runtime", runtime)]
                    if "generation" in sample.labels:  # the GC's, also per generation
                        keys.append(gc_key(service, int(sample.labels["generation"])))
                    bound = float(sample.labels["le"])
                    for key in keys:
                        into = found.setdefault(key, {})
                        into[bound] = into.get(bound, 0.0) + sample.value
            continue
        owner = STAGE_METRICS.get(family.name)
        if owner is None or family.type != "histogram":
            continue
        service, request = owner
        for sample in family.samples:
            if not sample.name.endswith("_bucket") or "le" not in sample.labels:
                continue
            key = (service, sample.labels.get("request", request), sample.labels.get("stage", ""))
            found.setdefault(key, {})[float(sample.labels["le"])] = sample.value
    return found


def gc_key(service: str, generation: int) -> StageKey:
    """The series of ``service``'s collections of one ``generation`` (``stage_histograms``
    also reads ``yak_gc_pause_seconds`` per generation)."""
    return (service, "gc", f"generation {generation}")


def add_histograms(*parts: Mapping[StageKey, Mapping[float, float]]) -> Histograms:
    """The bucket counts of several processes' histograms summed, series by series (as
    ``sum by (le, stage)``)."""
    total: Histograms = {}
    for part in parts:
        for key, buckets in part.items():
            into = total.setdefault(key, {})
            for bound, count in buckets.items():
                into[bound] = into.get(bound, 0.0) + count
    return total


def diff_histograms(
    after: Mapping[StageKey, Mapping[float, float]],
    before: Mapping[StageKey, Mapping[float, float]],
) -> Histograms:
    """What each series of ``after`` observed since ``before``, bucket by bucket (a series
    that was not there before, or whose count went down — a restarted process —, counts from
    zero)."""
    out: Histograms = {}
    for key, buckets in after.items():
        earlier = before.get(key, {})
        if sum(buckets.values()) < sum(earlier.values()):
            earlier = {}
        out[key] = {bound: count - earlier.get(bound, 0.0) for bound, count in buckets.items()}
    return out


@dataclass(frozen=True)
class StageFigure:
    """One stage's figures over a measurement: observations and p50/p99 in ms (None without
    observations)."""

    service: str
    request: str
    stage: str
    count: int
    p50_ms: float | None
    p99_ms: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "request": self.request,
            "stage": self.stage,
            "count": self.count,
            "p50_ms": rounded(self.p50_ms, 4),
            "p99_ms": rounded(self.p99_ms, 4),
        }


def budget_rows(
    window: Mapping[StageKey, Mapping[float, float]], path: Sequence[StageKey]
) -> list[StageFigure]:
    """The stages of ``path`` that ``window`` (diffed histograms) has, in ``path``'s order."""
    rows = []
    for key in path:
        buckets = window.get(key)
        if buckets is None:
            continue
        count = round(max(buckets.values(), default=0.0))
        p50, p99 = (histogram_quantile(q, buckets) for q in (0.5, 0.99))
        rows.append(
            StageFigure(
                *key,
                count=count,
                p50_ms=None if p50 is None else p50 * 1000,
                p99_ms=None if p99 is None else p99 * 1000,
            )
        )
    return rows


def budget_key(path: str, rf: int | None, acks: str | None, rate: int | None) -> str:
    """The ``budget`` key of the row a budget was measured with: ``proxy_rf3_acks1``,
    ``proxy_rf3_acksall``, ``e2e_1k``."""
    if path == "e2e" and rate is not None:
        return f"e2e_{rate_label(rate)}"
    return f"{path}_rf{rf}_acks{acks}"
