"""Whole RecordBatch v2 encoding and decoding: header + (compressed) records + CRC-32C.

A batch is the 61-byte header described in ``yak.record.batch_header`` followed by the records
section (``yak.record.record``), compressed as one block when attributes bits 0-2 name a codec
(``yak.record.compression``). The CRC-32C covers attributes..end, so it is computed last, over
the compressed bytes; baseOffset and partitionLeaderEpoch stay outside it so the broker can
patch them.

Header fields written by ``encode_batch`` follow Kafka's producer: baseTimestamp is the first
record's timestamp unless given, maxTimestamp the largest record timestamp, lastOffsetDelta
the last record's offset delta unless given (a compacted batch keeps its original one), and
the codec bits are cleared for a batch with no records (which has no records section).
``encode_batch_of`` writes the header and CRC around a records section encoded beforehand.

Decoding validates framing and CRC first (``validate_batch``), then decompresses and decodes
every record; any inconsistency raises ``CorruptRecordError``, ``InvalidRecordError`` or
``UnsupportedCompressionTypeError`` — never a partial or wrong result. Records of a
LogAppendTime batch all carry its maxTimestamp, as Kafka's consumers report them.

Pure functions over bytes; safe from any thread.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import crc32c

from yak.errors import InvalidRecordError
from yak.record.batch_header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Buffer,
    CompressionType,
    TimestampType,
    pack_header,
    validate_batch,
)
from yak.record.compression import codec_for, compress
from yak.record.record import Record, RecordInput
from yak.record.record_decoder import decode_records
from yak.record.record_encoder import EncodedRecords, encode_records

__all__ = [
    "DecodedBatch",
    "decode_batch",
    "decode_batches",
    "encode_batch",
    "encode_batch_of",
    "iter_records",
]

_CRC = struct.Struct(">I")
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40


class DecodedBatch(NamedTuple):
    """One decoded batch: its header as stored and its records in offset order."""

    header: BatchHeader
    records: tuple[Record, ...]


def _check_producer_fields(
    producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool, control: bool
) -> None:
    # The same preconditions as Kafka's MemoryRecordsBuilder.
    if transactional and producer_id == NO_PRODUCER_ID:
        raise InvalidRecordError("a transactional batch needs a producer id")
    if producer_id != NO_PRODUCER_ID:
        if producer_epoch < 0:
            raise InvalidRecordError(f"producer id {producer_id} with no producer epoch")
        if base_sequence < 0 and not control:
            raise InvalidRecordError(f"producer id {producer_id} with no base sequence")


def encode_batch(
    records: Sequence[RecordInput],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
    now_ms: int | None = None,
) -> bytes:
    """Encode ``records`` as one RecordBatch v2, byte for byte as Kafka writes it.

    ``now_ms`` stamps records whose timestamp is ``None`` (default: the wall clock, read once).
    With ``TimestampType.LOG_APPEND_TIME`` maxTimestamp is still the largest record timestamp,
    so a broker re-encoding a batch passes its append time as the records' timestamps.
    ``delete_horizon_ms`` (KIP-534, for the log cleaner) sets attributes bit 6 and stores the
    horizon as baseTimestamp, so it cannot be combined with ``base_timestamp``.
    Raises ``InvalidRecordError`` for records or fields that cannot be encoded (offset deltas
    not increasing, values out of range, producer fields that contradict each other) and
    ``UnsupportedCompressionTypeError`` for an unknown codec.
    """
    _check_producer_fields(producer_id, producer_epoch, base_sequence, is_transactional, is_control)
    if delete_horizon_ms is not None:
        if base_timestamp is not None:
            raise InvalidRecordError("a delete horizon is the base timestamp; give only one")
        base_timestamp = delete_horizon_ms
    if now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    return _assemble(
        encode_records(records, base_timestamp, now_ms),
        base_offset=base_offset,
        compression=compression,
        compression_level=compression_level,
        timestamp_type=timestamp_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=is_transactional,
        is_control=is_control,
        last_offset_delta=last_offset_delta,
        delete_horizon=delete_horizon_ms is not None,
    )


def encode_batch_of(
    encoded: EncodedRecords,
    *,
    compression: CompressionType = CompressionType.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """One RecordBatch v2 (base offset 0, create time) around a records section already
    encoded (``record_encoder.encode_bodies``): byte for byte what ``encode_batch`` writes for
    the same records. The rest-proxy's producer frames its batches this way."""
    _check_producer_fields(producer_id, producer_epoch, base_sequence, False, False)
    return _assemble(
        encoded,
        base_offset=0,
        compression=compression,
        compression_level=None,
        timestamp_type=TimestampType.CREATE_TIME,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
        is_transactional=False,
        is_control=False,
        last_offset_delta=None,
        delete_horizon=False,
    )


def _assemble(
    encoded: EncodedRecords,
    *,
    base_offset: int,
    compression: CompressionType,
    compression_level: int | None,
    timestamp_type: TimestampType,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    is_transactional: bool,
    is_control: bool,
    last_offset_delta: int | None,
    delete_horizon: bool,
) -> bytes:
    """The header, (compressed) records section and CRC of one batch (see ``encode_batch``)."""
    if last_offset_delta is None:
        last_offset_delta = encoded.last_offset_delta
    elif last_offset_delta < encoded.last_offset_delta:
        raise InvalidRecordError(
            f"last offset delta {last_offset_delta} is below the last record's "
            f"{encoded.last_offset_delta}"
        )
    body = encoded.data
    if encoded.record_count:
        body = compress(compression, body, compression_level)
        attributes = int(compression)
    else:
        codec_for(compression)  # still reject an unknown codec
        attributes = 0
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_BIT
    if is_transactional:
        attributes |= _TRANSACTIONAL_BIT
    if is_control:
        attributes |= _CONTROL_BIT
    if delete_horizon:
        attributes |= _DELETE_HORIZON_BIT
    header = BatchHeader(
        base_offset,
        RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(body),
        partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        last_offset_delta,
        encoded.base_timestamp,
        encoded.max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        encoded.record_count,
    )
    try:
        head = bytearray(pack_header(header))
    except struct.error as exc:
        raise InvalidRecordError(f"batch header field out of range: {exc}") from exc
    crc = crc32c.crc32c(body, crc32c.crc32c(head[ATTRIBUTES_OFFSET:]))
    _CRC.pack_into(head, CRC_OFFSET, crc)
    return b"".join((head, body))


def decode_batch(
    buf: Buffer,
    pos: int = 0,
    *,
    verify_crc: bool = True,
    from_offset: int = 0,
    until_offset: int | None = None,
) -> DecodedBatch:
    """Decode the batch at ``pos`` of ``buf``: header, CRC, decompression, every record.

    Bytes after the batch are ignored (see ``decode_batches`` for a buffer of several).
    ``verify_crc=False`` skips only the checksum; every structural check still runs.
    ``from_offset``: only records at or above it are decoded and returned; a batch wholly
    below it comes back with no records, neither checksummed nor decompressed (a fetch answers
    whole batches from the one holding the offset asked for). ``until_offset``: records above
    it are stepped over too (framing checked, fields not decoded).
    """
    if from_offset:
        header = validate_batch(buf, pos, check_crc=False)
        if header.base_offset + header.last_offset_delta < from_offset:
            return DecodedBatch(header, ())
    header = validate_batch(buf, pos, check_crc=verify_crc)
    start = pos + RECORD_BATCH_OVERHEAD
    end = pos + header.size
    codec = codec_for(header.compression)
    data: bytes
    if codec.compression == CompressionType.NONE and type(buf) is bytes:
        data = buf  # decode in place: no copy of the records section
    elif start == end and header.record_count == 0:
        data, start, end = b"", 0, 0
    else:
        data = codec.decompress(memoryview(buf)[start:end])
        start, end = 0, len(data)
    append_time = (
        header.max_timestamp if header.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    )
    records = decode_records(
        data,
        start,
        end,
        header.record_count,
        header.base_offset,
        header.base_timestamp,
        header.last_offset_delta,
        append_time,
        from_offset,
        until_offset,
    )
    return DecodedBatch(header, tuple(records))


def decode_batches(
    buf: Buffer, *, verify_crc: bool = True, from_offset: int = 0
) -> Iterator[DecodedBatch]:
    """Decode every batch of a buffer that holds several back to back.

    Batches are yielded as they decode; a buffer that does not end on a batch boundary raises
    ``CorruptRecordError`` after the complete batches before the damage. ``from_offset`` as
    for ``decode_batch``.
    """
    pos = 0
    end = len(memoryview(buf))
    while pos < end:
        batch = decode_batch(buf, pos, verify_crc=verify_crc, from_offset=from_offset)
        yield batch
        pos += batch.header.size


def iter_records(buf: Buffer, *, verify_crc: bool = True, from_offset: int = 0) -> Iterator[Record]:
    """Every record of every batch in ``buf``, in order (control batches included); with
    ``from_offset``, those at or above it (the ones below are stepped over, not decoded)."""
    for batch in decode_batches(buf, verify_crc=verify_crc, from_offset=from_offset):
        yield from batch.records
