"""The common part of the sparse segment indexes (Kafka's ``AbstractIndex``).

An index file is a flat array of fixed-size big-endian entries ``(key, value)``, sorted by key,
with no header and no checksum: "in the event of a crash it is rebuilt" from the ``.log``
(``OffsetIndex.java``). ``OffsetIndex`` and ``TimeIndex`` define what key and value mean.

Memory and file: all entries live in two ``array`` columns (so lookups are a ``bisect``); new
entries are buffered and written to the file by ``flush`` (on roll, on close, and before the
log fsyncs the index), so appends cost no system call, and the file's descriptor is needed
only to load, flush, truncate and sync: it is a ``FileHandle`` of the broker's bounded
``FileHandleCache`` and is usually evicted (no memory map holds the file). Unlike Kafka the file
is not preallocated to ``segment.index.bytes``: it holds exactly the flushed entries, and
"full" is a count (``segment.index.bytes`` over the entry size). The segment rolls when an
index is full; an entry that would overflow a full index is skipped (the index is sparse), so
an append never fails after its data was written.

Crash behaviour: the file may lack the last unflushed entries or end in a torn entry. A load
of a file whose size is not a whole number of entries, or with keys out of order, raises
``CorruptIndexError``; the loader then rebuilds the index from the log. Only the active
segment's index may be unsynced below the recovery point, and recovery after an unclean stop
always rebuilds the active segment's indexes.

Thread-safety: none; the owning segment is used by one writer (the partition log).
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

from yak.errors import YakError
from yak_broker.storage.file_handles import FileHandleCache

__all__ = ["CorruptIndexError", "IndexFile"]


class CorruptIndexError(YakError):
    """An index file failed its sanity check; it must be rebuilt from the log."""

    code = "KAFKA_STORAGE_ERROR"
    kafka_code = 56


class IndexFile:
    """Sorted fixed-size ``(key, value)`` entries in memory, mirrored to a file."""

    def __init__(
        self,
        path: Path,
        entry: struct.Struct,
        key_type: str,
        max_index_bytes: int,
        files: FileHandleCache | None = None,
        *,
        new: bool = False,
    ) -> None:
        self._path = path
        self._entry = entry
        self._keys: array[int] = array(key_type)
        self._values: array[int] = array("i")
        self._max_entries = max(max_index_bytes // entry.size, 1)
        self._flushed = 0
        cache = files if files is not None else FileHandleCache()
        if new:  # an empty file just created (``log_creation``): nothing to load or open yet
            self._file = cache.handle(path)
            return
        self._file = cache.open(path)
        try:
            self._load()
        except BaseException:
            self._file.close()
            raise

    def _load(self) -> None:
        fd = self._file.fd()
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        if len(data) % self._entry.size:
            raise CorruptIndexError(
                f"index {self._path.name} has {len(data)} bytes, "
                f"not a multiple of the {self._entry.size}-byte entry"
            )
        for key, value in self._entry.iter_unpack(data):
            self._keys.append(key)
            self._values.append(value)
        self._flushed = len(self._keys)
        for i in range(1, len(self._keys)):
            if self._keys[i] <= self._keys[i - 1]:
                raise CorruptIndexError(f"index {self._path.name}: keys not increasing at {i}")

    @property
    def path(self) -> Path:
        return self._path

    @property
    def entries(self) -> int:
        return len(self._keys)

    @property
    def is_open(self) -> bool:
        """Whether the file holds a descriptor now (see ``file_handles``)."""
        return self._file.is_open

    def is_full(self) -> bool:
        return len(self._keys) >= self._max_entries

    def entry(self, n: int) -> tuple[int, int]:
        """The ``n``-th ``(key, value)`` (negative counts from the end)."""
        return self._keys[n], self._values[n]

    def _append(self, key: int, value: int) -> None:
        """Add an entry; a full index silently skips it (the index is sparse, and the segment
        rolls before its next append), so an append never fails after its data is written."""
        if len(self._keys) < self._max_entries:
            self._keys.append(key)
            self._values.append(value)

    def _floor(self, key: int) -> int:
        """Slot of the largest key <= ``key``; -1 if none."""
        return bisect.bisect_right(self._keys, key) - 1

    def _truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries, in memory and in the file."""
        if count >= len(self._keys):
            return
        del self._keys[count:]
        del self._values[count:]
        if self._flushed > count:
            os.ftruncate(self._file.fd(), count * self._entry.size)
            self._flushed = count

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._truncate_entries(0)

    def flush(self) -> None:
        """Write buffered entries to the file (no fsync; see ``sync``)."""
        if self._flushed == len(self._keys):
            return
        pack = self._entry.pack
        data = b"".join(
            pack(self._keys[i], self._values[i]) for i in range(self._flushed, len(self._keys))
        )
        os.pwrite(self._file.fd(), data, self._flushed * self._entry.size)
        self._flushed = len(self._keys)

    def sync(self) -> None:
        self.flush()
        os.fsync(self._file.fd())

    def dup_fd(self) -> int:
        """A duplicate descriptor for fsync from another thread (the caller closes it)."""
        return self._file.dup()

    def close(self) -> None:
        """Write out buffered entries and release the file."""
        if not self._file.closed:
            self.flush()
            self._file.close()

    def delete(self) -> None:
        """Release and remove the file (buffered entries are dropped)."""
        self._file.close()
        self._path.unlink(missing_ok=True)
