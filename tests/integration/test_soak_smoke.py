"""A 20-second soak (``loadtest.soak``, the body of ``make soak``): real etcd, coordinator,
3 brokers and a proxy, two broker restarts (SIGTERM, then kill -9), every acknowledged record
consumed, the results document and the plots written; within a minute."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_soak_restarts_brokers_and_loses_nothing(tmp_path: Path) -> None:
    results = tmp_path / "soak.json"
    argv = [
        sys.executable,
        *("-m", "loadtest.soak", "--duration", "20s", "--restart-every", "8s"),
        *("--rate", "200", "--sample-every", "2s", "--drain-timeout", "15s"),
        *("--results", str(results), "--plots", str(tmp_path / "plots")),
    ]
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # unwinds: the soak stops what it started
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, output
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
