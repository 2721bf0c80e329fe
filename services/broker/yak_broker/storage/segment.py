"""One log segment: ``<base>.log`` plus its ``.index`` and ``.timeindex`` (Kafka ``LogSegment``).

``.log`` layout: RecordBatch v2 batches back to back, exactly as received except for the
``baseOffset`` and ``partitionLeaderEpoch`` fields the leader assigns (both outside the CRC).
The file name is the segment's base offset in 20 digits; every batch's offsets lie in
``[base_offset, base_offset + 2**31)`` so index entries can store 32-bit relative offsets.

Appends go to the end with one ``pwritev`` (assigned 16-byte prefix + the untouched rest of
each batch, so nothing is copied); index entries are added per batch by the
``index.interval.bytes`` rule (see ``offset_index``). Nothing is fsynced here: the log fsyncs
duplicated descriptors (``dup_fds`` + ``sync_and_close``), possibly on a worker thread.

A failed write (``ENOSPC``, ``EIO``: the ``OSError`` is raised to the caller) leaves the
segment as it was: the bytes of it that reached the file are cut off again, nothing is
indexed, the size does not move.

Crash behaviour: after an unclean stop the tail of ``.log`` may be torn or hold garbage (a size
update that reached the disk before its data). ``recover`` re-reads every batch, checks framing,
CRC-32C and offset order, rebuilds both indexes and truncates the file after the last good
batch. On a clean start ``sanity_check`` + ``load_tail`` verify the indexes against the log
instead of trusting them.

Files: the three are ``FileHandle``s of the broker's bounded ``FileHandleCache``, opened on
demand; a segment asks its handle for the descriptor right before each system call, as an
evicted file is reopened there (see ``file_handles``). ``close`` releases them for good.

Thread-safety: one writer (the partition log) calls every method; only the duplicated file
descriptors from ``dup_fds`` may be fsynced from another thread.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple, TypeVar

from yak.errors import CorruptRecordError, InvalidRecordError
from yak.record.batch_header import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    parse_header,
    validate_batch,
)
from yak_broker.storage.file_handles import FileHandleCache
from yak_broker.storage.index_file import CorruptIndexError
from yak_broker.storage.log_config import LogConfig
from yak_broker.storage.offset_index import OffsetIndex
from yak_broker.storage.time_index import NO_TIMESTAMP, TimeIndex

__all__ = [
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "LogSegment",
    "PendingBatch",
    "SegmentRead",
    "segment_file",
    "sync_and_close",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
_MAX_RELATIVE = 2**31 - 1
_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_SCAN_CHUNK = 8192
_RECOVER_CHUNK = 8 * 1024 * 1024
_IOV_MAX = 1024
_I = TypeVar("_I", OffsetIndex, TimeIndex)


def sync_and_close(fds: list[int]) -> None:
    """fsync then close each descriptor (from ``LogSegment.dup_fds``); safe on any thread."""
    try:
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)


def segment_file(directory: Path, base_offset: int, suffix: str) -> Path:
    """``<directory>/<20-digit base offset><suffix>``."""
    return directory / f"{base_offset:020d}{suffix}"


class PendingBatch(NamedTuple):
    """A validated batch of an append: where it sits in the request and what it becomes."""

    position: int  # in the request buffer
    header: BatchHeader  # with the offsets it is stored under


class SegmentRead(NamedTuple):
    """Whole batches read from a segment, and the offset after the last one."""

    records: memoryview
    next_offset: int


class LogSegment:
    """A ``.log`` file with its two sparse indexes, covering offsets from ``base_offset``."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        files: FileHandleCache | None = None,
        *,
        new: bool = False,
    ) -> None:
        self.base_offset = base_offset
        self.directory = directory
        self._files = files if files is not None else FileHandleCache()
        self._index_interval = config.index_interval_bytes
        self._index_bytes = config.segment_index_bytes
        self.log_path = segment_file(directory, base_offset, LOG_SUFFIX)
        if new:  # its three files exist and are empty (``log_creation``): opened at first use
            self._log = self._files.handle(self.log_path)
            self._size = 0
        else:
            self._log = self._files.open(self.log_path)
            self._size = os.fstat(self._log.fd()).st_size
        self.created_ms = now_ms
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self._bytes_since_index = 0
        self._first_batch_timestamp: int | None = None
        #: True when an index file failed to load and was reset: the segment needs ``recover``.
        self.index_damaged = False
        self.offset_index = self._open_index(OffsetIndex, INDEX_SUFFIX, new)
        self.time_index = self._open_index(TimeIndex, TIME_INDEX_SUFFIX, new)

    def _open_index(self, kind: type[_I], suffix: str, new: bool) -> _I:
        path = segment_file(self.directory, self.base_offset, suffix)
        if new:
            return kind(path, self.base_offset, self._index_bytes, self._files, new=True)
        if self._size and not path.exists():  # e.g. a compacted segment swapped in
            self.index_damaged = True
        try:
            return kind(path, self.base_offset, self._index_bytes, self._files)
        except CorruptIndexError:
            self.index_damaged = True
            path.unlink(missing_ok=True)
            return kind(path, self.base_offset, self._index_bytes, self._files)

    @property
    def size(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self._size}, next={self.next_offset})"

    # --- append --------------------------------------------------------------------------

    def should_roll(
        self,
        incoming: int,
        max_timestamp: int,
        last_offset: int,
        now_ms: int,
        config: LogConfig,
        jitter_ms: int = 0,
    ) -> bool:
        """Kafka's ``shouldRoll``: size, age, a full index or an unrepresentable offset."""
        if self._size == 0:
            return False
        if self._size > config.segment_bytes - incoming:
            return True
        if self.offset_index.is_full() or self.time_index.is_full():
            return True
        if last_offset - self.base_offset > _MAX_RELATIVE:
            return True
        first_ts = self.first_batch_timestamp()
        waited = max_timestamp - first_ts if first_ts >= 0 else now_ms - self.created_ms
        return waited > config.segment_ms - jitter_ms

    def first_batch_timestamp(self) -> int:
        """The max timestamp of the first batch (Kafka's rolling-based timestamp), or -1."""
        if self._first_batch_timestamp is None:
            if self._size < RECORD_BATCH_OVERHEAD:
                return NO_TIMESTAMP
            self._first_batch_timestamp = self.read_header(0).max_timestamp
        return self._first_batch_timestamp

    def append(
        self, buf: memoryview, batches: Sequence[PendingBatch], patch: bool, size: int
    ) -> None:
        """Write ``batches`` (validated, offsets assigned; ``size`` bytes in all) from ``buf``.

        With ``patch`` the first 16 bytes of each batch are replaced by the header's base
        offset, length and partition leader epoch; otherwise the bytes are written as they are.
        """
        iov: list[bytes | memoryview] = []
        for pos, header in batches:
            end = pos + header.batch_length + LOG_OVERHEAD
            if patch:
                iov.append(_PREFIX.pack(header[0], header[1], header[2]))
                iov.append(buf[pos + _PREFIX.size : end])
            else:
                iov.append(buf[pos:end])
        position = self._size
        fd = self._log.fd()
        try:
            if len(iov) <= _IOV_MAX:
                written = os.pwritev(fd, iov, position)
            else:
                written = 0
                for start in range(0, len(iov), _IOV_MAX):
                    written += os.pwritev(fd, iov[start : start + _IOV_MAX], position + written)
            if written != size:
                self._finish_short_write(iov, written)
        except OSError:
            self._cut_back(position)
            raise
        for _, header in batches:
            self._index_batch(header, position)
            position += header.batch_length + LOG_OVERHEAD
        self._size = position

    def _finish_short_write(self, iov: list[bytes | memoryview], written: int) -> None:
        rest = b"".join(bytes(part) for part in iov)[written:]
        while rest:
            n = os.pwrite(self._log.fd(), rest, self._size + written)
            written += n
            rest = rest[n:]

    def _cut_back(self, position: int) -> None:
        """A write failed (``ENOSPC``, ``EIO``) after part of it may have reached the file:
        cut the file back to ``position``, the end of the last whole batch, so that no torn
        batch stays behind for a reader or the next start. A failing cut (the disk is gone)
        is left to ``recover`` at the next start, which cuts after the last good batch."""
        with contextlib.suppress(OSError):
            os.ftruncate(self._log.fd(), position)

    def _index_batch(self, header: BatchHeader, position: int) -> None:
        """Account one stored batch at ``position`` (same rule for append and recover)."""
        last_offset = header.base_offset + header.last_offset_delta
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = last_offset
        if position == 0:
            self._first_batch_timestamp = header.max_timestamp
        if self._bytes_since_index > self._index_interval:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += header.batch_length + LOG_OVERHEAD
        self.next_offset = last_offset + 1

    def on_become_inactive(self) -> None:
        """The segment rolled: record its max timestamp in the time index, write the indexes."""
        if self.max_timestamp > self.time_index.last_timestamp and not self.time_index.is_full():
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.flush()
        self.time_index.flush()

    # --- read ----------------------------------------------------------------------------

    def read_header(self, position: int) -> BatchHeader:
        return parse_header(os.pread(self._log.fd(), RECORD_BATCH_OVERHEAD, position))

    def headers_from(self, position: int) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of each batch from ``position`` on, without CRC checks."""
        chunk, chunk_pos = b"", position
        while position + RECORD_BATCH_OVERHEAD <= self._size:
            if position + RECORD_BATCH_OVERHEAD > chunk_pos + len(chunk):
                # fd() again on each read: between two yields the caller may open other files.
                chunk, chunk_pos = os.pread(self._log.fd(), _SCAN_CHUNK, position), position
            header = parse_header(chunk, position - chunk_pos)
            if header.size < RECORD_BATCH_OVERHEAD or position + header.size > self._size:
                raise CorruptRecordError(
                    f"{self.log_path.name}: bad batch of {header.size} bytes at {position}"
                )
            yield position, header
            position += header.size
        if position < self._size:
            raise CorruptRecordError(f"{self.log_path.name}: torn batch at {position}")

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        start = self.offset_index.lookup(offset).position
        for position, header in self.headers_from(start):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(self, position: int, max_bytes: int, max_offset: int) -> SegmentRead:
        """Whole batches from ``position``, up to ``max_bytes`` (at least one batch unless
        its base offset is >= ``max_offset``); batches from ``max_offset`` on are left out."""
        available = self._size - position
        fd = self._log.fd()
        buf = os.pread(fd, min(max(max_bytes, RECORD_BATCH_OVERHEAD), available), position)
        pos, end, next_offset = 0, 0, -1
        unpack = _OFFSET_AND_LENGTH.unpack_from
        # Skip the header walk over batches the index proves whole and below max_offset.
        jump = self.offset_index.last_batch_start_within(
            position + len(buf) - RECORD_BATCH_OVERHEAD, max_offset
        )
        if jump is not None and jump > position:
            pos = end = jump - position
            next_offset = unpack(buf, pos)[0]
        while pos + RECORD_BATCH_OVERHEAD <= len(buf):
            base, length = unpack(buf, pos)
            size = length + LOG_OVERHEAD
            if base >= max_offset:
                break
            if pos + size > len(buf):
                if pos == 0:  # the first batch is larger than max_bytes: return it whole
                    buf = os.pread(fd, size, position)
                    end, next_offset = size, base + _INT32.unpack_from(buf, 23)[0] + 1
                break
            next_offset = base + _INT32.unpack_from(buf, pos + 23)[0] + 1
            pos = end = pos + size
        return SegmentRead(memoryview(buf)[:end], next_offset)

    def find_offset_for_timestamp(self, timestamp: int) -> int | None:
        """Base offset of the first batch with a max timestamp >= ``timestamp``."""
        found = self.find_batch(self.time_index.lookup_before(timestamp))
        if found is None:
            return None
        for _, header in self.headers_from(found[0]):
            if header.max_timestamp >= timestamp:
                return header.base_offset
        return None

    def largest_timestamp(self) -> int:
        """The max record timestamp, or the file's mtime for an empty segment (as Kafka). By
        path, not descriptor: a retention pass over 20,000 empty logs must not open (and push
        out of the bounded handle cache) 20,000 files every few minutes."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    # --- load, recover, truncate -----------------------------------------------------------

    def sanity_check(self) -> None:
        """Raise CorruptIndexError unless the indexes agree with the log (a clean start)."""
        if self.index_damaged:
            raise CorruptIndexError(f"{self.log_path.name}: index could not be loaded")
        self.offset_index.sanity_check(self._size)
        if self.offset_index.entries:
            entry_offset, position = self.offset_index.lookup(self.offset_index.last_offset)
            try:
                header = self.read_header(position)
            except CorruptRecordError as exc:
                raise CorruptIndexError(f"{self.log_path.name}: {exc}") from exc
            if header.last_offset != entry_offset:
                raise CorruptIndexError(
                    f"{self.offset_index.path.name}: last entry says offset {entry_offset} at "
                    f"{position}, the batch there ends at {header.last_offset}"
                )

    def load_tail(self) -> None:
        """Rebuild the in-memory end state from the last index entry (clean start, truncate)."""
        start = self.offset_index.last_position
        self.next_offset = self.base_offset
        self.max_timestamp = self.time_index.last_timestamp
        self.offset_of_max_timestamp = self.time_index.last_offset
        self._first_batch_timestamp = None
        for _, header in self.headers_from(start):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            self.next_offset = header.next_offset
        self._bytes_since_index = self._size - start
        self.time_index.sanity_check(max(self.next_offset, self.base_offset + 1))

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """Revalidate every batch, rebuild the indexes, cut the tail after the last good batch.

        Returns the number of bytes truncated (0 if the whole file was valid).
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self._bytes_since_index = 0
        self._first_batch_timestamp = None
        self.index_damaged = False
        valid = 0
        try:
            for position, header in self._validated_batches():
                self._index_batch(header, position)
                if on_batch is not None:
                    on_batch(header)
                valid = position + header.size
        except (CorruptRecordError, InvalidRecordError, CorruptIndexError):
            pass
        truncated = self._size - valid
        if truncated:
            os.ftruncate(self._log.fd(), valid)
            self._size = valid
        self.offset_index.flush()
        self.time_index.flush()
        return truncated

    def _validated_batches(self) -> Iterator[tuple[int, BatchHeader]]:
        position, expected = 0, self.base_offset
        while position < self._size:
            # fd() again per read: the caller's on_batch may open files between two yields.
            chunk = os.pread(self._log.fd(), min(_RECOVER_CHUNK, self._size - position), position)
            offset = 0
            while offset < len(chunk):
                if len(chunk) - offset < RECORD_BATCH_OVERHEAD:
                    if position + offset + RECORD_BATCH_OVERHEAD > self._size:
                        raise CorruptRecordError("torn batch header at the end of the log")
                    break
                declared = parse_header(chunk, offset).size
                if offset + declared > len(chunk) and position + offset + declared <= self._size:
                    if offset == 0:  # a batch larger than the chunk
                        chunk = os.pread(self._log.fd(), declared, position)
                    else:
                        break
                header = validate_batch(chunk, offset)
                if header.base_offset < expected or header.last_offset - self.base_offset > (
                    _MAX_RELATIVE
                ):
                    raise InvalidRecordError(f"offset {header.base_offset} out of order")
                expected = header.next_offset
                yield position + offset, header
                offset += header.size
            position += offset

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; return the bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self._size - position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        os.ftruncate(self._log.fd(), position)
        self._size = position
        self.load_tail()
        return removed

    # --- durability and lifecycle ------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Closed for good (``close``, ``delete``); an evicted file is not closed."""
        return self._log.closed

    @property
    def open_files(self) -> int:
        """How many of the three files hold a descriptor now (the others are evicted)."""
        return self._log.is_open + self.offset_index.is_open + self.time_index.is_open

    def dup_fds(self, indexes: bool) -> list[int]:
        """Duplicated descriptors to fsync off the owner's thread (see ``sync_and_close``):
        the ``.log`` and, with ``indexes``, both index files (written out first). They are
        the caller's: evicting the segment's own descriptors leaves them open."""
        fds = [self._log.dup()]
        if indexes:
            try:
                self.offset_index.flush()
                self.time_index.flush()
                fds += [self.offset_index.dup_fd(), self.time_index.dup_fd()]
            except BaseException:
                for fd in fds:
                    os.close(fd)
                raise
        return fds

    def close(self) -> None:
        """Write out the indexes and release the three files."""
        if not self._log.closed:
            self.offset_index.close()
            self.time_index.close()
            self._log.close()

    def delete(self) -> None:
        """Release and remove the segment's three files (nothing is written first)."""
        self._log.close()
        self.offset_index.delete()
        self.time_index.delete()
        self.log_path.unlink(missing_ok=True)
