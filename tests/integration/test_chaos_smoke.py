"""A short chaos run (``loadtest.chaos --short``, the body of ``make chaos``): real etcd
members, coordinators, brokers and proxies on loopback; three faults each of kill -9 of a
leader, SIGSTOP of a proxy and kill -9 of a coordinator under idempotent REST and SDK
producers; nothing lost, duplicated, reordered or moved, the results document written and
every process and folder gone afterwards; within ~90 s. (That the verdict finds a planted
loss or copy is ``tests/unit/loadtest/test_chaos_verdict.py``.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.smoke import run_module

pytestmark = pytest.mark.integration


def test_a_short_chaos_run_loses_nothing_and_cleans_up(tmp_path: Path) -> None:
    results = tmp_path / "chaos.json"
    ran = run_module(
        "loadtest.chaos",
        ["--short", "--loopback", "--faults", "3", "--results", str(results)],
        timeout_s=110,
    )
    assert ran.returncode == 0, ran.output
    assert ran.elapsed_s < 110, f"the smoke chaos run took {ran.elapsed_s:.0f} s"

    document = json.loads(results.read_text())
    for key in ("lost", "duplicated", "reordered", "moved"):
        assert document[key] == 0, (key, document)
    assert document["faults_injected"] == 9
    classes = document["classes"]
    assert set(classes) == {"kill-broker", "pause-proxy", "kill-coordinator"}
    for name, entry in classes.items():
        assert entry["faults"] == 3, (name, entry)
        assert entry["acked"] > 100, (name, entry)
        assert entry["final_read"]["lost"] == 0, (name, entry)
    assert "total" in ran.output  # the table was printed

    folder = document["settings"]["folder"]
    assert not Path(folder).exists(), f"{folder} left behind"
    left = subprocess.run(("pgrep", "-af", folder), capture_output=True, text=True)
    assert left.stdout == "", f"processes left behind: {left.stdout}"
