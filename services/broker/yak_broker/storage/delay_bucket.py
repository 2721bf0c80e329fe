"""One bucket of a partition's delay index: its file format and its sorted in-memory form.

A bucket holds the entries whose due time falls in ``[start, start + bucket_ms)``. Its file is
``<start ms, 20 digits>.delays`` in the index's folder: a flat array of 16-byte big-endian
entries, no header, appended in log order::

    offset  field    type
    0       first    int64   >= 0: a *schedule*: the due time (epoch ms) of a delayed record
                             <  0: a *cancel*, indexed from the cancel record at log offset
                                   ``-first - 1`` (so offset 0 encodes as -1)
    8       offset   int64   the delayed record's offset, for both kinds

An entry's *position* is the log offset it was indexed from: ``offset`` for a schedule, the
cancel record's offset for a cancel. The index appends in log order, so positions never
decrease along a file, and "forget everything indexed at or above position p" is a cut of the
file's tail (``cut_bucket``, a binary search of ``pread``s then ``ftruncate``).

Crash behaviour: an append is one ``write``; a crash may leave a torn last entry (a size that is
not a multiple of 16), which ``read_bucket`` and ``cut_bucket`` ignore and cut away; whole
entries beyond the index's durable cursor are cut by the index on open (see ``delay_index``).

In memory (``LoadedBucket``): only the schedules that are not cancelled, as two parallel
``array('q')`` sorted by ``(deliver_at, offset)`` — 16 bytes per entry, no Python object per
record. Merging a batch of new entries costs one pass of slice copies, not a sort.

Thread-safety: none; the owning ``DelayIndex`` is used by one thread at a time.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "ENTRY_SIZE",
    "SUFFIX",
    "LoadedBucket",
    "bucket_file",
    "bucket_start_of",
    "cut_bucket",
    "pack_cancel",
    "pack_schedules",
    "read_bucket",
]

ENTRY_SIZE = 16
SUFFIX = ".delays"
_ENTRY = struct.Struct(">qq")
_SWAP = sys.byteorder == "little"


def bucket_file(directory: Path, start: int) -> Path:
    """``<directory>/<20-digit start><SUFFIX>``."""
    return directory / f"{start:020d}{SUFFIX}"


def bucket_start_of(name: str) -> int | None:
    """The start of the bucket a file name names, or ``None`` for any other file."""
    stem = name.removesuffix(SUFFIX)
    if stem == name or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def pack_schedules(deliver_at: Sequence[int], offsets: Sequence[int]) -> bytes:
    """The entries of delayed records, in the given order."""
    flat = array("q", bytes(ENTRY_SIZE * len(offsets)))
    flat[0::2] = array("q", deliver_at)
    flat[1::2] = array("q", offsets)
    if _SWAP:
        flat.byteswap()
    return flat.tobytes()


def pack_cancel(at_offset: int, offset: int) -> bytes:
    """The entry of a cancel record at ``at_offset`` naming the record ``offset``."""
    return _ENTRY.pack(-at_offset - 1, offset)


def read_bucket(path: Path) -> array[int]:
    """The file's whole entries as a flat ``array('q')`` (first, offset, first, offset ...)."""
    data = path.read_bytes()
    flat: array[int] = array("q")
    flat.frombytes(data[: len(data) - len(data) % ENTRY_SIZE])
    if _SWAP:
        flat.byteswap()
    return flat


def _position(entry: bytes) -> int:
    first, offset = _ENTRY.unpack(entry)
    return int(offset if first >= 0 else -first - 1)


def cut_bucket(path: Path, position: int) -> int:
    """Drop a torn tail and every entry at ``position`` or above; return the entries kept.

    Returns -1 when nothing changed (the file ends on a whole entry below ``position``).
    """
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        count = size // ENTRY_SIZE
        if count and _position(os.pread(fd, ENTRY_SIZE, (count - 1) * ENTRY_SIZE)) < position:
            if size % ENTRY_SIZE == 0:
                return -1
            keep = count
        else:
            low, high = 0, count  # the first entry at or above ``position`` is in [low, high]
            while low < high:
                middle = (low + high) // 2
                if _position(os.pread(fd, ENTRY_SIZE, middle * ENTRY_SIZE)) < position:
                    low = middle + 1
                else:
                    high = middle
            keep = low
        os.ftruncate(fd, keep * ENTRY_SIZE)
        return keep
    finally:
        os.close(fd)


class LoadedBucket:
    """The live schedules of one bucket, sorted by ``(deliver_at, offset)``."""

    __slots__ = ("deliver_at", "offsets")

    def __init__(self, deliver_at: array[int] | None = None, offsets: array[int] | None = None):
        self.deliver_at: array[int] = deliver_at if deliver_at is not None else array("q")
        self.offsets: array[int] = offsets if offsets is not None else array("q")

    @classmethod
    def from_entries(cls, flat: array[int], floor: int) -> LoadedBucket:
        """Sort a file's entries; cancelled ones and those below ``floor`` are left out."""
        firsts, offsets = flat[0::2], flat[1::2]
        cancelled = {o for f, o in zip(firsts, offsets, strict=True) if f < 0}
        pairs = sorted(
            (f, o)
            for f, o in zip(firsts, offsets, strict=True)
            if f >= 0 and o >= floor and o not in cancelled
        )
        return cls(array("q", [f for f, _ in pairs]), array("q", [o for _, o in pairs]))

    def __len__(self) -> int:
        return len(self.offsets)

    def _index(self, deliver_at: int, offset: int) -> int:
        """Where ``(deliver_at, offset)`` is or would be inserted (bisect_left on the pair)."""
        low = bisect_left(self.deliver_at, deliver_at)
        high = bisect_right(self.deliver_at, deliver_at, low)
        return bisect_left(self.offsets, offset, low, high)

    def add(self, pairs: list[tuple[int, int]]) -> None:
        """Merge sorted ``(deliver_at, offset)`` pairs in, one pass of slice copies."""
        times, offsets = self.deliver_at, self.offsets
        if not times or pairs[0] > (times[-1], offsets[-1]):
            times.extend(d for d, _ in pairs)
            offsets.extend(o for _, o in pairs)
            return
        new_times: array[int] = array("q")
        new_offsets: array[int] = array("q")
        previous = 0
        for deliver_at, offset in pairs:
            index = self._index(deliver_at, offset)
            new_times += times[previous:index]
            new_offsets += offsets[previous:index]
            new_times.append(deliver_at)
            new_offsets.append(offset)
            previous = index
        new_times += times[previous:]
        new_offsets += offsets[previous:]
        self.deliver_at, self.offsets = new_times, new_offsets

    def remove(self, deliver_at: int, offset: int) -> bool:
        """Forget one schedule (a cancel); ``False`` if it is not here."""
        index = self._index(deliver_at, offset)
        found = (
            index < len(self.offsets)
            and self.offsets[index] == offset
            and self.deliver_at[index] == deliver_at
        )
        if found:
            del self.deliver_at[index]
            del self.offsets[index]
        return found

    def drop_below(self, floor: int) -> None:
        """Forget the schedules of records below ``floor`` (deleted by retention)."""
        keep = [i for i, offset in enumerate(self.offsets) if offset >= floor]
        if len(keep) < len(self.offsets):
            self.deliver_at = array("q", [self.deliver_at[i] for i in keep])
            self.offsets = array("q", [self.offsets[i] for i in keep])

    def collect(
        self,
        after_ms: int,
        through_ms: int,
        below_offset: int,
        out: tuple[array[int], array[int]],
        limit: int | None,
    ) -> bool:
        """Append the schedules due in ``(after_ms, through_ms]`` below ``below_offset`` to
        ``out``; ``False`` if ``limit`` stopped it (never inside a run of one due time)."""
        times, offsets = self.deliver_at, self.offsets
        out_times, out_offsets = out
        for index in range(bisect_right(times, after_ms), bisect_right(times, through_ms)):
            if offsets[index] >= below_offset:
                continue
            due = times[index]
            if limit is not None and len(out_offsets) >= limit and due != out_times[-1]:
                return False
            out_times.append(due)
            out_offsets.append(offsets[index])
        return True

    def first_after(self, after_ms: int) -> int | None:
        """The earliest due time after ``after_ms``, if any."""
        index = bisect_right(self.deliver_at, after_ms)
        return self.deliver_at[index] if index < len(self.deliver_at) else None

    def page(self, after: tuple[int, int], limit: int) -> list[tuple[int, int]]:
        """Up to ``limit`` schedules strictly after the pair ``after``, in order."""
        index = self._index(after[0], after[1] + 1)
        end = min(index + limit, len(self.offsets))
        return list(zip(self.deliver_at[index:end], self.offsets[index:end], strict=True))
