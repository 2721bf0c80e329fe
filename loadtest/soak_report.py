"""The soak's results document and its printed summary (``loadtest.soak``), kept apart from
the run itself so the run's module stays readable."""

from __future__ import annotations

import datetime
from dataclasses import asdict
from pathlib import Path
from typing import Any

from loadtest.soak_etcd import CATCHUP_ENTRIES, after_log_full, etcd_summary
from loadtest.soak_stats import Delivery, ProcessSample, per_hour, percentile, process_slopes
from yak.etcd_server import SNAPSHOT_COUNT

__all__ = ["build_document", "print_summary"]


def _latency_slopes(windows: list[dict[str, Any]]) -> dict[str, float | None]:
    xs = [w["end_s"] for w in windows]
    out: dict[str, float | None] = {}
    for key in ("produce_p99_ms", "e2e_p99_ms"):
        slope = per_hour(xs, [w[key] for w in windows])
        out[f"{key}_per_hour"] = None if slope is None else round(slope, 2)
    return out


def _overall(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    found = percentile(present, 50)
    return None if found is None else round(found, 2)


def _snapshot_count(options: Any) -> int:
    """The snapshot count the soak's etcd ran with: the last ``--snapshot-count`` of its extra
    flags (later ones win), else ``yak up``'s."""
    count = SNAPSHOT_COUNT
    for flag in getattr(options, "etcd_flags", ()):
        if flag.startswith("--snapshot-count="):
            count = int(flag.split("=", 1)[1])
    return count


def build_document(
    *,
    options: Any,
    rate: float,
    probe: dict[str, float] | None,
    load_s: float,
    drain_s: float,
    acked_total: int,
    delivery: Delivery,
    faults: list[dict[str, Any]],
    windows: list[dict[str, Any]],
    samples: list[ProcessSample],
    etcd_samples: list[dict[str, Any]],
    errors: dict[str, int],
    warmup_s: float,
) -> dict[str, Any]:
    """``soak.json``: slopes per process over the whole run and after ``warmup_s``, the
    faults, the delivery account, latency per window, etcd's own metrics."""
    windows = [w for w in windows if w["start_s"] < load_s]  # not the drain's
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()}
    warm = [s for s in samples if s.t_s >= warmup_s]
    return {
        "benchmark": "soak",
        "finished_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "options": settings,
        "max_rate_probe": probe,
        "target_rate_per_s": round(rate, 1),
        "load_s": round(load_s, 1),
        "drain_s": round(drain_s, 1),
        "acked_per_s": round(acked_total / max(load_s, 1e-9), 1),
        "faults": faults,
        "delivery": {**asdict(delivery), "ok": delivery.ok},
        "warmup_s": warmup_s,
        "processes": process_slopes(samples),
        "processes_after_warmup": process_slopes(warm),
        "etcd": etcd_summary(etcd_samples),
        "etcd_after_log_full": after_log_full(
            samples, etcd_samples, _snapshot_count(options) + CATCHUP_ENTRIES
        ),
        "latency": {
            **_latency_slopes(windows),
            "produce_p99_ms_median_window": _overall([w["produce_p99_ms"] for w in windows]),
            "e2e_p99_ms_median_window": _overall([w["e2e_p99_ms"] for w in windows]),
            "e2e_p99_ms_worst_window": max(
                (w["e2e_p99_ms"] for w in windows if w["e2e_p99_ms"] is not None), default=None
            ),
        },
        "errors": errors,
        "windows": windows,
        "samples": [asdict(s) for s in samples],
        "etcd_samples": etcd_samples,
    }


def print_summary(document: dict[str, Any]) -> None:
    delivery = document["delivery"]
    print(
        f"load {document['load_s']:.0f} s at {document['target_rate_per_s']:.0f} records/s "
        f"(acked {document['acked_per_s']:.0f}/s), {len(document['faults'])} faults"
    )
    print(
        f"acked {delivery['acked']}, consumed {delivery['consumed_unique']} distinct "
        f"({delivery['duplicates']} duplicates), lost {delivery['lost']}, "
        f"failed sends {delivery['failed_sends']}"
    )
    warm = document["processes_after_warmup"]
    print(f"slopes (whole run | after {document['warmup_s']:.0f} s warm-up):")
    for name, slopes in sorted(document["processes"].items()):
        after = warm.get(name, {})
        print(
            f"  {name:<14} RSS {slopes['rss_mb_per_hour']} | {after.get('rss_mb_per_hour')} "
            f"MB/h (anonymous {slopes.get('anon_mb_per_hour')} | "
            f"{after.get('anon_mb_per_hour')}), "
            f"fds {slopes['fds_per_hour']} | {after.get('fds_per_hour')} /h"
        )
    for member, entry in sorted(document["etcd"].items()):
        print(f"  {member} metrics: {entry}")
    full = document.get("etcd_after_log_full")
    if full:
        print(
            f"etcd once its raft log in memory is full ({full['entries_in_memory']} entries; "
            f"reached at {full['full_at_s']}):"
        )
        for name, slopes in sorted(full["processes"].items()):
            print(
                f"  {name:<14} RSS {slopes['rss_mb_per_hour']} MB/h "
                f"(anonymous {slopes.get('anon_mb_per_hour')})"
            )
    print(f"  latency {document['latency']}")
    for fault in document["faults"]:
        print(
            f"  {fault['t_s']:>8.1f} s {fault['fault']:<17} {fault.get('target', '')} "
            f"healed in {fault['healed_s']} s, full ISR {fault['full_isr']}"
            + (f", error {fault['error']}" if "error" in fault else "")
            + (f", crashed {fault['crashed']}" if fault["crashed"] else "")
        )
    if document["errors"]:
        print(f"  client errors {document['errors']}")
