"""The sparse time index of one segment: max timestamp → relative offset (``<base>.timeindex``).

Byte layout: 12-byte entries, big-endian, no header::

    timestamp        int64   the largest batch max timestamp seen so far in the segment
    relative_offset  int32   last offset of the batch that carries that timestamp, minus base

Timestamps strictly increase and offsets never decrease: an entry is added together with an
offset-index entry, and only when the segment's max timestamp grew (Kafka's ``maybeAppend``),
plus once more when the segment rolls, so that the last entry holds the segment's max
timestamp. Every batch up to an entry's offset has a max timestamp <= the entry's timestamp,
so ``lookup(t)`` (the largest entry with timestamp < t) names an offset from which a forward
scan finds the first batch with a max timestamp >= t.

Crash behaviour and thread-safety: see ``index_file``.
"""

from __future__ import annotations

import struct
from pathlib import Path

from yak_broker.storage.file_handles import FileHandleCache
from yak_broker.storage.index_file import CorruptIndexError, IndexFile

__all__ = ["NO_TIMESTAMP", "TimeIndex"]

_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimeIndex(IndexFile):
    """Max timestamp → relative offset entries of the segment starting at ``base_offset``."""

    VALUES_STRICT = False

    ENTRY_SIZE = _ENTRY.size

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_bytes: int,
        files: FileHandleCache | None = None,
        *,
        new: bool = False,
    ) -> None:
        self.base_offset = base_offset
        super().__init__(path, _ENTRY, "q", max_index_bytes, files, new=new)

    @property
    def last_timestamp(self) -> int:
        last = self.last_entry()
        return last[0] if last else NO_TIMESTAMP

    @property
    def last_offset(self) -> int:
        last = self.last_entry()
        return self.base_offset + last[1] if last else self.base_offset

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Add ``(timestamp, offset)`` if ``timestamp`` exceeds the last entry's; return if so."""
        last = self.last_entry()
        if last and timestamp <= last[0]:
            return False
        relative = offset - self.base_offset
        if last and relative < last[1]:
            raise CorruptIndexError(
                f"time index {self.path.name}: offset {offset} is below {self.last_offset}"
            )
        self._append(timestamp, relative)
        return True

    def lookup_before(self, timestamp: int) -> int:
        """Offset of the largest entry with a timestamp < ``timestamp``; base offset if none."""
        slot = self._floor(timestamp - 1)
        return self.base_offset if slot < 0 else self.base_offset + self.entry(slot)[1]

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        self._truncate_entries(self._bisect(1, offset - self.base_offset, right=False))

    def sanity_check(self, next_offset: int) -> None:
        """Raise CorruptIndexError if the last entry names an offset past the segment's end."""
        if self.entries and self.last_offset >= next_offset:
            raise CorruptIndexError(
                f"time index {self.path.name}: last offset {self.last_offset} "
                f"is not below the segment's next offset {next_offset}"
            )
