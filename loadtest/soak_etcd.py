"""What etcd itself says about its growth during a soak: each member's ``/metrics`` scraped
with every sample.

Why: the first soak saw etcd's resident memory grow 182 MB/hour and could not say of what.
etcd's own gauges separate the candidates — the backend file (``db_total``: bbolt never gives
pages back to the file system without a defrag; ``db_in_use``: what live revisions occupy),
the keys and revisions (history kept until a compaction), and the raft log held in memory
until a snapshot (``snapshots``: every ``--snapshot-count`` applied entries, 100,000 by
default, a snapshot lets etcd drop the older entries) — and the counters give the write rate
the services cause (``puts``, ``txns``, ``proposals``). ``etcd_summary`` turns the samples
into rates per second and growth per hour per member.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import httpx

from loadtest.soak_stats import ProcessSample, per_hour, process_slopes

__all__ = [
    "CATCHUP_ENTRIES",
    "METRICS",
    "after_log_full",
    "etcd_summary",
    "log_full_times",
    "parse_metrics",
    "scrape_members",
]

#: Raft entries etcd 3.4 keeps after each snapshot for slow followers (a constant there;
#: etcd-io/etcd#17098): with ``--snapshot-count=N`` a member holds at most N + this many.
CATCHUP_ENTRIES = 5_000

#: Short name -> etcd metric (summed over its labels). Present in 3.4 and 3.5.
METRICS = {
    "db_total_mb": "etcd_mvcc_db_total_size_in_bytes",
    "db_in_use_mb": "etcd_mvcc_db_total_size_in_use_in_bytes",
    "keys": "etcd_debugging_mvcc_keys_total",
    "revision": "etcd_debugging_mvcc_current_revision",
    "compact_revision": "etcd_debugging_mvcc_compact_revision",
    "puts": "etcd_mvcc_put_total",
    "txns": "etcd_mvcc_txn_total",
    "deletes": "etcd_mvcc_delete_total",
    "proposals": "etcd_server_proposals_committed_total",
    "snapshots": "etcd_debugging_snap_save_total_duration_seconds_count",
    "leases_granted": "etcd_debugging_lease_granted_total",
    "watchers": "etcd_debugging_mvcc_watcher_total",
    "heap_mb": "go_memstats_heap_inuse_bytes",
}
_MB = {"db_total_mb", "db_in_use_mb", "heap_mb"}
#: Counters: reported as a rate per second over the run.
COUNTERS = ("revision", "puts", "txns", "deletes", "proposals", "leases_granted", "snapshots")
#: Gauges: reported first, last and as growth per hour.
GAUGES = ("db_total_mb", "db_in_use_mb", "keys", "heap_mb", "watchers")


def parse_metrics(text: str) -> dict[str, float]:
    """The ``METRICS`` found in a Prometheus text exposition (bytes as MB)."""
    wanted = {metric: short for short, metric in METRICS.items()}
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, value = line.rpartition(" ")
        short = wanted.get(name_part.split("{", 1)[0])
        if short is None:
            continue
        try:
            number = float(value)
        except ValueError:
            continue
        found[short] = found.get(short, 0.0) + number
    for short in _MB & found.keys():
        found[short] = round(found[short] / 1e6, 3)
    return found


async def scrape_members(
    client: httpx.AsyncClient, members: dict[str, str], t_s: float
) -> list[dict[str, Any]]:
    """One sample per member that answers: ``{"member", "t_s", <METRICS>...}``."""
    out = []
    for member, url in members.items():
        try:
            answer = await client.get(f"{url}/metrics", timeout=2.0)
        except httpx.HTTPError:
            continue
        if answer.status_code == 200:
            out.append({"member": member, "t_s": round(t_s, 2), **parse_metrics(answer.text)})
    return out


def etcd_summary(samples: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per member: counters' rates per second (from the first and last sample of the longest
    stretch without a restart, where a counter never falls), gauges first/last/per hour."""
    by_member: dict[str, list[dict[str, Any]]] = {}
    for sample in samples:
        by_member.setdefault(sample["member"], []).append(sample)
    out: dict[str, dict[str, Any]] = {}
    for member, points in by_member.items():
        points.sort(key=lambda s: s["t_s"])
        stretch = _longest_stretch(points)
        first, last = stretch[0], stretch[-1]
        span = last["t_s"] - first["t_s"]
        entry: dict[str, Any] = {"samples": len(points), "span_s": round(span, 1)}
        for key in COUNTERS:
            if key in first and key in last and span > 0:
                entry[f"{key}_per_s"] = round((last[key] - first[key]) / span, 2)
        for key in GAUGES:
            values = [p.get(key) for p in points]
            slope = per_hour([p["t_s"] for p in points], values)
            present = [v for v in values if v is not None]
            if present:
                entry[key] = {
                    "first": present[0],
                    "last": present[-1],
                    "max": max(present),
                    "per_hour": None if slope is None else round(slope, 2),
                }
        out[member] = entry
    return out


def _longest_stretch(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The longest run of samples in which ``proposals`` never fell (a restarted member
    starts its counters again from zero)."""
    best: list[dict[str, Any]] = []
    current: list[dict[str, Any]] = []
    for point in points:
        if current and point.get("proposals", 0) < current[-1].get("proposals", 0):
            current = []
        current.append(point)
        if len(current) > len(best):
            best = list(current)
    return best


def log_full_times(
    samples: Sequence[ProcessSample], etcd_samples: Iterable[dict[str, Any]], entries: int
) -> dict[tuple[str, int], float | None]:
    """Per etcd incarnation (name, pid): the first sample time at which it had committed
    ``entries`` raft entries since its first sample — the most its raft log in memory holds,
    so its memory's climb is over (conservative: a restarted member reloads up to a snapshot
    count of entries from its WAL); None if it never got there."""
    by_member: dict[str, list[dict[str, Any]]] = {}
    for point in etcd_samples:
        by_member.setdefault(point["member"], []).append(point)
    spans: dict[tuple[str, int], list[float]] = {}
    for sample in samples:
        if sample.name in by_member:
            spans.setdefault((sample.name, sample.pid), []).append(sample.t_s)
    out: dict[tuple[str, int], float | None] = {}
    for (name, pid), times in spans.items():
        first, last = min(times), max(times)
        points = sorted(
            (p for p in by_member[name] if first <= p["t_s"] <= last and "proposals" in p),
            key=lambda p: p["t_s"],
        )
        base = points[0]["proposals"] if points else 0.0
        out[(name, pid)] = next(
            (p["t_s"] for p in points if p["proposals"] - base >= entries), None
        )
    return out


def after_log_full(
    samples: Sequence[ProcessSample], etcd_samples: Sequence[dict[str, Any]], entries: int
) -> dict[str, Any]:
    """The etcd members' slopes fitted only on each incarnation's samples after its raft log
    in memory is full (``log_full_times``): what is left once etcd's bounded climb is over."""
    full = log_full_times(samples, etcd_samples, entries)
    kept = [
        s for s in samples if (found := full.get((s.name, s.pid))) is not None and s.t_s >= found
    ]
    return {
        "entries_in_memory": entries,
        "full_at_s": {
            f"{name}/{pid}": None if at is None else round(at, 1)
            for (name, pid), at in sorted(full.items())
        },
        "processes": process_slopes(kept),
    }
