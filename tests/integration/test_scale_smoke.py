"""``make bench-scale`` end to end, tiny (``--quick``: 60 then 200 partitions of RF 3): the
cluster converges at each step, the standby coordinator takes over after a kill -9 of the
active one, a killed broker rejoins every ISR, no lease is lost, and the document holds the
issue's keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.smoke import run_module

pytestmark = pytest.mark.integration


# Longer than the run's own limit: on overrunning it, run_module stops the benchmark with
# SIGTERM and the benchmark stops its cluster (pytest's timeout would leave it running).
@pytest.mark.timeout(360)
def test_a_tiny_scale_run_grows_converges_and_fails_over(tmp_path: Path) -> None:
    results = tmp_path / "scale.json"
    ran = run_module("loadtest.bench_scale", ["--quick", "--results", str(results)], timeout_s=300)
    assert ran.returncode == 0, ran.output
    document = json.loads(results.read_text())
    steps = document["steps"]
    assert [s["partitions"] for s in steps] == [60, 200]
    for step in steps:
        assert step["error"] is None, step
        assert step["converge_s"] is not None, step
        assert step["failover_s"] is not None, step
        assert step["failover_s"] < 60, step
        assert step["restart_to_isr_s"] is not None, step
        assert set(step["idle_cpu"]) >= {"broker-0", "broker-1", "broker-2", "coordinator-0"}
        assert all(0 <= cores < 2.5 for cores in step["idle_cpu"].values()), step
        assert all(files > 0 for files in step["open_files"].values()), step
        assert step["loop_lag_p99_ms"]["broker-0"] is not None, step
        assert step["console_topics_s"] is not None, step
        assert step["console_topic_s"] is not None, step
    assert document["leases_lost"] == 0
    for key in (
        "partitions_max",
        "converge_s_20k",
        "idle_cpu_per_broker_20k",
        "loop_lag_p99_ms_20k",
        "failover_s_20k",
        "restart_to_isr_s_20k",
    ):
        assert key in document
    assert document["figures_from_partitions"] == 200
