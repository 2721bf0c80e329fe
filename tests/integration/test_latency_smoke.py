"""``make bench-latency`` end to end, tiny (about 20 s): Redis, a baseline cluster on a ``git
worktree`` of HEAD and a cluster on this checkout, a few samples of every idle row, one short
end-to-end rate and a small CPU phase; the results document holds every row, the services of
the baseline ran the worktree's code, the worktree is gone, and the page is left alone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.smoke import ROOT, run_module

pytestmark = pytest.mark.integration


def _worktrees() -> set[str]:
    listing = subprocess.run(
        ["git", "worktree", "list", "--porcelain"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line.split(" ", 1)[1] for line in listing.splitlines() if line.startswith("worktree ")}


def test_a_tiny_latency_run_measures_every_path(tmp_path: Path) -> None:
    results = tmp_path / "latency.json"
    page = ROOT / "docs" / "performance.md"
    page_before = page.read_text() if page.exists() else None
    worktrees_before = _worktrees()
    ran = run_module(
        "loadtest.bench_latency",
        [
            *("--baseline", "HEAD", "--no-baseline-e2e"),
            *("--samples", "10", "--warmup", "2", "--rates", "300"),
            *("--e2e-warmup", "0.5", "--e2e-duration", "1", "--cpu-records", "2000"),
            *("--cpu-warmup-requests", "1", "--no-doc", "--results", str(results)),
        ],
        timeout_s=90,
    )
    output, elapsed = ran.output, ran.elapsed_s
    assert ran.returncode == 0, output
    assert elapsed < 90, f"the smoke run took {elapsed:.0f} s"

    document = json.loads(results.read_text())
    assert document["failures"] == {}
    rows = {(r["system"], r["path"], r["rf"], r["acks"]) for r in document["rows"]}
    for system in ("yak", "yak-before"):
        for path in ("broker", "proxy"):
            for rf in (1, 3):
                for acks in ("0", "1", "all"):
                    assert (system, path, rf, acks) in rows
    assert ("redis", "xadd", 1, None) in rows
    assert ("yak", "e2e", 3, "all") in rows
    assert ("yak", "e2e_httpx", 3, "all") in rows
    assert ("redis", "e2e", 1, None) in rows
    assert ("yak", "proxy_b2b", 1, "1") in rows
    assert ("redis", "xadd_b2b", 1, None) in rows
    failures = [line for line in output.splitlines() if "failed" in line][-5:]
    for row in document["rows"]:
        assert row["errors"] == 0, (row, failures)  # the run's own log says which call failed
        assert row["samples"] > 0, row
        assert 0 < row["p50"] <= row["p99"] < 10_000, row
    idle = [r for r in document["rows"] if not r["path"].startswith("e2e")]
    assert all(r["samples"] == 10 for r in idle)
    for key in ("proxy_acks1_p50_ms", "proxy_acksall_p50_ms", "redis_xadd_p50_ms"):
        assert document[key] > 0, key
    builds = {c["build"]: c for c in document["cpu"]}
    assert set(builds) == {"current", "baseline"}
    for phase in builds.values():
        assert phase["records"] == 2000
        assert phase["errors"] == phase["failed_requests"] == 0
        assert set(phase["counted"]) == {"rest-proxy-0", "broker-0", "broker-1", "broker-2"}
    baseline = document["code"]["baseline"]
    assert {"coordinator", "broker-0", "rest-proxy-0", "broker probe"} <= set(baseline)
    assert all("yak-bench-latency-baseline-" in files for files in baseline.values())
    assert document["code"]["current"]["yak"].startswith(str(ROOT))
    assert document["goals"][0]["goal"] == "proxy acks=1 p50 ≤ 1 ms"
    left = {w for w in _worktrees() - worktrees_before if "yak-bench-latency-baseline-" in w}
    assert not left
    assert (page.read_text() if page.exists() else None) == page_before
