"""Benchmark of the delay index with one million pending delays: memory, disk, query time.

Run ``python -m loadtest.bench_delay_index [--count N] [--compare-count N] [--dir PATH]``. In a
fresh child process each, the index's default bucket width with ``--count`` records and, for
comparison, 10 s buckets with ``--compare-count`` (10 s buckets make one file per 10 s of the
30 days: 259,200 files for a full million, too slow to create and fsync on a shared disk):

- appends ``--count`` delayed records (offsets 0..N-1) whose due times are spread uniformly over
  30 days, through ``DelayIndex.append`` in batches of 500 as the broker's indexer would hand
  them over from log reads, with a ``checkpoint`` every ``--checkpoint-every`` records (the
  fsync of every bucket file touched since the last one; its total time is reported apart);
- reports the process's RSS growth over the run (``VmRSS`` and peak ``VmHWM`` from
  ``/proc/self/status``, baseline taken after the imports and an empty index), the index's
  disk use (apparent bytes and allocated blocks, and the number of files), and the append rate;
- ``advance(now)`` loads the horizon; then the time of ``due()`` over one whole bucket that is in
  memory and over one that is read from disk first, and the time to reopen the index (``open``
  checks the tail of every bucket file against the cursor).

Results go to ``loadtest/results/delay_index.json``. The goal from issue 30: one million pending
delays cost roughly their 16 MB of disk and well under 200 MB of RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

from yak_broker.storage.delay_index import DEFAULT_BUCKET_MS, DelayIndex
from yak_broker.storage.delay_scan import DelayScan

RESULTS = Path(__file__).parent / "results" / "delay_index.json"
DAY_MS = 86_400_000
BATCH = 500
NOW_MS = 1_767_225_600_000
MB = 1_000_000


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _disk(folder: Path) -> tuple[int, int, int]:
    files = apparent = allocated = 0
    for entry in os.scandir(folder):
        stat = entry.stat()
        files += 1
        apparent += stat.st_size
        allocated += stat.st_blocks * 512
    return files, apparent, allocated


def _timed(run: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = run()
    return (time.perf_counter() - start) * 1000, result


def run_one(
    folder: Path, count: int, bucket_ms: int, checkpoint_every: int, seed: int
) -> dict[str, Any]:
    """One width in this process (call it in a fresh process for a clean RSS baseline)."""
    rng = random.Random(seed)
    index = DelayIndex.open(folder, bucket_ms=bucket_ms)
    rss_before, hwm_before = _status_kb("VmRSS"), _status_kb("VmHWM")
    append_s = checkpoint_s = 0.0
    checkpoints = 0
    for first in range(0, count, BATCH):
        offsets = array("q", range(first, min(first + BATCH, count)))
        due = array("q", (NOW_MS + rng.randrange(1, 30 * DAY_MS) for _ in offsets))
        started = time.perf_counter()
        index.append(DelayScan(due, offsets, (), offsets[-1] + 1), offsets[-1] + 1)
        append_s += time.perf_counter() - started
        if (first + BATCH) % checkpoint_every == 0 or first + BATCH >= count:
            started = time.perf_counter()
            index.checkpoint()
            checkpoint_s += time.perf_counter() - started
            checkpoints += 1
    index.advance(NOW_MS)
    rss_after, hwm_after = _status_kb("VmRSS"), _status_kb("VmHWM")
    files, apparent, allocated = _disk(folder)
    horizon_bucket = index.bucket_of(NOW_MS)
    far_bucket = index.bucket_of(NOW_MS + 15 * DAY_MS)
    due_loaded_ms, loaded = _timed(
        lambda: index.due(horizon_bucket - 1, horizon_bucket + bucket_ms - 1, count)
    )
    due_disk_ms, far = _timed(lambda: index.due(far_bucket - 1, far_bucket + bucket_ms - 1, count))
    next_due_ms, _ = _timed(lambda: index.next_due_ms(NOW_MS))
    pending_ms, page = _timed(lambda: index.pending(NOW_MS + 20 * DAY_MS, 100))
    loaded_entries = index.loaded_entries
    index.close()
    reopen_ms, reopened = _timed(lambda: DelayIndex.open(folder, bucket_ms=bucket_ms))
    assert reopened.cursor == count
    assert len(page) == 100
    return {
        "bucket_ms": bucket_ms,
        "pending": count,
        "append_records_per_s": round(count / append_s),
        "checkpoints": checkpoints,
        "checkpoint_total_s": round(checkpoint_s, 1),
        "checkpoint_mean_ms": round(checkpoint_s * 1000 / checkpoints, 1),
        "rss_growth_mb": round((rss_after - rss_before) * 1024 / MB, 1),
        "peak_rss_growth_mb": round((hwm_after - hwm_before) * 1024 / MB, 1),
        "loaded_entries_in_horizon": loaded_entries,
        "files": files,
        "disk_apparent_mb": round(apparent / MB, 1),
        "disk_allocated_mb": round(allocated / MB, 1),
        "due_one_loaded_bucket_ms": round(due_loaded_ms, 2),
        "due_one_loaded_bucket_entries": len(loaded.offsets),
        "due_one_bucket_from_disk_ms": round(due_disk_ms, 2),
        "due_one_bucket_from_disk_entries": len(far.offsets),
        "next_due_ms_us": round(next_due_ms * 1000, 1),
        "pending_page_of_100_ms": round(pending_ms, 2),
        "reopen_ms": round(reopen_ms, 1),
    }


def _child(count: int, bucket_ms: int, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "loadtest.bench_delay_index", "--child"]
    command += ["--count", str(count), "--bucket-ms", str(bucket_ms), "--dir", str(base)]
    command += ["--seed", str(args.seed), "--checkpoint-every", str(args.checkpoint_every)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(output)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--compare-count", type=int, default=100_000)
    parser.add_argument("--checkpoint-every", type=int, default=100_000)
    parser.add_argument("--bucket-ms", type=int, default=DEFAULT_BUCKET_MS)
    parser.add_argument("--dir", type=Path, default=None, help="scratch folder (default: tmp)")
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="bench-delays-", dir=args.dir))
    try:
        if args.child:
            folder = base / "delays"
            run = run_one(folder, args.count, args.bucket_ms, args.checkpoint_every, args.seed)
            print(json.dumps(run))
            return
        runs = [_child(args.count, DEFAULT_BUCKET_MS, args, base)]
        if args.compare_count:
            runs.append(_child(args.compare_count, 10_000, args, base))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    result = {
        "default_bucket_ms": DEFAULT_BUCKET_MS,
        "spread_days": 30,
        "batch": BATCH,
        "checkpoint_every_records": args.checkpoint_every,
        "python": sys.version.split()[0],
        "runs": runs,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
