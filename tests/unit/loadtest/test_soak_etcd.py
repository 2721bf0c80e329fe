"""The soak's reading of etcd's own metrics: the parse of a Prometheus page and the rates and
growth per member, a restarted member's counters taken from its longest stretch."""

from __future__ import annotations

import pytest

from loadtest.soak_etcd import after_log_full, etcd_summary, log_full_times, parse_metrics
from loadtest.soak_stats import ProcessSample, process_slopes

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


def test_etcd_is_fitted_again_once_its_raft_log_in_memory_is_full() -> None:
    """etcd-0 climbs 0.1 MB/s until it has committed 100 entries (at 100 s), then stays flat;
    its restarted incarnation never gets there. Only the first's flat part is fitted."""
    samples = [
        ProcessSample("etcd-0", 1, float(t), 30.0 + 0.1 * min(t, 100), 20)
        for t in range(0, 201, 20)
    ] + [ProcessSample("etcd-0", 2, float(t), 30.0 + 0.1 * (t - 220), 20) for t in (220, 240, 260)]
    metrics = [
        {"member": "etcd-0", "t_s": float(t), "proposals": 5.0 + t} for t in range(0, 201, 20)
    ]
    metrics += [
        {"member": "etcd-0", "t_s": float(t), "proposals": t - 220.0} for t in (220, 240, 260)
    ]
    assert log_full_times(samples, metrics, 100) == {("etcd-0", 1): 100.0, ("etcd-0", 2): None}
    after = after_log_full(samples, metrics, 100)
    assert after["full_at_s"] == {"etcd-0/1": 100.0, "etcd-0/2": None}
    assert after["processes"]["etcd-0"]["rss_mb_per_hour"] == pytest.approx(0.0)
    whole = process_slopes([s for s in samples if s.pid == 1])["etcd-0"]["rss_mb_per_hour"]
    assert isinstance(whole, float)
    assert whole > 100  # the climb, fitted with the rest
