"""Benchmark of the storage engine against raw file I/O on the same disk, in the same run.

Run ``python -m loadtest.bench_storage [--quick] [--dir PATH]``. Each figure has a raw baseline:

- append (no fsync), 1 KiB records in 1 MiB and in 16 KiB batches, one batch per
  ``Log.append``: MB/s, and the ratio to ``os.write`` of the same bytes in the same chunks to a
  plain file (``append_1mib_ratio``, ``append_16kib_ratio``);
- ``flush.mode=sync`` with 16 concurrent appenders of 16 KiB batches through a
  ``GroupCommitter``: appends/s and p99 latency, and the speedup over a loop of
  ``write`` + ``fsync`` per append (``group_commit_speedup``); 2 s runs, best of the rounds;
- sequential ``Log.read`` from offset 0 in 1 MiB fetches (16 KiB batches) vs ``os.read`` of
  the segment files in 1 MiB chunks, both from the page cache (``read_ratio``);
- recovery: reopening a 1 GiB log (128 MiB with ``--quick``) of 16 KiB batches after an
  unclean stop with a torn tail, every batch CRC-checked, with the files evicted from the page
  cache first (``posix_fadvise(DONTNEED)``), vs a cold raw read of the same files
  (``recovery_mb_s``).

Batches are built with ``struct`` + CRC-32C (61-byte header + opaque record bytes): storage
never decodes records, so this measures storage, not encoding. Throughput figures are the best
of several rounds (the machine is shared); results go to ``loadtest/results/storage.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import crc32c
from rich.console import Console
from rich.table import Table

from yak_broker.storage.group_commit import GroupCommitter
from yak_broker.storage.log import FetchIsolation, Log
from yak_broker.storage.log_config import FlushMode, LogConfig

MIB = 1024 * 1024
RECORD = 1024
GOALS = {
    "append_1mib_ratio": 0.7,
    "append_16kib_ratio": 0.4,
    "group_commit_speedup": 4.0,
    "read_ratio": 0.7,
}
RESULTS = Path(__file__).parent / "results" / "storage.json"
_HEADER = struct.Struct(">qiibIhiqqqhii")


def make_batch(batch_bytes: int) -> bytes:
    """A valid batch of ``batch_bytes`` bytes holding 1 KiB "records" (opaque bytes)."""
    records = max(batch_bytes // RECORD, 1)
    body = os.urandom(batch_bytes - 61)
    now = time.time_ns() // 1_000_000
    header = bytearray(
        _HEADER.pack(0, 49 + len(body), -1, 2, 0, 0, records - 1, now, now, -1, -1, -1, records)
    )
    struct.pack_into(">I", header, 17, crc32c.crc32c(bytes(header[21:]) + body))
    return bytes(header) + body


def best_of(rounds: int, run: Callable[[Path], float], base: Path) -> float:
    """The shortest of ``rounds`` timed runs, each in a fresh folder (removed afterwards)."""
    best = float("inf")
    for i in range(rounds):
        folder = base / f"round-{i}"
        folder.mkdir()
        try:
            best = min(best, run(folder))
        finally:
            shutil.rmtree(folder)
    return best


# --- append ---------------------------------------------------------------------------------


def time_log_append(folder: Path, batch: bytes, count: int) -> float:
    log = Log.open(folder / "t-0", LogConfig())
    log.append(batch, 0)  # steady state: the first append of an epoch checkpoints the epoch
    start = time.perf_counter()
    for _ in range(count):
        log.append(batch, 0)
    elapsed = time.perf_counter() - start
    log.close_without_marker()
    return elapsed


def time_plain_write(folder: Path, batch: bytes, count: int) -> float:
    fd = os.open(folder / "plain.log", os.O_WRONLY | os.O_CREAT, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, batch)
    elapsed = time.perf_counter() - start
    os.close(fd)
    return elapsed


def bench_append(base: Path, batch_bytes: int, total: int, rounds: int) -> dict[str, float]:
    batch = make_batch(batch_bytes)
    count = total // len(batch)
    mb = count * len(batch) / 1e6
    log_s = plain_s = float("inf")
    for _ in range(rounds):  # interleaved, so both see the same disk and page-cache weather
        log_s = min(log_s, best_of(1, lambda f: time_log_append(f, batch, count), base))
        plain_s = min(plain_s, best_of(1, lambda f: time_plain_write(f, batch, count), base))
    return {"log_mb_s": mb / log_s, "plain_mb_s": mb / plain_s, "ratio": plain_s / log_s}


# --- sync mode, group commit -----------------------------------------------------------------


async def group_commit_run(folder: Path, batch: bytes, writers: int, seconds: float) -> list[float]:
    log = Log.open(folder / "t-0", LogConfig(flush_mode=FlushMode.SYNC))
    committer = GroupCommitter(log)
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def writer() -> None:
        while time.perf_counter() < stop:
            start = time.perf_counter()
            await committer.append(batch, 0)
            latencies.append(time.perf_counter() - start)

    await asyncio.gather(*(writer() for _ in range(writers)))
    await committer.close()
    log.close_without_marker()
    return latencies


def write_fsync_loop(folder: Path, batch: bytes, seconds: float) -> int:
    fd = os.open(folder / "plain.log", os.O_WRONLY | os.O_CREAT, 0o644)
    count, stop = 0, time.perf_counter() + seconds
    while time.perf_counter() < stop:
        os.write(fd, batch)
        os.fsync(fd)
        count += 1
    os.close(fd)
    return count


def bench_group_commit(base: Path, seconds: float, rounds: int) -> dict[str, float]:
    """Best of ``rounds`` interleaved runs of each side (appends/s); latency of the best run."""
    batch = make_batch(16 * 1024)
    best: list[float] = []
    plain = 0
    for i in range(rounds):
        folder = base / f"sync-{i}"
        folder.mkdir()
        try:
            latencies = asyncio.run(group_commit_run(folder, batch, 16, seconds))
            plain = max(plain, write_fsync_loop(folder, batch, seconds))
        finally:
            shutil.rmtree(folder)
        if len(latencies) > len(best):
            best = latencies
    best.sort()
    rate = len(best) / seconds
    plain_rate = plain / seconds
    return {
        "appends_s": rate,
        "p99_ms": best[int(len(best) * 0.99) - 1] * 1000,
        "p50_ms": best[len(best) // 2] * 1000,
        "plain_appends_s": plain_rate,
        "speedup": rate / plain_rate,
    }


# --- read ---------------------------------------------------------------------------------


def bench_read(base: Path, total: int, rounds: int) -> dict[str, float]:
    batch = make_batch(16 * 1024)
    folder = base / "read"
    folder.mkdir()
    try:
        log = Log.open(folder / "t-0", LogConfig())
        for _ in range(total // len(batch)):
            log.append(batch, 0)
        log.update_high_watermark(log.log_end_offset)
        files = [segment.log_path for segment in log.segments]
        size = log.size
        log_s = plain_s = float("inf")
        for _ in range(rounds):
            log_s = min(log_s, _time_log_read(log))
            plain_s = min(plain_s, _time_plain_read(files))
        log.close_without_marker()
    finally:
        shutil.rmtree(folder)
    return {
        "log_mb_s": size / 1e6 / log_s,
        "plain_mb_s": size / 1e6 / plain_s,
        "ratio": plain_s / log_s,
    }


def _time_log_read(log: Log) -> float:
    start = time.perf_counter()
    offset, end = 0, log.log_end_offset
    while offset < end:
        offset = log.read(offset, MIB, FetchIsolation.HIGH_WATERMARK).next_offset
    return time.perf_counter() - start


def _time_plain_read(files: list[Path]) -> float:
    start = time.perf_counter()
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        while os.read(fd, MIB):
            pass
        os.close(fd)
    return time.perf_counter() - start


# --- recovery ------------------------------------------------------------------------------


def _evict(folder: Path) -> None:
    for path in folder.iterdir():
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def bench_recovery(base: Path, total: int) -> dict[str, float]:
    batch = make_batch(16 * 1024)
    folder = base / "recovery"
    directory = folder / "t-0"
    folder.mkdir()
    try:
        log = Log.open(directory, LogConfig())
        for _ in range(total // len(batch)):
            log.append(batch, 0)
        size = log.size
        last = log.active_segment.log_path
        log.close_without_marker()  # no marker, recovery point 0: the whole log is rescanned
        os.truncate(last, last.stat().st_size - 1000)  # a torn tail
        _evict(directory)
        start = time.perf_counter()
        log = Log.open(directory, LogConfig())
        recover_s = time.perf_counter() - start
        assert log.recovered_truncated_bytes == len(batch) - 1000
        log.close_without_marker()
        _evict(directory)
        raw_s = _time_plain_read(sorted(directory.glob("*.log")))
    finally:
        shutil.rmtree(folder)
    return {
        "log_bytes": size,
        "recovery_mb_s": size / 1e6 / recover_s,
        "plain_read_mb_s": size / 1e6 / raw_s,
    }


# --- report ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smaller logs, fewer rounds")
    parser.add_argument("--dir", default=None, help="parent of the temporary folder (the disk)")
    args = parser.parse_args(argv)
    quick = args.quick
    rounds = 2 if quick else 3
    base = Path(tempfile.mkdtemp(prefix="yak-bench-storage-", dir=args.dir))
    console = Console()
    try:
        console.print(f"storage benchmark in {base} ({'quick' if quick else 'full'})")
        results: dict[str, Any] = {
            "append_1mib": bench_append(base, MIB, (128 if quick else 512) * MIB, rounds),
            "append_16kib": bench_append(base, 16 * 1024, (64 if quick else 256) * MIB, rounds),
            "group_commit": bench_group_commit(base, 2.0, rounds),
            "read": bench_read(base, (128 if quick else 512) * MIB, rounds),
            "recovery": bench_recovery(base, (128 if quick else 1024) * MIB),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)
    summary = {
        "append_1mib_ratio": results["append_1mib"]["ratio"],
        "append_16kib_ratio": results["append_16kib"]["ratio"],
        "group_commit_speedup": results["group_commit"]["speedup"],
        "read_ratio": results["read"]["ratio"],
        "recovery_mb_s": results["recovery"]["recovery_mb_s"],
    }
    report = {
        "summary": summary,
        "goals": GOALS,
        "details": results,
        "quick": quick,
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    console.print(_table(results))
    console.print(f"written to {RESULTS}")
    return 0


def _table(results: dict[str, Any]) -> Table:
    table = Table(title="Yak storage vs raw file I/O (same disk, same run)")
    for column in ("case", "Yak", "raw baseline", "ratio", "goal"):
        table.add_column(column, justify="right" if column != "case" else "left")

    def goal(key: str, value: float) -> str:
        target = GOALS.get(key)
        if target is None:
            return "-"
        return f"≥ {target:g} {'✓' if value >= target else '✗'}"

    for name, key in (
        ("append 1 MiB batches", "append_1mib"),
        ("append 16 KiB batches", "append_16kib"),
    ):
        r = results[key]
        table.add_row(
            name,
            f"{r['log_mb_s']:,.0f} MB/s",
            f"{r['plain_mb_s']:,.0f} MB/s",
            f"{r['ratio']:.2f}",
            goal(f"{key}_ratio", r["ratio"]),
        )
    g = results["group_commit"]
    table.add_row(
        "sync, 16 appenders x 16 KiB",
        f"{g['appends_s']:,.0f}/s p99 {g['p99_ms']:.1f} ms",
        f"{g['plain_appends_s']:,.0f}/s (write+fsync)",
        f"{g['speedup']:.1f}x",
        goal("group_commit_speedup", g["speedup"]),
    )
    r = results["read"]
    table.add_row(
        "sequential read, 1 MiB fetches",
        f"{r['log_mb_s']:,.0f} MB/s",
        f"{r['plain_mb_s']:,.0f} MB/s",
        f"{r['ratio']:.2f}",
        goal("read_ratio", r["ratio"]),
    )
    c = results["recovery"]
    table.add_row(
        f"recovery of {c['log_bytes'] / MIB:,.0f} MiB (cold)",
        f"{c['recovery_mb_s']:,.0f} MB/s",
        f"{c['plain_read_mb_s']:,.0f} MB/s read",
        f"{c['recovery_mb_s'] / c['plain_read_mb_s']:.2f}",
        "-",
    )
    return table


if __name__ == "__main__":
    raise SystemExit(main())
