"""The share-state save figures of a bench-queue phase: buckets read from a ``/metrics`` text,
diffed between two scrapes, quantiles as Prometheus computes them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from loadtest.queue.saves import SAVE_METRIC, save_buckets, save_figures
from yak_broker.share.share_metrics import SAVE_BUCKETS


def _text(*seconds: float) -> str:
    registry = CollectorRegistry()
    histogram = Histogram(SAVE_METRIC, "saves", buckets=SAVE_BUCKETS, registry=registry)
    for value in seconds:
        histogram.observe(value)
    return generate_latest(registry).decode()


def test_buckets_are_read_from_a_metrics_text_and_other_families_ignored() -> None:
    buckets = save_buckets(_text(0.003, 0.02) + "# TYPE other counter\nother_total 3.0\n")
    assert buckets[0.005] == 1
    assert buckets[0.025] == 2
    assert buckets[float("inf")] == 2


def test_figures_count_only_the_saves_between_the_scrapes() -> None:
    before = save_buckets(_text(*[0.2] * 50))
    after = save_buckets(_text(*[0.2] * 50, *[0.004] * 100))
    figures = save_figures("delays", before, after)
    assert figures["delays_saves"] == 100
    assert 2.5 <= figures["delays_save_p50_ms"] <= 5
    assert figures["delays_save_p99_ms"] <= 5


def test_a_failed_scrape_gives_no_figures() -> None:
    assert save_figures("share", None, save_buckets(_text(0.01))) == {}
