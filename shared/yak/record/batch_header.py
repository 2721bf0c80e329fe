"""The 61-byte header of a Kafka RecordBatch v2 (magic 2), and framing checks over raw bytes.

Byte layout (big-endian), as in Kafka's ``DefaultRecordBatch``::

    offset  field                 type
    0       baseOffset            int64
    8       batchLength           int32   bytes after this field (the whole batch is length + 12)
    12      partitionLeaderEpoch  int32   not covered by the CRC: the leader stamps it
    16      magic                 int8    always 2
    17      crc                   uint32  CRC-32C of bytes 21 .. end of batch
    21      attributes            int16   bits 0-2 codec, 3 timestamp type,
                                          4 transactional, 5 control
    23      lastOffsetDelta       int32
    27      baseTimestamp         int64
    35      maxTimestamp          int64
    43      producerId            int64
    51      producerEpoch         int16
    53      baseSequence          int32
    57      recordCount           int32
    61      records ...           (compressed as one block when a codec is set)

``baseOffset`` and ``partitionLeaderEpoch`` sit outside the CRC, so a broker assigns offsets and
stamps the epoch by patching 12 bytes (``patch_offset_and_epoch``) without re-encoding records
and without recomputing the checksum. This module only reads headers and validates framing; it
never decodes individual records (that is ``yak.record.batch``), so the broker's cost per batch
is constant.

Pure functions over ``bytes``/``bytearray``/``memoryview``; safe to call from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from enum import IntEnum
from typing import NamedTuple

import crc32c

from yak.errors import CorruptRecordError, InvalidRecordError

#: Anything that exposes bytes without a copy.
Buffer = bytes | bytearray | memoryview

__all__ = [
    "ATTRIBUTES_OFFSET",
    "BASE_OFFSET_OFFSET",
    "CRC_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "RECORD_BATCH_OVERHEAD",
    "BatchHeader",
    "Buffer",
    "CompressionType",
    "TimestampType",
    "compute_crc",
    "iter_batches",
    "pack_header",
    "parse_header",
    "patch_offset_and_epoch",
    "validate_batch",
]

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
RECORD_BATCH_OVERHEAD = 61
#: baseOffset + batchLength: the bytes of a batch not counted by batchLength.
LOG_OVERHEAD = 12
MAGIC_V2 = 2

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40


class CompressionType(IntEnum):
    """Codec ids of attributes bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Attributes bit 3: who set the timestamps."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
    """The decoded fixed header of one batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """The codec id (see ``CompressionType``); may be an unknown value from a bad client."""
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_BIT)

    @property
    def last_sequence(self) -> int:
        """The sequence of the batch's last record (wrapping at 2**31 as Kafka does)."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Decode the header at ``pos``; raises CorruptRecordError if fewer than 61 bytes remain."""
    view = memoryview(buf)
    if len(view) - pos < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"truncated batch header at position {pos}: "
            f"{max(len(view) - pos, 0)} of {RECORD_BATCH_OVERHEAD} bytes"
        )
    return BatchHeader._make(_HEADER.unpack_from(view, pos))


def pack_header(header: BatchHeader) -> bytes:
    """The 61 header bytes of ``header``, fields written as given (the CRC is not computed).

    Raises ``struct.error`` if a field does not fit its type.
    """
    return _HEADER.pack(*header)


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C over attributes..end of the batch that starts at ``pos`` and spans ``size``."""
    view = memoryview(buf)
    return int(crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]))


def validate_batch(buf: Buffer, pos: int = 0, *, check_crc: bool = True) -> BatchHeader:
    """Check one batch's framing (length, magic, offsets) and CRC; return its header.

    Raises CorruptRecordError for a truncated, mis-sized or checksum-failing batch and
    InvalidRecordError for a well-framed batch with impossible fields.
    """
    header = parse_header(buf, pos)
    size = header.size
    available = len(memoryview(buf)) - pos
    if header.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"batch at position {pos} declares length {header.batch_length}, "
            f"below the minimum {RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}"
        )
    if size > available:
        raise CorruptRecordError(
            f"truncated batch at position {pos}: declares {size} bytes, {available} remain"
        )
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(
            f"batch at position {pos} has magic {header.magic}; only magic 2 is supported"
        )
    if check_crc:
        actual = compute_crc(buf, pos, size)
        if actual != header.crc:
            raise CorruptRecordError(
                f"CRC-32C mismatch in batch at position {pos}: "
                f"stored {header.crc:#010x}, computed {actual:#010x}"
            )
    if header.record_count < 0 or header.last_offset_delta < 0:
        raise InvalidRecordError(
            f"batch at position {pos} has record count {header.record_count} "
            f"and last offset delta {header.last_offset_delta}"
        )
    if header.record_count > 0 and header.last_offset_delta < header.record_count - 1:
        raise InvalidRecordError(
            f"batch at position {pos} holds {header.record_count} records "
            f"but its last offset delta is {header.last_offset_delta}"
        )
    return header


def iter_batches(
    buf: Buffer, start: int = 0, end: int | None = None, *, check_crc: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each batch in ``buf[start:end]``, validating each one.

    A buffer that does not end exactly on a batch boundary raises CorruptRecordError at the
    first bad batch, after the good ones before it were yielded.
    """
    view = memoryview(buf)
    stop = len(view) if end is None else end
    bounded = view[:stop]
    pos = start
    while pos < stop:
        header = validate_batch(bounded, pos, check_crc=check_crc)
        yield pos, header
        pos += header.size


def patch_offset_and_epoch(
    buf: bytearray | memoryview, pos: int, base_offset: int, epoch: int
) -> None:
    """Write ``baseOffset`` and ``partitionLeaderEpoch`` in place (both lie outside the CRC)."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)
