"""``make bench-floor``, tiny (a few seconds): both rows measured through the do-nothing proxy
and broker, the results written, every process stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.smoke import run_module

pytestmark = pytest.mark.integration


def _floor_processes() -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        if any(b"bench_floor" in part for part in argv):
            found.append(b" ".join(argv).decode(errors="replace"))
    return found


def test_a_tiny_floor_run_measures_both_rows_and_stops_its_processes(tmp_path: Path) -> None:
    results = tmp_path / "floor.json"
    ran = run_module(
        "loadtest.bench_floor",
        ["--rounds", "2", "--samples", "50", "--warmup", "5", "--out", str(results)],
        timeout_s=60,
    )
    assert ran.returncode == 0, ran.output
    document = json.loads(results.read_text())
    for row in ("one_hop", "two_hops"):
        rounds = document["rounds"][row]
        assert len(rounds) == 2
        for measured in rounds:
            assert 0 < measured["p50_ms"] <= measured["p99_ms"] < 1_000, (row, measured)
        assert document[f"{row}_p50_ms"] > 0
    assert document["samples"] == 50
    assert document["command"].startswith("python -m loadtest.bench_floor --rounds 2")
    assert not _floor_processes()
