"""Only the acquired offsets of a ShareFetch answer are decoded and handed out."""

from __future__ import annotations

import pytest

from yak.errors import CorruptRecordError
from yak.protocol.kafka_share import AcquiredRecords
from yak.record import RecordInput, encode_batch
from yak_rest_proxy.consume.share.acquired import acquired_records


def _batch(base: int, count: int) -> bytes:
    return encode_batch(
        [
            RecordInput(key=f"k{base + i}".encode(), value=f"v{base + i}".encode())
            for i in range(count)
        ],
        base_offset=base,
    )


def _offsets_counts(data: bytes, ranges: list[AcquiredRecords]) -> list[tuple[int, int]]:
    got = acquired_records("t", 3, data, ranges)
    assert (got.topic, got.partition) == ("t", 3)
    return [(r.offset, c) for r, c in zip(got.records, got.delivery_counts, strict=True)]


def test_only_offsets_inside_the_ranges_with_their_delivery_counts() -> None:
    data = _batch(0, 5) + _batch(5, 5)
    ranges = [AcquiredRecords(7, 8, 1), AcquiredRecords(1, 2, 3)]  # any order
    assert _offsets_counts(data, ranges) == [(1, 3), (2, 3), (7, 1), (8, 1)]


def test_records_keep_key_value_and_timestamp() -> None:
    got = acquired_records("t", 0, _batch(10, 3), [AcquiredRecords(11, 11, 2)])
    (record,) = got.records
    assert (record.offset, record.key, record.value) == (11, b"k11", b"v11")
    assert record.timestamp > 0


def test_a_batch_without_acquired_offsets_is_not_decoded() -> None:
    damaged = bytearray(_batch(0, 3))
    damaged[-1] ^= 0xFF  # its checksum fails if it is ever decoded
    data = bytes(damaged) + _batch(3, 2)
    assert _offsets_counts(data, [AcquiredRecords(3, 4, 1)]) == [(3, 1), (4, 1)]
    with pytest.raises(CorruptRecordError):
        acquired_records("t", 0, data, [AcquiredRecords(0, 0, 1)])


def test_control_batches_are_skipped() -> None:
    control = encode_batch([RecordInput(key=b"\x00\x00\x00\x00")], is_control=True)
    data = control + _batch(1, 1)
    assert _offsets_counts(data, [AcquiredRecords(0, 1, 1)]) == [(1, 1)]


def test_no_ranges_or_no_bytes_give_nothing() -> None:
    assert acquired_records("t", 0, _batch(0, 2), []).records == []
    assert acquired_records("t", 0, b"", [AcquiredRecords(0, 1, 1)]).records == []


def test_a_range_beyond_the_batches_gives_what_exists() -> None:
    assert _offsets_counts(_batch(0, 2), [AcquiredRecords(1, 9, 4)]) == [(1, 4)]
