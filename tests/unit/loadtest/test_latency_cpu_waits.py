"""Each process's CPU and wait for a CPU (``loadtest.latency.cpu_waits``): the counters read
from a /proc tree, summed per service, and the table of the budget."""

from __future__ import annotations

import os
from pathlib import Path

from loadtest.latency.cpu_waits import (
    CLIENT,
    SchedStat,
    cpu_waits,
    read_schedstat,
    service_of,
)
from loadtest.latency.page import cpu_waits_markdown


def fake_proc(root: Path, pid: int, threads: list[str]) -> None:
    for tid, text in enumerate(threads):
        task = root / str(pid) / "task" / str(pid + tid)
        task.mkdir(parents=True)
        (task / "schedstat").write_text(text)


def test_a_process_counters_are_summed_over_its_threads(tmp_path: Path) -> None:
    fake_proc(tmp_path, 7, ["1000 200 3\n", "500 50 2\n"])
    assert read_schedstat(7, tmp_path) == SchedStat(1500, 250, 5)


def test_a_process_gone_or_unreadable_reads_as_none(tmp_path: Path) -> None:
    assert read_schedstat(8, tmp_path) is None
    fake_proc(tmp_path, 9, ["not numbers\n"])
    assert read_schedstat(9, tmp_path) is None


def test_this_process_reads_from_the_real_proc() -> None:
    stat = read_schedstat(os.getpid())
    assert stat is not None
    assert stat.run_ns > 0
    assert stat.slices > 0


def test_process_names_map_to_services() -> None:
    assert service_of("broker-2") == "broker"
    assert service_of("rest-proxy-0") == "rest-proxy"
    assert service_of("etcd") == "etcd"
    assert service_of(CLIENT) == CLIENT


def test_figures_per_service_a_second_over_the_window() -> None:
    before = {
        "broker-1": SchedStat(0, 0, 0),
        "broker-2": SchedStat(1_000_000_000, 0, 100),
        "rest-proxy-0": SchedStat(0, 0, 0),
        CLIENT: SchedStat(0, 0, 0),
        "gone": SchedStat(0, 0, 0),
    }
    after = {
        "broker-1": SchedStat(400_000_000, 100_000_000, 1_000),
        "broker-2": SchedStat(1_200_000_000, 60_000_000, 1_100),
        "rest-proxy-0": SchedStat(800_000_000, 40_000_000, 2_000),
        CLIENT: SchedStat(200_000_000, 20_000_000, 400),
        "started-late": SchedStat(5, 5, 5),
    }
    figures = cpu_waits(before, after, 2.0)
    assert [f.service for f in figures] == ["rest-proxy", "broker", CLIENT]
    proxy, brokers, client = figures
    assert brokers.processes == 2
    assert brokers.cpu_ms_per_s == 300.0  # (400 + 200) ms over 2 s
    assert brokers.wait_ms_per_s == 80.0
    assert brokers.slices_per_s == 1_000.0
    assert brokers.wait_per_slice_us == 80.0
    assert proxy.cpu_ms_per_s == 400.0
    assert proxy.wait_per_slice_us == 20.0
    assert client.to_json()["wait_per_slice_us"] == 50.0
    assert cpu_waits(before, after, 0.0) == []


def test_the_table_sums_every_service() -> None:
    figures = cpu_waits(
        {"broker-1": SchedStat(0, 0, 0), "rest-proxy-0": SchedStat(0, 0, 0)},
        {
            "broker-1": SchedStat(300_000_000, 30_000_000, 300),
            "rest-proxy-0": SchedStat(100_000_000, 10_000_000, 100),
        },
        1.0,
    )
    lines = cpu_waits_markdown([f.to_json() for f in figures])
    assert lines[3] == "| rest-proxy | 1 | 100.0 | 10.0 | 100 | 100 |"
    assert lines[4] == "| broker | 1 | 300.0 | 30.0 | 300 | 100 |"
    assert lines[-1] == "| all | 2 | 400.0 | 40.0 | 400 | 100 |"
