"""Validate a whole append request before a byte is written, and assign its offsets.

An append request is one or more RecordBatch v2 back to back. ``validate_leader_append``
checks every batch — framing, CRC-32C, ``max.message.bytes``, codec, record count, producer
epoch and sequence — and assigns offsets from the log end offset and the leader epoch, by
building new headers (the bytes themselves are patched only while being written, see
``LogSegment.append``). ``validate_follower_append`` checks framing and CRC and keeps the
offsets and epochs the leader assigned. Either raises a typed error and leaves the log alone.

Pure functions over the request bytes and the producer state (read only); no I/O.
"""

from __future__ import annotations

from typing import NamedTuple

from yak.errors import (
    InvalidRecordError,
    MessageTooLargeError,
    OutOfOrderSequenceError,
    UnsupportedCompressionTypeError,
)
from yak.record.batch_header import (
    LOG_OVERHEAD,
    BatchHeader,
    CompressionType,
    iter_batches,
    validate_batch,
)
from yak_broker.storage.log_config import LogConfig
from yak_broker.storage.producer_state import DuplicateBatch, ProducerStateManager
from yak_broker.storage.segment import PendingBatch

__all__ = ["ValidatedAppend", "validate_follower_append", "validate_leader_append"]

_MAX_CODEC = int(max(CompressionType))
_CODEC_MASK = 0x07
_CONTROL_BIT = 0x20


class ValidatedAppend(NamedTuple):
    """The batches of a request with the offsets they will be stored under."""

    batches: list[PendingBatch]
    size: int
    record_count: int
    max_timestamp: int
    offset_of_max_timestamp: int
    first_offset: int
    last_offset: int
    duplicate: DuplicateBatch | None = None


def validate_leader_append(
    buf: memoryview,
    log_end_offset: int,
    leader_epoch: int,
    config: LogConfig,
    producers: ProducerStateManager,
) -> ValidatedAppend:
    """Check a client's request and assign offsets from ``log_end_offset``.

    A retried idempotent batch yields ``duplicate`` (its original offsets) and no batches.
    """
    batches: list[PendingBatch] = []
    last_by_producer: dict[int, BatchHeader] = {}
    next_offset = log_end_offset
    position, end = 0, len(buf)
    size = records = 0
    max_timestamp, offset_of_max = -1, log_end_offset
    max_message_bytes = config.max_message_bytes
    while position < end:  # the hot path: kept to one header parse and one CRC per batch
        header = validate_batch(buf, position)
        batch_size = header.batch_length + LOG_OVERHEAD
        attributes = header.attributes
        if (
            batch_size > max_message_bytes
            or attributes & _CONTROL_BIT
            or attributes & _CODEC_MASK > _MAX_CODEC
            or not header.record_count
        ):
            _reject(position, header, config)
        if header.producer_id >= 0:
            previous = last_by_producer.get(header.producer_id)
            if previous is None:
                duplicate = producers.check(header)
                if duplicate is not None:
                    return ValidatedAppend([], 0, 0, -1, -1, -1, -1, duplicate)
            else:
                _check_follows(previous, header)
            last_by_producer[header.producer_id] = header
        batches.append(
            PendingBatch(
                position, BatchHeader(next_offset, header.batch_length, leader_epoch, *header[3:])
            )
        )
        last_offset = next_offset + header.last_offset_delta
        if header.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = header.max_timestamp, last_offset
        next_offset = last_offset + 1
        records += header.record_count
        size += batch_size
        position += batch_size
    if not batches:
        raise InvalidRecordError("the request holds no record batch")
    _check_fits(size, config)
    return ValidatedAppend(
        batches, size, records, max_timestamp, offset_of_max, log_end_offset, next_offset - 1
    )


def validate_follower_append(
    buf: memoryview, log_end_offset: int, config: LogConfig
) -> ValidatedAppend:
    """Check a replica's copy of leader batches: offsets must not go below ``log_end_offset``."""
    batches: list[PendingBatch] = []
    expected = log_end_offset
    for position, header in iter_batches(buf):
        if header.base_offset < expected:
            raise InvalidRecordError(
                f"batch at position {position} starts at offset {header.base_offset}, "
                f"below the expected {expected}",
                offset=header.base_offset,
            )
        batches.append(PendingBatch(position, header))
        expected = header.next_offset
    return _summarise(batches, config)


def _reject(position: int, header: BatchHeader, config: LogConfig) -> None:
    """Raise the error for a batch the hot path flagged (too large, bad codec, control, empty)."""
    size = header.batch_length + LOG_OVERHEAD
    if size > config.max_message_bytes:
        raise MessageTooLargeError(
            f"batch at position {position} has {size} bytes, "
            f"above max.message.bytes {config.max_message_bytes}",
            size=size,
            max_message_bytes=config.max_message_bytes,
        )
    if header.attributes & _CODEC_MASK > _MAX_CODEC:
        raise UnsupportedCompressionTypeError(
            f"batch at position {position} uses unknown codec {header.attributes & _CODEC_MASK}"
        )
    if header.attributes & _CONTROL_BIT:
        raise InvalidRecordError(f"batch at position {position}: clients may not write control")
    raise InvalidRecordError(f"batch at position {position} holds no records")


def _check_fits(size: int, config: LogConfig) -> None:
    if size > config.segment_bytes:
        raise MessageTooLargeError(
            f"request of {size} bytes does not fit in a segment of {config.segment_bytes}",
            size=size,
        )


def _check_follows(previous: BatchHeader, header: BatchHeader) -> None:
    """Two batches of one producer in one request must be consecutive in one epoch."""
    expected = (previous.last_sequence + 1) & 0x7FFFFFFF
    if header.producer_epoch != previous.producer_epoch or header.base_sequence != expected:
        raise OutOfOrderSequenceError(
            f"producer {header.producer_id}: batch with epoch {header.producer_epoch} "
            f"sequence {header.base_sequence} does not follow epoch "
            f"{previous.producer_epoch} sequence {previous.last_sequence} in the same request",
            producer_id=header.producer_id,
        )


def _summarise(batches: list[PendingBatch], config: LogConfig) -> ValidatedAppend:
    if not batches:
        raise InvalidRecordError("the request holds no record batch")
    size = records = 0
    max_timestamp, offset_of_max = -1, batches[0].header.base_offset
    for _, header in batches:
        size += header.batch_length + LOG_OVERHEAD
        records += header.record_count
        if header.max_timestamp > max_timestamp:
            max_timestamp = header.max_timestamp
            offset_of_max = header.base_offset + header.last_offset_delta
    _check_fits(size, config)
    last = batches[-1].header
    return ValidatedAppend(
        batches,
        size,
        records,
        max_timestamp,
        offset_of_max,
        batches[0].header.base_offset,
        last.base_offset + last.last_offset_delta,
    )
