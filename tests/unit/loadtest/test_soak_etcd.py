"""The soak's reading of etcd's own metrics: the parse of a Prometheus page and the rates and
growth per member, a restarted member's counters taken from its longest stretch."""

from __future__ import annotations

import pytest

from loadtest.soak_etcd import etcd_summary, parse_metrics

PAGE = """\
# HELP etcd_mvcc_db_total_size_in_bytes Total size of the underlying database in bytes.
# TYPE etcd_mvcc_db_total_size_in_bytes gauge
etcd_mvcc_db_total_size_in_bytes 2.097152e+06
etcd_mvcc_db_total_size_in_use_in_bytes 1.048576e+06
etcd_debugging_mvcc_keys_total 42
etcd_mvcc_put_total 1000
etcd_server_proposals_committed_total 900
etcd_debugging_snap_save_total_duration_seconds_count 1
etcd_debugging_mvcc_watcher_total{kind="a"} 3
etcd_debugging_mvcc_watcher_total{kind="b"} 4
etcd_something_else 7
go_memstats_heap_inuse_bytes not-a-number
"""


def test_parse_keeps_the_known_metrics_sums_labels_and_gives_megabytes() -> None:
    found = parse_metrics(PAGE)
    assert found == {
        "db_total_mb": pytest.approx(2.097),
        "db_in_use_mb": pytest.approx(1.049),
        "keys": 42.0,
        "puts": 1000.0,
        "proposals": 900.0,
        "snapshots": 1.0,
        "watchers": 7.0,
    }


def _sample(t_s: float, proposals: float, db: float) -> dict[str, float | str]:
    return {"member": "etcd-0", "t_s": t_s, "proposals": proposals, "db_total_mb": db}


def test_summary_rates_come_from_the_longest_stretch_without_a_restart() -> None:
    samples = [
        _sample(0, 0, 1.0),
        _sample(10, 100, 1.0),  # 10 proposals/s
        _sample(20, 5, 1.5),  # restarted: counters from zero
        _sample(30, 25, 2.0),
        _sample(40, 45, 2.5),
        _sample(50, 65, 3.0),  # 2 proposals/s for 30 s: the longer stretch
    ]
    entry = etcd_summary(samples)["etcd-0"]
    assert entry["proposals_per_s"] == 2.0
    assert entry["samples"] == 6
    db = entry["db_total_mb"]
    assert (db["first"], db["last"], db["max"]) == (1.0, 3.0, 3.0)
    assert db["per_hour"] == pytest.approx(154.29, abs=0.1)
