"""A short soak (``loadtest.soak``, the body of ``make soak``): the chaos suite's cluster on
loopback (3 etcd members, 2 coordinators, 3 brokers, 2 proxies), three faults of the rotation
(kill -9 of an etcd member, of the active coordinator, SIGTERM of a broker) each healed and
logged with its time, every acknowledged record consumed, every process sampled (etcd members
included, with their own metrics), the results document and the plots written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.smoke import run_module

pytestmark = pytest.mark.integration


def test_a_short_soak_with_faults_loses_nothing(tmp_path: Path) -> None:
    results = tmp_path / "soak.json"
    ran = run_module(
        "loadtest.soak",
        [
            *("--duration", "24s", "--fault-every", "7s"),
            *("--faults", "kill-etcd,kill-coordinator,sigterm-broker"),
            *("--rate", "200", "--sample-every", "2s", "--warmup", "5s"),
            *("--drain-timeout", "15s"),
            *("--results", str(results), "--plots", str(tmp_path / "plots")),
        ],
        timeout_s=90,
    )
    output, elapsed = ran.output, ran.elapsed_s
    assert ran.returncode == 0, output
    assert elapsed < 90, f"the smoke soak took {elapsed:.0f} s"

    document = json.loads(results.read_text())
    delivery = document["delivery"]
    assert delivery["ok"], delivery
    assert delivery["lost"] == 0
    assert delivery["acked"] >= 0.8 * 200 * 24
    assert delivery["consumed_unique"] >= delivery["acked"]
    faults = document["faults"]
    assert [f["fault"] for f in faults] == ["kill-etcd", "kill-coordinator", "sigterm-broker"]
    for fault in faults:
        assert "error" not in fault, fault
        assert fault["full_isr"], fault
        assert fault["healed_s"] >= fault["injected_s"] > 0
    assert faults[0]["target"] == "etcd-0"
    assert faults[1]["target"] in {"coordinator-0", "coordinator-1"}
    processes = document["processes"]
    members = {"etcd-0", "etcd-1", "etcd-2"}
    assert members | {"coordinator-0", "broker-0", "broker-2", "proxy-0", "proxy-1"} <= set(
        processes
    )
    assert len(processes["etcd-0"]["incarnations"]) == 2  # killed and started again
    for name in ("etcd-1", "coordinator-0", "proxy-0"):
        assert processes[name]["rss_mb_per_hour"] is not None, name
        assert processes[name]["fds_per_hour"] is not None, name
    assert set(document["etcd"]) == members
    assert document["etcd"]["etcd-1"]["db_total_mb"]["last"] > 0
    assert "processes_after_warmup" in document
    assert len(document["windows"]) >= 8
    for name in ("rss", "fds", "latency", "throughput", "etcd"):
        assert (tmp_path / "plots" / f"soak-{name}.png").stat().st_size > 1000
