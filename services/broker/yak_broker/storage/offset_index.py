"""The sparse offset index of one segment: relative offset → file position (``<base>.index``).

Byte layout: 8-byte entries, big-endian, no header::

    relative_offset  int32   offset - segment base offset
    position         int32   byte position in the segment's .log of the batch holding it

Both columns strictly increase. The segment adds an entry for a batch when more than
``index.interval.bytes`` were appended since the previous entry (Kafka's rule; recovery applies
the same rule batch by batch, so a rebuilt index equals the one written by appends). An entry
maps the batch's *last* offset to the batch's start position, so ``lookup(target)`` — the
largest entry at or below ``target`` — gives a position from which a forward scan over batch
headers finds the batch that holds ``target``.

Crash behaviour and thread-safety: see ``index_file``; the file is rebuilt, never trusted
blindly (``sanity_check``).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

from yak_broker.storage.file_handles import FileHandleCache
from yak_broker.storage.index_file import CorruptIndexError, IndexFile

__all__ = ["OffsetIndex", "OffsetPosition"]

_ENTRY = struct.Struct(">ii")


class OffsetPosition(NamedTuple):
    """An absolute offset and the file position to scan from."""

    offset: int
    position: int


class OffsetIndex(IndexFile):
    """Relative offset → position entries of the segment starting at ``base_offset``."""

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
        super().__init__(path, _ENTRY, "i", max_index_bytes, files, new=new)

    @property
    def last_offset(self) -> int:
        """The last indexed absolute offset, or the base offset when empty."""
        last = self.last_entry()
        return self.base_offset + last[0] if last else self.base_offset

    @property
    def last_position(self) -> int:
        last = self.last_entry()
        return last[1] if last else 0

    def append(self, offset: int, position: int) -> None:
        """Add ``offset`` (absolute) at ``position``; both must exceed the last entry."""
        relative = offset - self.base_offset
        last = self.last_entry()
        if last and (relative <= last[0] or position <= last[1]):
            raise CorruptIndexError(
                f"index {self.path.name}: entry ({offset}, {position}) does not follow "
                f"({self.last_offset}, {self.last_position})"
            )
        self._append(relative, position)

    def lookup(self, target: int) -> OffsetPosition:
        """The largest entry with offset <= ``target``; ``(base_offset, 0)`` if none."""
        slot = self._floor(target - self.base_offset)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        relative, position = self.entry(slot)
        return OffsetPosition(self.base_offset + relative, position)

    def last_batch_start_within(self, max_position: int, max_offset: int) -> int | None:
        """The largest indexed batch position <= ``max_position`` whose batch ends below
        ``max_offset``; every batch before it is whole and below ``max_offset`` too."""
        by_position = self._bisect(1, max_position, right=True)
        by_offset = self._bisect(0, max_offset - self.base_offset, right=False)
        slot = min(by_position, by_offset) - 1
        return self.entry(slot)[1] if slot >= 0 else None

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        self._truncate_entries(self._floor(offset - self.base_offset - 1) + 1)

    def sanity_check(self, log_size: int) -> None:
        """Raise CorruptIndexError if the last entry points past the end of the log."""
        if self.entries and self.last_position >= log_size:
            raise CorruptIndexError(
                f"index {self.path.name}: last entry position {self.last_position} "
                f"is beyond the log size {log_size}"
            )
