"""The chaos run's table and ``loadtest/results/chaos.json``.

The document's top level holds ``lost``, ``duplicated``, ``reordered``, ``moved`` (each the
sum over classes of the larger of the class's two reads: right after its phase and at the
end), ``faults_injected`` and ``classes``: one entry per fault class (faults, acked, lost,
duplicated, reordered, moved, etcd elections, notes and more). ``merge`` keeps the classes
of an earlier document that this run did not run (a suite split into two bounded runs) and
recomputes the totals.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from loadtest.chaos.runner import ClassResult

__all__ = ["document", "table", "write"]

FINDINGS = ("lost", "duplicated", "reordered", "moved")


def _worst(entry: dict[str, Any], key: str) -> int:
    final = entry.get("final_read") or {}
    return max(int(entry.get(key) or 0), int(final.get(key) or 0))


def document(results: list[ClassResult], settings: dict[str, Any]) -> dict[str, Any]:
    classes = {r.name: r.entry() for r in results}
    return _totals(classes, settings)


def _totals(classes: dict[str, dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        key: sum(_worst(e, key) for e in classes.values() if not e.get("skipped"))
        for key in FINDINGS
    }
    out["faults_injected"] = sum(int(e.get("faults") or 0) for e in classes.values())
    out["unread_classes"] = [name for name, e in classes.items() if e.get("unread")]
    out["acked"] = sum(int(e.get("acked") or 0) for e in classes.values())
    out["finished_at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    out["settings"] = settings
    out["classes"] = classes
    return out


def write(path: Path, doc: dict[str, Any], *, merge: bool) -> dict[str, Any]:
    if merge and path.exists():
        earlier = json.loads(path.read_text())
        classes = dict(earlier.get("classes", {}))
        classes.update({k: v for k, v in doc["classes"].items() if not v.get("skipped")})
        before = earlier.get("settings") or {}
        runs = before.get("runs", [before] if before else [])
        settings = {"runs": [*runs, doc["settings"]]}
        doc = _totals(classes, settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def table(doc: dict[str, Any]) -> str:
    header = (
        f"{'class':<28}{'faults':>7}{'acked':>9}{'lost':>6}{'dup':>5}{'reord':>6}{'moved':>6}"
        f"{'etcd el.':>9}"
    )
    lines = [header, "-" * len(header)]
    for name, entry in doc["classes"].items():
        if entry.get("skipped"):
            lines.append(f"{name:<28}  skipped: {entry['skipped']}")
            continue
        cells = "".join(
            f"{_worst(entry, k):>{w}}" for k, w in zip(FINDINGS, (6, 5, 6, 6), strict=True)
        )
        unread = "  NOT READ: no verdict" if entry.get("unread") else ""
        elections = entry.get("etcd_elections")
        cells += f"{'-' if elections is None else elections:>9}"
        lines.append(f"{name:<28}{entry['faults']:>7}{entry['acked']:>9}{cells}{unread}")
    lines.append("-" * len(header))
    cells = "".join(f"{doc[k]:>{w}}" for k, w in zip(FINDINGS, (6, 5, 6, 6), strict=True))
    lines.append(f"{'total':<28}{doc['faults_injected']:>7}{doc['acked']:>9}{cells}")
    return "\n".join(lines)
