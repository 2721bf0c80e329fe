"""The delay index of one partition replica: its delayed records by due time, on disk.

Derived from the log (docs/decisions.md, "Delayed and scheduled delivery"): the owner reads the
log from ``cursor``, finds the delayed records and cancels (``delay_scan.scan_delays``) and
``append``s them with the read's next offset as the new cursor. Share-partitions ask ``due``
for what became due since their delay watermark and set one timer per partition from
``next_due_ms``; the listing of scheduled records is ``pending``.

Folder ``<partition dir>/delays/``:

* ``<bucket start ms, 20 digits>.delays``: one file per bucket of due time, ``bucket_ms`` wide,
  entries appended as records are indexed (byte layout: ``delay_bucket``).
* ``delays.checkpoint``: the durable cursor, the log start and the files' bucket width
  (layout and atomic write: ``delay_checkpoint``).

Invariant: **the durable cursor never gets ahead of the durable entries.** ``checkpoint``
fsyncs every bucket file written or cut since the last one (and the folder, if files came or
went) *before* it renames the new checkpoint into place, so each entry below the written cursor
is on disk first. Entries at or above the durable cursor are not trusted: ``open`` cuts them
from every file (and a torn last entry with them), and the owner re-reads the log from the
cursor, re-appending them exactly once. A crash at any step therefore leaves: before the
rename, the old cursor and files cut back to it on open; after it, the new cursor and its
entries. ``truncate_to`` lowers the durable cursor *first* (checkpoint at the truncation
offset), then cuts the files; a crash in between is finished by ``open``'s cut.

Memory: buckets are read into memory (``delay_bucket.LoadedBucket``: two sorted ``array('q')``,
16 bytes per live schedule) only when they start before the horizon end (``advance(now)``:
now + ``horizon_ms``) or when a query needs them; the rest stay on disk. The index keeps one
sorted ``array('q')`` of the bucket starts that have files: 8 bytes per bucket, nothing per
record. Who forgets: the owner calls ``forget_through(t)`` with the lowest delay watermark of
the partition's share-partitions (``now`` when there are none): buckets entirely at or before
it are deleted, as every share-partition has taken their entries already; ``drop_below``
follows the log start offset (retention) and is applied lazily to buckets on disk.

Thread-safety: one owner (the partition's driver) calls every method. Only
``write_checkpoint(ticket)`` may run on another thread, with no ``truncate_to`` or ``close``
until it returns.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_right, insort
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

from yak_broker.storage.checkpoint import TEMP_SUFFIX
from yak_broker.storage.delay_bucket import (
    LoadedBucket,
    bucket_file,
    bucket_start_of,
    cut_bucket,
    pack_cancel,
    pack_schedules,
    read_bucket,
)
from yak_broker.storage.delay_checkpoint import (
    CHECKPOINT_NAME,
    DelayCheckpoint,
    read_checkpoint,
    write_checkpoint,
)
from yak_broker.storage.delay_scan import Cancellation, DelayScan

__all__ = [
    "DEFAULT_BUCKET_MS",
    "DEFAULT_HORIZON_MS",
    "DELAYS_DIR",
    "DelayCheckpoint",
    "DelayIndex",
    "DueEntries",
    "write_checkpoint",
]

DELAYS_DIR = "delays"
DEFAULT_BUCKET_MS = 600_000
DEFAULT_HORIZON_MS = 600_000
_LAST_OFFSET = 2**63 - 1


class DueEntries(NamedTuple):
    """Entries due in a range, sorted by ``(deliver_at, offset)``; the answer is complete for
    due times up to ``through_ms`` (below the range's end when ``limit`` cut it)."""

    deliver_at: array[int]
    offsets: array[int]
    through_ms: int


def _payload(pairs: list[tuple[int, int]], cancels: list[Cancellation]) -> bytes:
    """One bucket's new entries in position order (positions never decrease along a file)."""
    if not cancels:
        return pack_schedules([d for d, _ in pairs], [o for _, o in pairs])
    items = [(o, pack_schedules([d], [o])) for d, o in pairs]
    items += [(c.at_offset, pack_cancel(c.at_offset, c.offset)) for c in cancels]
    items.sort(key=lambda item: item[0])
    return b"".join(entry for _, entry in items)


class DelayIndex:
    """The delay index in ``directory`` (see the module docstring); ``DelayIndex.open``."""

    def __init__(self, directory: Path, bucket_ms: int, horizon_ms: int, state: DelayCheckpoint):
        self.directory = directory
        self.bucket_ms = bucket_ms
        self.horizon_ms = horizon_ms
        self._cursor = state.cursor
        self._log_start = state.log_start
        self._starts: array[int] = array("q")
        self._loaded: dict[int, LoadedBucket] = {}
        self._unsynced: set[int] = set()
        self._dir_dirty = False
        self._horizon_end = -1

    @classmethod
    def open(
        cls,
        directory: Path | str,
        *,
        bucket_ms: int = DEFAULT_BUCKET_MS,
        horizon_ms: int = DEFAULT_HORIZON_MS,
    ) -> DelayIndex:
        """Open or create the index in ``directory`` (``<partition>/delays``), cutting every
        file back to the durable cursor. A missing or damaged checkpoint means cursor 0: the
        owner re-indexes from the log start."""
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        state = read_checkpoint(folder / CHECKPOINT_NAME)
        if state is None:
            state = DelayCheckpoint(folder / CHECKPOINT_NAME, 0, 0, bucket_ms, (), False)
        if bucket_ms <= 0 or horizon_ms < 0:
            raise ValueError(
                f"bucket_ms must be > 0 and horizon_ms >= 0: {bucket_ms}, {horizon_ms}"
            )
        index = cls(folder, state.bucket_ms, horizon_ms, state)
        index._recover()
        return index

    def _recover(self) -> None:
        starts = []
        for entry in os.scandir(self.directory):
            if entry.name.endswith(TEMP_SUFFIX):
                os.unlink(entry.path)
                continue
            start = bucket_start_of(entry.name)
            if start is None:
                continue
            kept = cut_bucket(Path(entry.path), self._cursor)
            if kept == 0:
                os.unlink(entry.path)
                self._dir_dirty = True
                continue
            starts.append(start)
            if kept > 0:
                self._unsynced.add(start)
        self._starts = array("q", sorted(starts))

    # --- state ---------------------------------------------------------------------------

    @property
    def cursor(self) -> int:
        """Every log offset below it is indexed (durable after the next ``checkpoint``)."""
        return self._cursor

    @property
    def log_start(self) -> int:
        return self._log_start

    @property
    def bucket_count(self) -> int:
        return len(self._starts)

    @property
    def loaded_entries(self) -> int:
        """Schedules held in memory (the buckets within the horizon or queried)."""
        return sum(len(bucket) for bucket in self._loaded.values())

    def bucket_of(self, deliver_at_ms: int) -> int:
        return deliver_at_ms - deliver_at_ms % self.bucket_ms

    # --- indexing ------------------------------------------------------------------------

    def append(self, scan: DelayScan, new_cursor: int) -> None:
        """Index one read of the log: everything in ``scan`` lies in ``[cursor, new_cursor)``."""
        if new_cursor < self._cursor:
            raise ValueError(f"new cursor {new_cursor} is below the cursor {self._cursor}")
        adds: defaultdict[int, list[tuple[int, int]]] = defaultdict(list)
        cancels: defaultdict[int, list[Cancellation]] = defaultdict(list)
        for due, offset in zip(scan.deliver_at, scan.offsets, strict=True):
            self._check_position(offset, new_cursor)
            if due < 0:
                raise ValueError(f"record {offset} has a negative due time {due}")
            if offset >= self._log_start:
                adds[self.bucket_of(due)].append((due, offset))
        for cancel in scan.cancels:
            self._check_position(cancel.at_offset, new_cursor)
            cancels[self.bucket_of(cancel.deliver_at)].append(cancel)
        for start in adds.keys() | cancels.keys():
            self._write(start, _payload(adds.get(start, []), cancels.get(start, [])))
        self._apply_in_memory(adds, scan)
        self._cursor = new_cursor

    def _check_position(self, position: int, new_cursor: int) -> None:
        if not self._cursor <= position < new_cursor:
            raise ValueError(f"entry at {position} outside [{self._cursor}, {new_cursor})")

    def _write(self, start: int, payload: bytes) -> None:
        path = bucket_file(self.directory, start)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        self._unsynced.add(start)
        index = bisect_right(self._starts, start)
        if not index or self._starts[index - 1] != start:
            insort(self._starts, start)
            self._dir_dirty = True

    def _apply_in_memory(self, adds: dict[int, list[tuple[int, int]]], scan: DelayScan) -> None:
        for start, pairs in adds.items():
            bucket = self._loaded.get(start)
            if bucket is not None:
                bucket.add(sorted(pairs))
            elif start < self._horizon_end:
                self._load(start)  # reads the entries just written
        for cancel in scan.cancels:
            bucket = self._loaded.get(self.bucket_of(cancel.deliver_at))
            if bucket is not None:
                bucket.remove(cancel.deliver_at, cancel.offset)

    def _load(self, start: int) -> LoadedBucket:
        bucket = self._loaded.get(start)
        if bucket is None:
            flat = read_bucket(bucket_file(self.directory, start))
            bucket = self._loaded[start] = LoadedBucket.from_entries(flat, self._log_start)
        return bucket

    def advance(self, now_ms: int) -> None:
        """Bring the buckets that start before ``now_ms + horizon_ms`` into memory."""
        end = now_ms + self.horizon_ms
        if end <= self._horizon_end:
            return
        first = bisect_right(self._starts, max(self._horizon_end, 0) - 1)
        self._horizon_end = end
        for index in range(first, bisect_right(self._starts, end - 1)):
            self._load(self._starts[index])

    # --- queries -------------------------------------------------------------------------

    def _first_bucket_after(self, after_ms: int) -> int:
        """Index in ``_starts`` of the first bucket that may hold a due time > ``after_ms``."""
        return bisect_right(self._starts, after_ms - self.bucket_ms)

    def due(
        self, after_ms: int, through_ms: int, below_offset: int, limit: int | None = None
    ) -> DueEntries:
        """The live schedules due in ``(after_ms, through_ms]`` of records below
        ``below_offset``, sorted by ``(deliver_at, offset)``. With ``limit``, stops after about
        that many at a change of due time and says where in ``through_ms``."""
        out: tuple[array[int], array[int]] = (array("q"), array("q"))
        first, end = self._first_bucket_after(after_ms), bisect_right(self._starts, through_ms)
        for start in self._starts[first:end]:
            if not self._load(start).collect(after_ms, through_ms, below_offset, out, limit):
                return DueEntries(out[0], out[1], out[0][-1])
        return DueEntries(out[0], out[1], through_ms)

    def next_due_ms(self, after_ms: int) -> int | None:
        """The earliest due time after ``after_ms`` (``None``: nothing pending). Beyond the
        horizon it is a lower bound, the next bucket's start: the timer wakes, ``advance``
        loads that bucket, and the next call is exact."""
        for index in range(self._first_bucket_after(after_ms), len(self._starts)):
            start = self._starts[index]
            bucket = self._loaded.get(start)
            if bucket is None:
                if start >= self._horizon_end:
                    return max(start, after_ms + 1)
                bucket = self._load(start)
            found = bucket.first_after(after_ms)
            if found is not None:
                return found
        return None

    def pending(
        self, after_ms: int, limit: int, after_offset: int = _LAST_OFFSET
    ) -> list[tuple[int, int]]:
        """Up to ``limit`` live schedules after ``(after_ms, after_offset)`` in due order (the
        listing of scheduled records; page on with the last pair). Buckets beyond the horizon
        are read from disk and not kept."""
        found: list[tuple[int, int]] = []
        for index in range(self._first_bucket_after(after_ms), len(self._starts)):
            start = self._starts[index]
            bucket = self._loaded.get(start)
            if bucket is None:
                flat = read_bucket(bucket_file(self.directory, start))
                bucket = LoadedBucket.from_entries(flat, self._log_start)
            found += bucket.page((after_ms, after_offset), limit - len(found))
            if len(found) >= limit:
                break
        return found

    # --- the log moved -------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """The log was truncated to ``offset``: forget every entry indexed at or above it."""
        if offset >= self._cursor:
            return
        self._cursor = max(offset, 0)
        self.checkpoint()  # the durable cursor goes down before any file is cut
        kept_starts = []
        for start in self._starts:
            path = bucket_file(self.directory, start)
            kept = cut_bucket(path, self._cursor)
            if kept == 0:
                path.unlink()
                self._dir_dirty = True
                continue
            kept_starts.append(start)
            if kept > 0:
                self._unsynced.add(start)
        self._starts = array("q", kept_starts)
        for start in [start for start in self._loaded if start in self._unsynced]:
            del self._loaded[start]
            if start in kept_starts:
                self._load(start)
        for start in [start for start in self._loaded if start not in kept_starts]:
            del self._loaded[start]

    def drop_below(self, log_start_offset: int) -> None:
        """Retention moved the log start: entries of records below it are gone for good."""
        if log_start_offset <= self._log_start:
            return
        self._log_start = log_start_offset
        self._cursor = max(self._cursor, log_start_offset)
        for bucket in self._loaded.values():
            bucket.drop_below(log_start_offset)

    def forget_through(self, ms: int) -> int:
        """Delete the buckets whose every due time is at or before ``ms``; return how many."""
        end = bisect_right(self._starts, ms - self.bucket_ms + 1)
        for start in self._starts[:end]:
            bucket_file(self.directory, start).unlink(missing_ok=True)
            self._loaded.pop(start, None)
            self._unsynced.discard(start)
        if end:
            del self._starts[:end]
            self._dir_dirty = True
        return end

    # --- durability ----------------------------------------------------------------------

    def prepare_checkpoint(self) -> DelayCheckpoint:
        """What ``write_checkpoint`` must make durable; hands the unsynced files over."""
        ticket = DelayCheckpoint(
            self.directory / CHECKPOINT_NAME,
            self._cursor,
            self._log_start,
            self.bucket_ms,
            tuple(sorted(self._unsynced)),
            self._dir_dirty,
        )
        self._unsynced.clear()
        self._dir_dirty = False
        return ticket

    def requeue(self, ticket: DelayCheckpoint) -> None:
        """``write_checkpoint(ticket)`` failed: its files still need an fsync."""
        live = set(self._starts)
        self._unsynced.update(start for start in ticket.starts if start in live)
        self._dir_dirty = self._dir_dirty or ticket.sync_dir

    def checkpoint(self) -> None:
        """Make every entry below the cursor durable, then the cursor (on this thread)."""
        ticket = self.prepare_checkpoint()
        try:
            write_checkpoint(ticket)
        except BaseException:
            self.requeue(ticket)
            raise

    def close(self) -> None:
        self.checkpoint()
        self._loaded.clear()
