"""The latency benchmark's pure parts: percentiles, rows, ``/proc`` CPU parsing, the headline
keys, the goals, the budget per hop (Prometheus' ``histogram_quantile`` on diffed stage
histograms), the Markdown blocks, the options, and the code-path plumbing of a baseline."""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest

import loadtest.latency.budget as bench_budget
from loadtest.bench_latency import main, parse
from loadtest.latency.baseline import check_origins, code_origins, preflight
from loadtest.latency.budget import Budget, budget_rate
from loadtest.latency.cpu import CpuPhase, cpu_seconds_of_stat, parse_proc_stat
from loadtest.latency.histograms import (
    POLL_PATH,
    PRODUCE_PATH,
    RUNTIME_PATH,
    Histograms,
    StageFigure,
    add_histograms,
    budget_key,
    budget_rows,
    diff_histograms,
    histogram_quantile,
    stage_histograms,
)
from loadtest.latency.measure import cpu_seconds
from loadtest.latency.options import DEFAULT_BASELINE
from loadtest.latency.page import (
    BEGIN_MARKER,
    BUDGET_BEGIN_MARKER,
    BUDGET_END_MARKER,
    END_MARKER,
    budget_markdown,
    markdown,
    page,
    splice,
)
from loadtest.latency.results import document, evaluate_goals, headline
from loadtest.latency.rows import Row, latency_row, percentile, rate_label
from loadtest.local_cluster import CODE_FOLDERS, LocalCluster, code_path
from yak.observability.runtime import GcPauses, LoopLagMonitor
from yak.supervisor import ManagedProcess, ProcessSpec

# A real line of /proc/<pid>/stat, its command name holding a space and parentheses.
STAT = (
    "4242 (yak (rest) proxy) S 1 4242 4242 0 -1 4194560 52340 0 0 0 "
    "1234 567 0 0 20 0 3 0 12345 456789012 23456 18446744073709551615 1 1 0 0 0 0 0 "
    "16781312 16386 0 0 0 17 1 0 0 0 0 0"
)


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 90) == 90.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile(values, 0) == 1.0
    assert percentile([7.0], 99.9) == 7.0
    assert percentile([1.0, 2.0, 3.0], 50) == 2.0


@pytest.mark.parametrize("percent", [-1, 100.5])
def test_percentiles_out_of_range(percent: float) -> None:
    with pytest.raises(ValueError, match=r"within 0\.\.100"):
        percentile([1.0], percent)


def test_percentile_of_nothing() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50)


def test_a_row_sorts_its_samples() -> None:
    row = latency_row("yak", "proxy", 3, "1", [5.0, 1.0, 3.0, 2.0, 4.0], errors=1)
    assert (row.p50, row.p90, row.p99, row.samples, row.errors) == (3.0, 5.0, 5.0, 5, 1)
    assert row.to_json()["acks"] == "1"


def test_a_row_without_samples_has_no_percentiles() -> None:
    row = latency_row("yak", "broker", 1, "0", [], errors=4)
    assert (row.p50, row.p90, row.p99, row.samples) == (None, None, None, 0)


@pytest.mark.parametrize(("rate", "label"), [(1000, "1k"), (10_000, "10k"), (250, "250")])
def test_rate_labels(rate: int, label: str) -> None:
    assert rate_label(rate) == label


def test_proc_stat_counts_fields_after_the_command_name() -> None:
    assert parse_proc_stat(STAT) == (1234, 567)
    assert cpu_seconds_of_stat(STAT, 100) == pytest.approx(18.01)


@pytest.mark.parametrize("text", ["", "4242 yak S 1", "4242 (yak) S 1 2 3"])
def test_proc_stat_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(ValueError, match="/proc/<pid>/stat"):
        parse_proc_stat(text)


def test_cpu_seconds_of_this_process() -> None:
    before = cpu_seconds(os.getpid())
    sum(i * i for i in range(200_000))  # burn a little CPU
    assert cpu_seconds(os.getpid()) >= before >= 0


def test_cpu_per_record_counts_only_the_counted_processes() -> None:
    phase = CpuPhase(
        "current",
        records=100_000,
        errors=0,
        failed_requests=0,
        elapsed_s=5.0,
        cpu_s={"rest-proxy-0": 1.5, "broker-0": 0.5, "broker-1": 0.25, "coordinator": 9.0},
        counted=("rest-proxy-0", "broker-0", "broker-1"),
    )
    assert phase.records_per_s == 20_000
    assert phase.cpu_us_per_record == pytest.approx(22.5)
    data = phase.to_json()
    assert data["cpu_us_per_record_by_process"]["coordinator"] == pytest.approx(90.0)
    assert data["cpu_us_per_record"] == pytest.approx(22.5)
    empty = CpuPhase("baseline", 0, 0, 3, 1.0, {"broker-0": 1.0}, ("broker-0",))
    assert empty.cpu_us_per_record is None


def _rows() -> list[Row]:
    return [
        latency_row("yak", "proxy", 3, "1", [0.8, 0.9, 1.0]),
        latency_row("yak", "proxy", 3, "all", [1.5, 1.8, 2.5]),
        latency_row("yak", "proxy", 1, "1", [0.5, 0.6, 0.7]),
        latency_row("yak-before", "proxy", 3, "1", [4.0, 5.0, 6.0]),
        latency_row("yak", "broker", 3, "all", [1.0, 1.1, 1.2]),
        latency_row("redis", "xadd", 1, None, [0.2, 0.25, 0.3]),
        Row("yak", "e2e", 3, "all", 2.0, 3.0, 4.0, 1000, p999=4.5, max=5.0, rate=1000),
        Row(
            *("yak", "e2e", 3, "all", 5.0, 7.0, 9.0, 10_000),
            *(12.0, 20.0, 10_000),
            ack_p50=1.5,
            ack_p99=3.0,
            load=1.25,
        ),
        Row("redis", "e2e", 1, None, 1.0, 2.0, 3.0, 10_000, p999=4.0, max=5.0, rate=10_000),
        Row("yak-before", "e2e", 3, "all", 50.0, 70.0, 90.0, 9_000, p999=110.0, rate=10_000),
    ]


def _cpu() -> list[CpuPhase]:
    current = CpuPhase("current", 1000, 0, 0, 1.0, {"broker-0": 0.01}, ("broker-0",))
    baseline = CpuPhase("baseline", 1000, 0, 0, 1.0, {"broker-0": 0.03}, ("broker-0",))
    return [current, baseline]


def test_headline_keys() -> None:
    figures = headline(_rows(), _cpu())
    assert figures["proxy_acks1_p50_ms"] == 0.9
    assert figures["proxy_acksall_p50_ms"] == 1.8
    assert figures["proxy_rf1_acks1_p50_ms"] == 0.6
    assert figures["proxy_acks1_p50_ms_before"] == 5.0
    assert figures["proxy_acks0_p50_ms"] is None
    assert figures["broker_acksall_p99_ms"] == 1.2
    assert figures["redis_xadd_p50_ms"] == 0.25
    assert figures["e2e_p99_1k_ms"] == 4.0
    assert figures["e2e_p99_10k_ms"] == 9.0
    assert figures["e2e_p999_10k_ms"] == 12.0
    assert figures["redis_e2e_p99_10k_ms"] == 3.0
    assert figures["e2e_p99_10k_ms_before"] == 90.0
    assert figures["cpu_us_per_record"] == pytest.approx(10.0)
    assert figures["cpu_us_per_record_before"] == pytest.approx(30.0)


def test_goals() -> None:
    goals = {g.name: g for g in evaluate_goals(headline(_rows(), _cpu()))}
    assert goals["proxy acks=1 p50 ≤ 1 ms"].ok is True
    assert goals["proxy acks=1 p50 ≤ 5x Redis XADD p50"].value == pytest.approx(3.6)
    assert goals["proxy acks=1 p50 ≤ 5x Redis XADD p50"].ok is True
    assert goals["proxy acks=all RF 3 p50 ≤ 2 ms"].ok is True
    assert goals["e2e p99 at 1,000 msg/s ≤ 5 ms"].ok is True
    ratio = goals["e2e p99 at 10,000 msg/s ≤ 2x Redis"]
    assert (ratio.value, ratio.ok, ratio.verdict, ratio.shown) == (3.0, False, "missed", "3.00x")
    cpu = goals["CPU per record ≤ 0.5x before"]
    assert cpu.value == pytest.approx(1 / 3)
    assert cpu.ok is True
    assert cpu.detail == "10 / 30 µs"


def test_goals_without_figures_are_not_judged() -> None:
    goals = evaluate_goals({"proxy_acks1_p50_ms": 0.5, "redis_xadd_p50_ms": None})
    assert [g.verdict for g in goals] == ["ok", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a"]
    assert goals[1].shown == "n/a"


def test_the_document_has_the_keys_the_issue_names() -> None:
    env = {"date": "2026-11-25 12:00 UTC", "machine": "test", "revision": "abc"}
    doc = document(_rows(), _cpu(), env, {"idle_samples": 3})
    for key in (
        "proxy_acks1_p50_ms",
        "proxy_acksall_p50_ms",
        "redis_xadd_p50_ms",
        "e2e_p99_1k_ms",
        "e2e_p99_10k_ms",
        "redis_e2e_p99_10k_ms",
        "cpu_us_per_record",
        "cpu_us_per_record_before",
    ):
        assert doc[key] is not None, key
    assert doc["machine"] == "test"
    assert doc["settings"] == {"idle_samples": 3}
    assert len(doc["rows"]) == len(_rows())
    assert {"system", "path", "rf", "acks", "p50", "p90", "p99", "samples"} <= set(doc["rows"][0])
    assert [c["build"] for c in doc["cpu"]] == ["current", "baseline"]
    assert len(doc["goals"]) == 8


def test_markdown_block_spliced_between_the_markers() -> None:
    doc = document(_rows(), _cpu(), {"date": "today", "wall_s": 12.0}, {})
    block = markdown(doc)
    assert "| yak | e2e | 3 | all | 10,000 | 5.00 | 7.00 | 9.00 | 12.00 | 1.50 / 3.00 |" in block
    assert "| 10,000 | 0 | 1.2 |" in block
    assert "| redis | xadd | 1 | - | idle |" in block
    assert "| CPU per record ≤ 0.5x before | 0.33x | 10 / 30 µs | ok |" in block
    page = f"# Title\n\nintro\n\n{BEGIN_MARKER}\n\nold\n\n{END_MARKER}\n\n## Budget per hop\n"
    spliced = splice(page, block)
    assert "old" not in spliced
    assert spliced.startswith("# Title\n\nintro\n\n")
    assert spliced.endswith(f"{END_MARKER}\n\n## Budget per hop\n")
    assert splice(spliced, block) == spliced


def test_splice_needs_both_markers() -> None:
    with pytest.raises(ValueError, match="markers"):
        splice(f"{BEGIN_MARKER}\n{END_MARKER}", "x", BUDGET_BEGIN_MARKER, BUDGET_END_MARKER)
    with pytest.raises(ValueError, match="markers"):
        splice(f"{END_MARKER}\n{BEGIN_MARKER}", "x")
    with pytest.raises(ValueError, match="markers"):
        splice("no markers", "x")


def test_options() -> None:
    options = parse([])
    assert options.baseline == DEFAULT_BASELINE
    assert options.rates == (1_000, 10_000)
    assert options.doc is not None
    quick = parse(["--no-baseline", "--rates", "200,500", "--samples", "5", "--no-doc"])
    assert (quick.baseline, quick.rates, quick.idle.samples, quick.doc) == (
        None,
        (200, 500),
        5,
        None,
    )
    assert quick.settings()["baseline_e2e"] is False
    assert "--no-baseline" in quick.command


def test_bad_rates_are_refused() -> None:
    with pytest.raises(SystemExit):
        parse(["--rates", "0"])


def test_a_cluster_on_other_code_starts_its_services_on_that_code(tmp_path: Path) -> None:
    checkout = tmp_path / "baseline"
    path = code_path(checkout)
    assert path == tuple(str(checkout / folder) for folder in CODE_FOLDERS)
    cluster = LocalCluster(tmp_path, None, "c", 2, 5_000, python_path=path)  # type: ignore[arg-type]
    argv = cluster._command("yak-rest-proxy")
    assert argv[:2] == (sys.executable, "-c")
    assert "from yak_rest_proxy.main import main" in argv[2]
    assert cluster._code_env() == {"PYTHONPATH": os.pathsep.join(path)}
    plain = LocalCluster(tmp_path, None, "c", 2, 5_000)  # type: ignore[arg-type]
    assert plain._command("yak-broker") == (str(Path(sys.executable).with_name("yak-broker")),)
    assert plain._code_env() == {}


def test_origins_are_read_from_the_logs_and_checked(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    log = tmp_path / "broker-0.log"
    log.write_text(f"code: {tree}/shared/yak/__init__.py {tree}/services/broker/x.py\nINFO up\n")
    spec = ProcessSpec(name="broker-0", argv=("true",), log_path=log)
    process = ManagedProcess(spec, None)  # type: ignore[arg-type]
    missing = ManagedProcess(ProcessSpec("proxy", ("true",), tmp_path / "none.log"), None)  # type: ignore[arg-type]
    origins = code_origins({"broker-0": process, "proxy": missing})
    assert origins["broker-0"].startswith(f"{tree}/shared/yak/__init__.py ")
    assert origins["proxy"] == "?"
    check_origins({"broker-0": origins["broker-0"]}, tree)
    with pytest.raises(RuntimeError, match="did not import"):
        check_origins(origins, tree)
    with pytest.raises(RuntimeError, match="did not import"):
        check_origins({"broker-0": "/work/main/shared/yak/__init__.py"}, tree)


def _checkout(root: Path, broker_main: str) -> Path:
    for folder, package in (
        ("broker", "yak_broker"),
        ("coordinator", "yak_coordinator"),
        ("rest-proxy", "yak_rest_proxy"),
    ):
        path = root / "services" / folder / package
        path.mkdir(parents=True)
        (path / "__init__.py").write_text("")
        (path / "main.py").write_text(broker_main if package == "yak_broker" else "")
    return root


def test_preflight_imports_the_services_of_a_checkout(tmp_path: Path) -> None:
    preflight(code_path(_checkout(tmp_path / "good", "")))
    broken = _checkout(tmp_path / "broken", "raise ImportError('half-edited')\n")
    with pytest.raises(RuntimeError, match="half-edited"):
        preflight(code_path(broken))


def test_report_only_rewrites_the_page_from_the_results(tmp_path: Path) -> None:
    results = tmp_path / "latency.json"
    doc = document(_rows(), _cpu(), {"date": "today", "wall_s": 1.0}, {})
    results.write_text(json.dumps(doc))
    path = tmp_path / "performance.md"
    path.write_text(
        f"# P\n\n{BEGIN_MARKER}\nold\n{END_MARKER}\n\n## Budget per hop\n\n"
        f"{BUDGET_BEGIN_MARKER}\nold budget\n{BUDGET_END_MARKER}\n"
    )
    assert main(["--report-only", "--results", str(results), "--doc", str(path)]) == 0
    text = path.read_text()
    assert "old" not in text
    assert "| redis | xadd | 1 | - | idle |" in text
    assert "No stage histograms in this run." in text
    assert text.endswith(f"{BUDGET_END_MARKER}\n")


# --- budget per hop -------------------------------------------------------------------------

INF = math.inf
#: 10 observations: 2 up to 1 ms, 4 in (1, 2] ms, 4 in (2, 5] ms.
TEN = {0.001: 2.0, 0.002: 6.0, 0.005: 10.0, INF: 10.0}


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        (0.5, 0.00175),  # rank 5: 3rd of the 4 in (1, 2] ms → 1 + 1 * 3/4 ms
        (0.99, 0.004925),  # rank 9.9: 3.9th of the 4 in (2, 5] ms → 2 + 3 * 3.9/4 ms
        (0.1, 0.0005),  # rank 1 in the first bucket, which starts at 0 → 1 * 1/2 ms
        (0.2, 0.001),  # rank 2: the first bucket's top
        (1.0, 0.005),  # rank 10: the last finite bucket's top
    ],
)
def test_histogram_quantile_interpolates_inside_the_bucket(q: float, expected: float) -> None:
    assert histogram_quantile(q, TEN) == pytest.approx(expected)


def test_histogram_quantile_of_an_empty_histogram_is_none() -> None:
    assert histogram_quantile(0.5, {0.001: 0.0, 0.005: 0.0, INF: 0.0}) is None
    assert histogram_quantile(0.99, {}) is None
    assert histogram_quantile(0.5, {INF: 3.0}) is None  # fewer than two buckets
    assert histogram_quantile(0.5, {0.001: 1.0, 0.005: 3.0}) is None  # no +Inf bucket


def test_histogram_quantile_in_the_inf_bucket_is_the_highest_finite_bound() -> None:
    everything_above = {0.00005: 0.0, 0.001: 0.0, 5.0: 0.0, INF: 7.0}
    assert histogram_quantile(0.5, everything_above) == 5.0
    assert histogram_quantile(0.99, everything_above) == 5.0
    some_above = {0.001: 5.0, 0.005: 9.0, INF: 10.0}
    assert histogram_quantile(0.99, some_above) == 0.005  # rank 9.9 > 9: in +Inf
    assert histogram_quantile(0.5, some_above) == pytest.approx(0.001)  # rank 5 of 5


def test_histogram_quantile_evens_out_non_monotonic_counts() -> None:
    # As Prometheus: a bucket below its predecessor (scrapes racing) counts as its predecessor.
    assert histogram_quantile(0.5, {0.001: 4.0, 0.002: 3.0, 0.004: 8.0, INF: 8.0}) == (
        pytest.approx(0.001)
    )


def test_histogram_quantile_refuses_quantiles_out_of_range() -> None:
    with pytest.raises(ValueError, match=r"within 0\.\.1"):
        histogram_quantile(1.5, TEN)


def _bucket_lines(metric: str, labels: str, counts: Sequence[tuple[str, float]]) -> str:
    lines = [f'{metric}_bucket{{le="{le}",{labels}}} {value}' for le, value in counts]
    total = counts[-1][1]
    lines += [f"{metric}_count{{{labels}}} {total}", f"{metric}_sum{{{labels}}} 0.01"]
    return "\n".join(lines)


def _proxy_text(read: float) -> str:
    return "\n".join(
        [
            "# HELP yak_proxy_produce_stage_seconds Time of each stage.",
            "# TYPE yak_proxy_produce_stage_seconds histogram",
            _bucket_lines(
                "yak_proxy_produce_stage_seconds",
                'stage="read"',
                [("5e-05", read / 2), ("0.0001", read), ("+Inf", read)],
            ),
            "# HELP yak_http_requests_total Requests.",
            "# TYPE yak_http_requests_total counter",
            'yak_http_requests_total{route="/x"} 12.0',
            "",
        ]
    )


def _broker_text(waits: float) -> str:
    return "\n".join(
        [
            "# HELP yak_broker_fetch_stage_seconds Time of each stage of a fetch.",
            "# TYPE yak_broker_fetch_stage_seconds histogram",
            _bucket_lines(
                "yak_broker_fetch_stage_seconds",
                'request="replica_fetch",stage="wait"',
                [("0.001", 0.0), ("0.5", waits), ("+Inf", waits)],
            ),
            "# HELP yak_broker_fetch_stage_seconds_created Created.",
            "# TYPE yak_broker_fetch_stage_seconds_created gauge",
            'yak_broker_fetch_stage_seconds_created{request="replica_fetch",stage="wait"} 1.7e9',
            "",
        ]
    )


def test_stage_histograms_read_from_a_metrics_text() -> None:
    assert stage_histograms(_proxy_text(4)) == {
        ("rest-proxy", "produce", "read"): {0.00005: 2.0, 0.0001: 4.0, INF: 4.0}
    }
    assert stage_histograms(_broker_text(6)) == {
        ("broker", "replica_fetch", "wait"): {0.001: 0.0, 0.5: 6.0, INF: 6.0}
    }
    # A build without the stage histograms (the baseline): nothing, no error.
    assert (
        stage_histograms("# TYPE yak_http_requests_total counter\nyak_http_requests_total 3\n")
        == {}
    )


def test_runtime_histograms_are_read_per_service_generations_summed() -> None:
    registry = CollectorRegistry()
    pauses = GcPauses(buckets=(0.001, 0.01))
    pauses.register(registry, "broker")
    pauses.observe(0, 0.0005)
    pauses.observe(2, 0.005)
    lag = LoopLagMonitor(registry, "broker")
    lag.observe(0.002)
    found = stage_histograms(generate_latest(registry).decode())
    assert found[("broker", "runtime", "gc pause")] == {0.001: 1.0, 0.01: 2.0, INF: 2.0}
    assert found[("broker", "runtime", "event loop lag")][0.0025] == 1.0
    rows = budget_rows(found, RUNTIME_PATH)
    assert [(r.service, r.stage, r.count) for r in rows] == [
        ("broker", "event loop lag", 1),
        ("broker", "gc pause", 2),
    ]


def test_histograms_summed_over_processes_and_diffed() -> None:
    before = add_histograms(stage_histograms(_proxy_text(4)), stage_histograms(_broker_text(6)))
    more = stage_histograms(_broker_text(4))
    assert more[("broker", "replica_fetch", "wait")][0.5] == 4.0
    after = add_histograms(
        stage_histograms(_proxy_text(10)), stage_histograms(_broker_text(6)), more
    )
    assert after[("broker", "replica_fetch", "wait")] == {0.001: 0.0, 0.5: 10.0, INF: 10.0}
    window = diff_histograms(after, before)
    assert window[("rest-proxy", "produce", "read")] == {0.00005: 3.0, 0.0001: 6.0, INF: 6.0}
    assert window[("broker", "replica_fetch", "wait")] == {0.001: 0.0, 0.5: 4.0, INF: 4.0}
    # A series new since before counts from zero; a restarted one (counts went down) too.
    assert diff_histograms(before, {}) == before
    assert diff_histograms(stage_histograms(_proxy_text(2)), before) == stage_histograms(
        _proxy_text(2)
    )


def test_budget_rows_follow_the_path_and_skip_what_is_absent() -> None:
    window: Histograms = {
        ("rest-proxy", "produce", "render"): {0.0001: 3.0, INF: 3.0},
        ("rest-proxy", "produce", "read"): dict(TEN),
        ("broker", "produce", "replication"): {0.001: 0.0, INF: 0.0},
        ("broker", "fetch", "wait"): dict(TEN),  # not on the produce path
    }
    rows = budget_rows(window, PRODUCE_PATH)
    assert [(r.service, r.request, r.stage) for r in rows] == [
        ("rest-proxy", "produce", "read"),
        ("broker", "produce", "replication"),
        ("rest-proxy", "produce", "render"),
    ]
    read, replication, render = rows
    assert read.count == 10
    assert read.p50_ms == pytest.approx(1.75)
    assert read.p99_ms == pytest.approx(4.925)
    assert (replication.count, replication.p50_ms, replication.p99_ms) == (0, None, None)
    assert render.to_json() == {
        "service": "rest-proxy",
        "request": "produce",
        "stage": "render",
        "count": 3,
        "p50_ms": 0.05,
        "p99_ms": 0.099,
    }
    assert budget_rows({}, PRODUCE_PATH + POLL_PATH) == []


def test_budget_keys() -> None:
    assert budget_key("proxy", 3, "1", None) == "proxy_rf3_acks1"
    assert budget_key("proxy", 3, "all", None) == "proxy_rf3_acksall"
    assert budget_key("e2e", 3, "all", 1000) == "e2e_1k"
    assert budget_rate((1000, 10_000)) == 1000
    assert budget_rate((300,)) == 300


def _budget() -> dict[str, list[StageFigure]]:
    produce = [
        StageFigure("rest-proxy", "produce", "read", 3, 0.04, 0.09),
        StageFigure("broker", "produce", "append", 3, 0.075, 0.2),
        StageFigure("broker", "replica_fetch", "wait", 40, 2.0, 495.0),
        StageFigure("rest-proxy", "produce", "broker", 3, 1.5, 2.4),
    ]
    poll = [
        StageFigure("rest-proxy", "poll", "fetch", 900, 3.2, 9.0),
        StageFigure("broker", "fetch", "read", 900, 0.3, None),
    ]
    return {"proxy_rf3_acksall": produce, "e2e_1k": produce + poll}


def test_the_budget_in_the_document_and_on_the_page() -> None:
    env = {"date": "today", "wall_s": 1.0, "revision": "abc"}
    doc = document(_rows(), _cpu(), env, {"e2e_duration_s": 10.0}, _budget())
    doc = json.loads(json.dumps(doc))  # as read back from latency.json
    assert list(doc["budget"]) == ["proxy_rf3_acksall", "e2e_1k"]
    assert doc["budget"]["e2e_1k"][-1] == {
        "service": "broker",
        "request": "fetch",
        "stage": "read",
        "count": 900,
        "p50_ms": 0.3,
        "p99_ms": None,
    }
    block = budget_markdown(doc)
    assert "From the run of today above (abc)." in block
    assert "#### Idle produce through the rest-proxy, RF 3, acks=all" in block
    assert "| rest-proxy | read | 3 | 0.040 | 0.090 |" in block
    assert "| leader broker | ↳ append | 3 | 0.075 | 0.200 |" in block
    assert "| leader broker (followers' fetches) | ↳ replica fetch: wait | 40 | 2.00 | 495 |" in (
        block
    )
    assert "| rest-proxy | broker round trip | 3 | 1.50 | 2.40 |" in block
    assert "| leader broker (the member's fetches) | ↳ fetch: read | 900 | 0.300 | - |" in block
    assert (
        "End to end, the idle client measured p50 1.80 ms and p99 2.50 ms over the same 3 "
        "requests (the `yak` `proxy` row, RF 3, acks=all)." in block
    )
    assert "#### End to end at 1,000 msg/s" in block
    assert (
        "the client measured p50 2.00 ms and p99 4.00 ms producer → consumer over the same 10 s"
        in block
    )
    tables = block.split("####")[1:]
    assert tables[0].index("| read |") < tables[0].index("append") < tables[0].index("round")
    assert tables[1].index("round trip") < tables[1].index("| poll: fetch |")
    text = (
        f"# P\n\n{BEGIN_MARKER}\nold\n{END_MARKER}\n\n## Budget per hop\n\nHow to read it.\n\n"
        f"{BUDGET_BEGIN_MARKER}\nold\n{BUDGET_END_MARKER}\n"
    )
    rewritten = page(text, doc)
    assert "old" not in rewritten
    assert "How to read it." in rewritten
    assert rewritten.index("| redis | xadd |") < rewritten.index("#### Idle produce")
    assert page(rewritten, doc) == rewritten
    with pytest.raises(ValueError, match="budget"):
        page(f"{BEGIN_MARKER}\n{END_MARKER}\n", doc)


def test_a_budget_without_its_row_says_so() -> None:
    doc = document([], [], {"date": "today"}, {}, _budget())
    block = budget_markdown(json.loads(json.dumps(doc)))
    assert "No row for this measurement in the run." in block
    assert "No end-to-end row for this rate in the run." in block


def test_the_budget_scrapes_around_the_chosen_measurements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scrapes: list[tuple[str, ...]] = []
    answers = iter(
        [
            stage_histograms(_proxy_text(4)),
            stage_histograms(_proxy_text(10)),
            {},  # the baseline: no stage histograms
            {},
        ]
    )

    async def scrape(urls: Sequence[str]) -> Histograms:
        scrapes.append(tuple(urls))
        return next(answers)

    monkeypatch.setattr(bench_budget, "scrape_stages", scrape)
    budget = Budget(("http://proxy", "http://broker-0"))

    async def measure() -> None:
        async with budget.idle(1, "all"):  # not a budget row: no scrape
            pass
        async with budget.idle(3, "1"):
            pass
        async with budget.e2e(1000)(10.0):
            pass

    asyncio.run(measure())
    assert scrapes == [("http://proxy", "http://broker-0")] * 4
    assert list(budget.found) == ["proxy_rf3_acks1"]  # the e2e window had no histograms
    (read,) = budget.found["proxy_rf3_acks1"]
    assert (read.stage, read.count) == ("read", 6)


def test_a_failed_scrape_leaves_the_table_out(monkeypatch: pytest.MonkeyPatch) -> None:
    async def scrape(_urls: Sequence[str]) -> Histograms:
        raise httpx.ConnectError("refused")

    monkeypatch.setattr(bench_budget, "scrape_stages", scrape)
    budget = Budget(("http://proxy",))

    async def measure() -> None:
        async with budget.idle(3, "all"):
            pass

    asyncio.run(measure())
    assert budget.found == {}


def test_the_baseline_budget_follows_the_current_one_when_the_baseline_has_one() -> None:
    figure = {
        "service": "rest-proxy",
        "request": "produce",
        "stage": "read",
        "count": 3,
        "p50_ms": 0.1,
        "p99_ms": 0.2,
    }
    row = {"system": "yak", "path": "proxy", "rf": 3, "acks": "1", "p50": 1.0, "p99": 2.0,
           "samples": 3}  # fmt: skip
    rows = [row, {**row, "system": "yak-before"}]
    doc = {"date": "d", "revision": "r", "baseline": "b", "rows": rows,
           "budget": {"proxy_rf3_acks1": [figure]}}  # fmt: skip
    alone = budget_markdown(doc)
    assert "baseline" not in alone
    text = budget_markdown({**doc, "budget_before": {"proxy_rf3_acks1": [{**figure, "count": 7}]}})
    assert text.startswith(alone.rstrip("\n"))
    assert "#### Idle produce through the rest-proxy, RF 3, acks=1 — baseline" in text
    assert "| rest-proxy | read | 7 |" in text
    assert "(the `yak-before` `proxy` row" in text
