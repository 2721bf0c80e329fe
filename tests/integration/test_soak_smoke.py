"""A 20-second soak (``loadtest.soak``, the body of ``make soak``): real etcd, coordinator,
3 brokers and a proxy, two broker restarts (SIGTERM, then kill -9), every acknowledged record
consumed, the results document and the plots written; within a minute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.smoke import run_module

pytestmark = pytest.mark.integration


def test_a_short_soak_restarts_brokers_and_loses_nothing(tmp_path: Path) -> None:
    results = tmp_path / "soak.json"
    ran = run_module(
        "loadtest.soak",
        [
            *("--duration", "20s", "--restart-every", "8s"),
            *("--rate", "200", "--sample-every", "2s", "--drain-timeout", "15s"),
            *("--results", str(results), "--plots", str(tmp_path / "plots")),
        ],
        timeout_s=60,
    )
    output, elapsed = ran.output, ran.elapsed_s
    assert ran.returncode == 0, output
    assert elapsed < 60, f"the smoke soak took {elapsed:.0f} s"

    document = json.loads(results.read_text())
    delivery = document["delivery"]
    assert delivery["ok"], delivery
    assert delivery["lost"] == 0
    assert delivery["acked"] >= 0.9 * 200 * 20
    assert delivery["consumed_unique"] >= delivery["acked"]
    assert [(r["broker"], r["signal"]) for r in document["restarts"]] == [
        (0, "SIGTERM"),
        (1, "SIGKILL"),
    ]
    processes = document["processes"]
    assert {"etcd", "coordinator", "broker-0", "broker-1", "broker-2", "rest-proxy-0"} <= set(
        processes
    )
    assert len(processes["broker-1"]["incarnations"]) == 2  # killed and started again
    for name in ("etcd", "coordinator", "rest-proxy-0"):
        assert processes[name]["rss_mb_per_hour"] is not None, name
        assert processes[name]["fds_per_hour"] is not None, name
    assert "produce_p99_ms_per_hour" in document["latency"]
    assert len(document["windows"]) >= 8
    for name in ("rss", "fds", "latency", "throughput"):
        assert (tmp_path / "plots" / f"soak-{name}.png").stat().st_size > 1000
