"""The chaos report (``loadtest.chaos.report``): totals take each class's worse read, skipped
classes count no findings, a class that could not be read is listed and shown, and a merge
keeps the earlier run's other classes and lists every run once."""

from __future__ import annotations

import json
from pathlib import Path

from loadtest.chaos.report import document, table, write
from loadtest.chaos.runner import ClassResult
from loadtest.chaos.verdict import Verdict


def _result(name: str, faults: int = 30, *, lost: int = 0, duplicated: int = 0) -> ClassResult:
    result = ClassResult(name, f"{name} faults", faults=faults)
    result.verdict = Verdict(acked=100, lost=lost, duplicated=duplicated)
    result.final = Verdict(acked=100)
    return result


def test_totals_take_the_worse_of_the_two_reads() -> None:
    late = _result("kill-broker")
    late.final = Verdict(acked=100, lost=3)  # damaged by a later class
    doc = document([late, _result("pause-proxy", duplicated=2)], {"run": 1})
    assert (doc["lost"], doc["duplicated"], doc["faults_injected"], doc["acked"]) == (3, 2, 60, 200)
    assert doc["classes"]["kill-broker"]["lost"] == 0  # the phase's own read
    assert doc["classes"]["kill-broker"]["final_read"]["lost"] == 3
    assert "kill-broker" in table(doc)


def test_skipped_and_unread_classes_are_reported() -> None:
    skipped = ClassResult("empty-disk", "wipe", skipped="run deadline reached")
    unread = _result("partition-leader-etcd")
    unread.unread = "the read after the phase failed"
    doc = document([skipped, unread], {})
    assert doc["unread_classes"] == ["partition-leader-etcd"]
    assert doc["faults_injected"] == 30
    shown = table(doc)
    assert "skipped: run deadline reached" in shown
    assert "NOT READ" in shown


def test_a_merge_keeps_other_classes_and_lists_runs_flat(tmp_path: Path) -> None:
    path = tmp_path / "chaos.json"
    write(path, document([_result("kill-broker"), _result("slow-disk")], {"run": 1}), merge=False)
    write(path, document([_result("slow-disk", faults=12)], {"run": 2}), merge=True)
    doc = write(path, document([_result("clock-jump", lost=1)], {"run": 3}), merge=True)
    assert list(doc["classes"]) == ["kill-broker", "slow-disk", "clock-jump"]
    assert doc["classes"]["slow-disk"]["faults"] == 12  # the later run's figures
    assert [r["run"] for r in doc["settings"]["runs"]] == [1, 2, 3]
    assert (doc["faults_injected"], doc["lost"]) == (72, 1)
    assert json.loads(path.read_text()) == doc


def test_etcd_elections_are_written_and_shown_and_unknown_is_a_dash() -> None:
    counted = _result("partition-etcd-member")
    counted.etcd_elections = 7
    doc = document([counted, _result("kill-broker")], {})
    assert doc["classes"]["partition-etcd-member"]["etcd_elections"] == 7
    assert doc["classes"]["kill-broker"]["etcd_elections"] is None
    rows = {line.split()[0]: line.split() for line in table(doc).splitlines()[2:-2]}
    assert rows["partition-etcd-member"][-1] == "7"
    assert rows["kill-broker"][-1] == "-"
