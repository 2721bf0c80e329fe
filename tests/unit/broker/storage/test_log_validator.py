"""Tests for yak_broker.storage.log_validator: whole-request validation and offset assignment."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.unit.broker.storage.batches import make_batch
from yak.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    OutOfOrderSequenceError,
    UnsupportedCompressionTypeError,
)
from yak_broker.storage.log_config import LogConfig
from yak_broker.storage.log_validator import (
    ValidatedAppend,
    validate_follower_append,
    validate_leader_append,
)
from yak_broker.storage.producer_state import ProducerStateManager

CONFIG = LogConfig(max_message_bytes=2000, segment_bytes=5000)


def leader(
    buf: bytes, tmp_path: Path, producers: ProducerStateManager | None = None
) -> ValidatedAppend:
    return validate_leader_append(
        memoryview(buf), 40, 5, CONFIG, producers or ProducerStateManager(tmp_path)
    )


def test_assigns_consecutive_offsets_and_the_epoch(tmp_path: Path) -> None:
    request = (
        make_batch(3, timestamp=10) + make_batch(1, timestamp=30) + make_batch(2, timestamp=20)
    )
    result = leader(request, tmp_path)
    assert [(b.header.base_offset, b.header.last_offset) for b in result.batches] == [
        (40, 42),
        (43, 43),
        (44, 45),
    ]
    assert {b.header.partition_leader_epoch for b in result.batches} == {5}
    assert [b.position for b in result.batches] == [0, len(make_batch(3)), len(make_batch(3)) * 2]
    assert (result.first_offset, result.last_offset, result.record_count) == (40, 45, 6)
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (30, 43)
    assert result.size == len(request)


def test_a_bad_crc_anywhere_rejects_the_whole_request(tmp_path: Path) -> None:
    bad = bytearray(make_batch(1))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        leader(make_batch(1) + bytes(bad), tmp_path)


def test_trailing_partial_batch_is_corrupt(tmp_path: Path) -> None:
    with pytest.raises(CorruptRecordError):
        leader(make_batch(1) + make_batch(1)[:30], tmp_path)


def test_empty_request_is_invalid(tmp_path: Path) -> None:
    with pytest.raises(InvalidRecordError):
        leader(b"", tmp_path)


def test_too_large_batch_and_request(tmp_path: Path) -> None:
    with pytest.raises(MessageTooLargeError):
        leader(make_batch(1, 2000), tmp_path)
    with pytest.raises(MessageTooLargeError):
        leader(make_batch(1, 1800) * 3, tmp_path)  # each fits; together not in a segment


def test_every_known_codec_is_accepted(tmp_path: Path) -> None:
    for codec in range(5):  # the broker stores compressed batches without decompressing
        assert len(leader(make_batch(1, attributes=codec), tmp_path).batches) == 1


def test_unknown_codec_no_records_and_control_batches(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedCompressionTypeError):
        leader(make_batch(1, attributes=7), tmp_path)
    empty = bytearray(make_batch(1))
    struct.pack_into(">i", empty, 57, 0)
    with pytest.raises((InvalidRecordError, CorruptRecordError)):
        leader(bytes(empty), tmp_path)
    with pytest.raises(InvalidRecordError):
        leader(make_batch(1, attributes=0x20), tmp_path)


def test_idempotent_batches_in_one_request_must_be_consecutive(tmp_path: Path) -> None:
    first = make_batch(3, producer_id=9, producer_epoch=0, base_sequence=0)
    follows = make_batch(2, producer_id=9, producer_epoch=0, base_sequence=3)
    gap = make_batch(2, producer_id=9, producer_epoch=0, base_sequence=4)
    assert len(leader(first + follows, tmp_path).batches) == 2
    with pytest.raises(OutOfOrderSequenceError):
        leader(first + gap, tmp_path)


def test_follower_append_keeps_offsets_and_rejects_going_back(tmp_path: Path) -> None:
    batches = make_batch(2, base_offset=40, epoch=3) + make_batch(1, base_offset=42, epoch=4)
    result = validate_follower_append(memoryview(batches), 40, CONFIG)
    assert [(b.header.base_offset, b.header.partition_leader_epoch) for b in result.batches] == [
        (40, 3),
        (42, 4),
    ]
    with pytest.raises(InvalidRecordError):
        validate_follower_append(memoryview(batches), 41, CONFIG)
