"""What a failed integration test's cluster logged: the warnings and errors of every service log
of each ``LocalCluster`` the test used, attached to the failure report (``tests/conftest.py``).

CI keeps only pytest's output, not the clusters' temp folders, so a failure that happened only
there (a race under load) is diagnosed from this section. Per log file: the lines at WARNING or
above, and the lines of the tracebacks that follow them, the last ``LINES_PER_LOG`` of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from loadtest.local_cluster import LocalCluster

__all__ = ["LINES_PER_LOG", "cluster_log_report", "notable_lines"]

LINES_PER_LOG = 40
_LEVELS = (" WARNING ", " ERROR ", " CRITICAL ")


def notable_lines(lines: Iterable[str], limit: int = LINES_PER_LOG) -> list[str]:
    """The last ``limit`` lines at WARNING or above, each with its traceback lines."""
    kept: list[str] = []
    in_trace = False
    for line in lines:
        if any(level in line for level in _LEVELS):
            kept.append(line)
            in_trace = True
        elif in_trace and (line.startswith((" ", "Traceback", "\t")) or "Error" in line[:60]):
            kept.append(line)
        else:
            in_trace = False
    return kept[-limit:]


def cluster_log_report(clusters: Iterable[LocalCluster]) -> str:
    """One block per log file that has notable lines; "" when none has."""
    blocks: list[str] = []
    for cluster in clusters:
        logs = Path(cluster.folder) / "logs"
        for path in sorted(logs.glob("*.log")) if logs.is_dir() else []:
            with path.open(encoding="utf-8", errors="replace") as lines:
                kept = notable_lines(line.rstrip("\n") for line in lines)
            if kept:
                blocks.append(f"== {path.name} ==\n" + "\n".join(kept))
    return "\n".join(blocks)
