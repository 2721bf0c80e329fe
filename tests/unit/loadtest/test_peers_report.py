"""The comparison's report rendered from fixed results: ratios, JSON, markdown, plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtest.peers.histogram import Percentiles, WindowSummary
from loadtest.peers.plots import plot_workloads
from loadtest.peers.report import (
    CONSUME_WORKLOAD,
    LATENCY_WORKLOAD,
    PRODUCE_WORKLOAD,
    document,
    markdown,
    met,
    ratios,
    write_json,
)
from loadtest.peers.result import RunResult, SearchStep

ENVIRONMENT = {
    "date": "2025-01-01 00:00 UTC",
    "command": "python -m loadtest.peers",
    "quick": False,
    "machine": "a CPU, 2 logical CPUs, 4.0 GiB RAM",
    "load": "load average 0.10 / 0.10 / 0.10 (1 / 5 / 15 min) at start",
    "versions": {
        "yak": "0.1.0 (abc123)",
        "redis-server": "Redis server v=7.0.15",
        "nats-server": "nats-server: v2.9.10",
        "python": "3.11.2",
    },
}


def result(workload: str, driver: str, publish: float, consume: float, p99: float) -> RunResult:
    latency = Percentiles(1000, p99 / 2, p99 * 0.8, p99, p99 * 1.5, p99 * 2)
    window = WindowSummary(0.0, publish, consume, latency, latency)
    return RunResult(
        workload=workload,
        driver=driver,
        rate=0.0 if workload != LATENCY_WORKLOAD else 10_000.0,
        sustained=True,
        publish_rate=publish,
        consume_rate=consume,
        publish_latency=latency,
        e2e_latency=latency,
        published=int(publish * 30),
        consumed=int(consume * 30),
        errors=0,
        duration_s=30.0,
        windows=[window, window._replace(start_s=10.0)],
        search=[SearchStep(None, publish * 2, consume, 40.0, False)],
    )


RESULTS = [
    result(PRODUCE_WORKLOAD, "yak-rest", 40_000, 40_000, 90),
    result(PRODUCE_WORKLOAD, "yak-sdk", 30_000, 30_000, 80),
    result(PRODUCE_WORKLOAD, "yak-rest-rf1", 60_000, 60_000, 70),
    result(PRODUCE_WORKLOAD, "redis", 80_000, 80_000, 20),
    result(PRODUCE_WORKLOAD, "nats", 20_000, 20_000, 30),
    result(CONSUME_WORKLOAD, "yak-rest", 40_000, 60_000, 900),
    result(CONSUME_WORKLOAD, "redis", 90_000, 120_000, 800),
    result(LATENCY_WORKLOAD, "yak-rest", 10_000, 10_000, 50),
    result(LATENCY_WORKLOAD, "redis", 10_000, 10_000, 10),
]


def test_ratios_use_the_named_workloads() -> None:
    assert ratios(RESULTS) == {
        "produce_vs_redis": pytest.approx(0.5),
        "produce_vs_nats": pytest.approx(2.0),
        "consume_vs_redis": pytest.approx(0.5),
        "e2e_p99_vs_redis": pytest.approx(5.0),
    }
    sdk = ratios(RESULTS, "yak-sdk")
    assert sdk["produce_vs_redis"] == pytest.approx(0.375)
    assert sdk["consume_vs_redis"] is None  # the SDK did not run that workload
    rf1 = ratios(RESULTS, "yak-rest-rf1")
    assert rf1["produce_vs_redis"] == pytest.approx(0.75)


def test_goals() -> None:
    assert met("produce_vs_nats", 2.0) is True
    assert met("produce_vs_redis", 0.99) is False
    assert met("e2e_p99_vs_redis", 1.5) is True
    assert met("e2e_p99_vs_redis", None) is None


def test_json_round_trips(tmp_path: Path) -> None:
    doc = document(RESULTS, ENVIRONMENT, {"redis": "Redis Streams"})
    path = tmp_path / "peers.json"
    write_json(path, doc)
    loaded = json.loads(path.read_text())
    assert loaded["ratios_use"] == "yak-rest"
    assert loaded["ratios"]["produce_vs_nats"] == pytest.approx(2.0)
    assert [RunResult.from_json(r) for r in loaded["results"]] == RESULTS


def test_markdown_has_the_tables_and_plots() -> None:
    doc = document(RESULTS, ENVIRONMENT, {"redis": "Redis Streams"})
    text = markdown(doc, RESULTS, {PRODUCE_WORKLOAD: f"benchmarks/{PRODUCE_WORKLOAD}.png"})
    assert (
        "| `produce_vs_redis` | 0.50x missed | 0.75x missed | 0.38x missed | n/a | >= 1x |" in text
    )
    assert "| `produce_vs_nats` | 2.00x met | 3.00x met | 1.50x missed | n/a | >= 2x |" in text
    assert "| `consume_vs_redis` | 0.50x missed | n/a | n/a | n/a | >= 1x |" in text
    assert (
        f"| {LATENCY_WORKLOAD} | yak-rest | 10,000 | 10,000 | 10,000 | 25.0 / 50.0 | "
        "25.0 / 50.0 / 75.0 / 100 | 0 |"
    ) in text
    assert f"![{PRODUCE_WORKLOAD}](benchmarks/{PRODUCE_WORKLOAD}.png)" in text
    assert "Redis server v=7.0.15" in text
    assert "- **redis**: Redis Streams" in text


def test_plots_are_small_pngs(tmp_path: Path) -> None:
    paths = plot_workloads(RESULTS, tmp_path)
    assert set(paths) == {PRODUCE_WORKLOAD, CONSUME_WORKLOAD, LATENCY_WORKLOAD}
    for path in paths.values():
        data = path.read_bytes()
        assert data.startswith(b"\x89PNG")
        assert len(data) < 80_000
