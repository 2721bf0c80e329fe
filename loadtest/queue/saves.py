"""The share-state saves of a phase, from the brokers' ``/metrics``: each broker's
``yak_share_state_save_seconds`` histogram (``yak_broker.share.share_metrics``) scraped before
and after the phase, summed over the brokers, diffed, and its count, p50 and p99 computed as
Prometheus' ``histogram_quantile`` does (``loadtest.latency.histograms``). It is the hop an
acquisition or acknowledgement waits on at the leader before it is answered: the budget per hop
of the share path. A broker that does not answer leaves the figures out (None).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from loadtest.latency.histograms import add_histograms, diff_histograms, histogram_quantile

__all__ = ["SAVE_METRIC", "save_buckets", "save_figures", "scrape_saves"]

SAVE_METRIC = "yak_share_state_save_seconds"
_KEY = ("broker", "share", "save")


def save_buckets(text: str) -> dict[float, float]:
    """The cumulative save-latency buckets of one ``/metrics`` text (empty: not exported)."""
    found: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != SAVE_METRIC or family.type != "histogram":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket") and "le" in sample.labels:
                found[float(sample.labels["le"])] = sample.value
    return found


async def scrape_saves(http: httpx.AsyncClient, urls: Iterable[str]) -> dict[float, float] | None:
    """The save buckets summed over the brokers at ``urls``; None if one did not answer."""
    parts = []
    for url in urls:
        try:
            response = await http.get(f"{url}/metrics", timeout=10)
            response.raise_for_status()
        except httpx.HTTPError:
            return None
        parts.append({_KEY: save_buckets(response.text)})
    return add_histograms(*parts).get(_KEY, {})


def save_figures(
    prefix: str, before: Mapping[float, float] | None, after: Mapping[float, float] | None
) -> dict[str, Any]:
    """``<prefix>_saves``, ``<prefix>_save_p50_ms``, ``<prefix>_save_p99_ms`` of the saves
    between two scrapes (nothing when a scrape failed)."""
    if before is None or after is None:
        return {}
    diffed = diff_histograms({_KEY: after}, {_KEY: before}).get(_KEY, {})
    count = max(diffed.values(), default=0.0)
    figures: dict[str, Any] = {f"{prefix}_saves": round(count)}
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        value = histogram_quantile(q, diffed) if count else None
        figures[f"{prefix}_save_{name}_ms"] = round(value * 1000, 2) if value is not None else None
    return figures
