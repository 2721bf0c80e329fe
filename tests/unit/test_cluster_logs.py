"""``tests.cluster_logs``: which log lines a failed integration test's report carries."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from loadtest.local_cluster import LocalCluster
from tests.cluster_logs import cluster_log_report, notable_lines
from yak.etcd_server import EmbeddedEtcd

LOG = """\
2026-12-06 14:49:30,000 INFO yak_broker.main: started
2026-12-06 14:49:31,000 WARNING yak_coordinator.election: controller epoch 2 ends
2026-12-06 14:49:32,000 INFO yak_broker.main: quiet
2026-12-06 14:49:33,000 ERROR yak_rest_proxy.app: poll failed
Traceback (most recent call last):
  File "x.py", line 1, in <module>
ValueError: boom
2026-12-06 14:49:34,000 INFO yak_broker.main: after
"""


def test_notable_lines_keep_warnings_errors_and_their_tracebacks() -> None:
    kept = notable_lines(LOG.splitlines())
    assert kept == [
        "2026-12-06 14:49:31,000 WARNING yak_coordinator.election: controller epoch 2 ends",
        "2026-12-06 14:49:33,000 ERROR yak_rest_proxy.app: poll failed",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "ValueError: boom",
    ]


def test_notable_lines_keep_the_last_ones() -> None:
    lines = [f"t WARNING x: {i}" for i in range(100)]
    assert notable_lines(lines, limit=3) == [
        "t WARNING x: 97",
        "t WARNING x: 98",
        "t WARNING x: 99",
    ]


def test_the_report_names_each_log_with_something_to_say(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "broker-0.log").write_text(LOG)
    (logs / "broker-1.log").write_text("2026-12-06 14:49:30,000 INFO yak_broker.main: fine\n")
    cluster = LocalCluster(tmp_path, cast(EmbeddedEtcd, None), "c", 2, 5_000)
    report = cluster_log_report([cluster])
    assert report.startswith("== broker-0.log ==\n")
    assert "ValueError: boom" in report
    assert "broker-1.log" not in report
    assert (
        cluster_log_report([LocalCluster(tmp_path / "none", cast(EmbeddedEtcd, None), "c", 2, 1)])
        == ""
    )
