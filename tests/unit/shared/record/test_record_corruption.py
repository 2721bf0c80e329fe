"""Damaged batches must raise typed errors: never a wrong record, never IndexError/struct.error."""

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yak.errors import (
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedCompressionTypeError,
    YakError,
)
from yak.record import CompressionType, RecordInput, decode_batch, decode_batches, encode_batch
from yak.record.compression import compress
from yak.record.varint import encode_varint

NOW = 1_700_000_000_000
_HEADER = struct.Struct(">qiibIhiqqqhii")

SMALL_INPUTS = [
    RecordInput(b"k1", b"value-1", (("h", b"x"),), NOW),
    RecordInput(None, b"v" * 100, (), NOW + 5, 3),
    RecordInput(b"k3", None, (("n", None),), NOW - 2),
]


def small_batch(codec: CompressionType = CompressionType.NONE) -> bytes:
    return encode_batch(SMALL_INPUTS, base_offset=10, compression=codec, now_ms=NOW)


def reframe(body: bytes, count: int, last_offset_delta: int = 0, attributes: int = 0) -> bytes:
    """A batch around a hand-written records section, with a correct length and CRC."""
    fields = (0, 49 + len(body), -1, 2, 0, attributes, last_offset_delta, NOW, NOW)
    header = bytearray(_HEADER.pack(*fields, -1, -1, -1, count))
    struct.pack_into(">I", header, 17, crc32c.crc32c(body, crc32c.crc32c(header[21:])))
    return bytes(header) + body


def record(fields: bytes) -> bytes:
    """A record: its length varint, then ``fields`` (attributes onward)."""
    return encode_varint(len(fields)) + fields


def v(n: int) -> bytes:
    return encode_varint(n)


GOOD_FIELDS = b"\x00" + v(0) + v(0) + v(1) + b"k" + v(1) + b"v" + v(0)


def test_the_hand_written_frame_is_valid() -> None:
    batch = decode_batch(reframe(record(GOOD_FIELDS), 1))
    assert [(r.offset, r.timestamp, r.key, r.value) for r in batch.records] == [
        (0, NOW, b"k", b"v")
    ]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_any_flipped_bit_after_the_base_offset_is_detected(codec: CompressionType) -> None:
    raw = small_batch(codec)
    # batchLength, magic, the CRC itself and everything it covers (attributes..end).
    for pos in [*range(8, 12), *range(16, len(raw))]:
        for mask in (0x01, 0x80, 0xFF):
            damaged = bytearray(raw)
            damaged[pos] ^= mask
            with pytest.raises(CorruptRecordError):
                decode_batch(bytes(damaged))


def test_leader_epoch_and_base_offset_are_outside_the_crc() -> None:
    damaged = bytearray(small_batch())
    damaged[7] ^= 0x01
    damaged[15] ^= 0x01
    batch = decode_batch(bytes(damaged))
    assert batch.header.base_offset == 11
    assert [r.value for r in batch.records] == [r.value for r in SMALL_INPUTS]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_every_truncation_is_corrupt(codec: CompressionType) -> None:
    raw = small_batch(codec)
    for size in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            decode_batch(raw[:size])
        with pytest.raises(CorruptRecordError):
            decode_batch(raw[:size], verify_crc=False)


def test_a_truncated_second_batch_fails_after_the_first_is_yielded() -> None:
    first, second = small_batch(), small_batch(CompressionType.GZIP)
    for size in range(len(first) + 1, len(first) + len(second)):
        batches = decode_batches(first + second[: size - len(first)])
        assert next(batches).records == decode_batch(first).records
        with pytest.raises(CorruptRecordError):
            next(batches)


@settings(max_examples=300, deadline=None)
@given(
    codec=st.sampled_from(list(CompressionType)),
    flips=st.lists(st.tuples(st.integers(61, 10_000), st.integers(1, 255)), min_size=1, max_size=4),
)
def test_without_crc_damage_still_raises_only_typed_errors(
    codec: CompressionType, flips: list[tuple[int, int]]
) -> None:
    damaged = bytearray(small_batch(codec))
    for pos, mask in flips:
        damaged[pos % len(damaged)] ^= mask
    try:
        batch = decode_batch(bytes(damaged), verify_crc=False)
    except YakError:
        return
    assert len(batch.records) == len(SMALL_INPUTS)


CORRUPT_BODIES = {
    "count too high": (record(GOOD_FIELDS), 2),
    "count too low": (record(GOOD_FIELDS) * 2, 1),
    "key length -2": (record(b"\x00" + v(0) + v(0) + v(-2) + v(1) + b"v" + v(0)), 1),
    "value length -5": (record(b"\x00" + v(0) + v(0) + v(-1) + v(-5) + v(0)), 1),
    "key longer than the record": (record(b"\x00" + v(0) + v(0) + v(40) + b"k" + v(0)), 1),
    "value longer than the batch": (record(b"\x00" + v(0) + v(0) + v(-1) + v(5000) + b"v"), 1),
    "record length past the end": (v(len(GOOD_FIELDS) + 1) + GOOD_FIELDS, 1),
    "record length too short": (v(len(GOOD_FIELDS) - 1) + GOOD_FIELDS, 1),
    "record length negative": (v(-3) + GOOD_FIELDS, 1),
    "varint past the end": (record(GOOD_FIELDS)[:-1] + b"\x80", 1),
    "six-byte varint": (record(b"\x00" + v(0) + b"\x80" * 5 + b"\x01" + v(-1) * 2 + v(0)), 1),
    "negative header count": (record(b"\x00" + v(0) + v(0) + v(-1) + v(-1) + v(-1)), 1),
    "null header key": (record(b"\x00" + v(0) + v(0) + v(-1) + v(-1) + v(1) + v(-1) + v(-1)), 1),
    "trailing bytes": (record(GOOD_FIELDS) + b"\x00", 1),
    "empty section, one record": (b"", 1),
}


@pytest.mark.parametrize(("body", "count"), CORRUPT_BODIES.values(), ids=CORRUPT_BODIES.keys())
@pytest.mark.parametrize("followed_by", [b"", small_batch()], ids=["alone", "followed"])
def test_corrupt_records_behind_a_valid_crc(body: bytes, count: int, followed_by: bytes) -> None:
    # A following batch must not lend its bytes to a record that overruns its own batch.
    with pytest.raises(CorruptRecordError):
        decode_batch(reframe(body, count, last_offset_delta=max(count - 1, 0)) + followed_by)


def test_corrupt_compressed_block_behind_a_valid_crc() -> None:
    body = compress(CompressionType.GZIP, record(GOOD_FIELDS))[:-4]
    with pytest.raises(CorruptRecordError, match="gzip"):
        decode_batch(reframe(body, 1, attributes=CompressionType.GZIP))


def test_decompressed_records_are_checked_like_plain_ones() -> None:
    body = compress(CompressionType.ZSTD, record(GOOD_FIELDS) + b"\x00")
    with pytest.raises(CorruptRecordError, match="left after"):
        decode_batch(reframe(body, 1, attributes=CompressionType.ZSTD))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_in_attributes(codec_id: int) -> None:
    with pytest.raises(UnsupportedCompressionTypeError):
        decode_batch(reframe(record(GOOD_FIELDS), 1, attributes=codec_id))


def _fields(delta: int, key: bytes = b"k") -> bytes:
    return b"\x00" + v(0) + v(delta) + v(len(key)) + key + v(-1) + v(0)


INVALID_BODIES = {
    "repeated offset delta": (record(_fields(0)) + record(_fields(0)), 2, 1),
    "decreasing offset delta": (record(_fields(1)) + record(_fields(0)), 2, 1),
    "delta above lastOffsetDelta": (record(_fields(0)) + record(_fields(4)), 2, 3),
}


@pytest.mark.parametrize(
    ("body", "count", "last_delta"), INVALID_BODIES.values(), ids=INVALID_BODIES.keys()
)
def test_impossible_offsets_are_invalid(body: bytes, count: int, last_delta: int) -> None:
    with pytest.raises(InvalidRecordError, match="offset delta"):
        decode_batch(reframe(body, count, last_offset_delta=last_delta))


def test_header_key_that_is_not_utf8_is_invalid() -> None:
    fields = b"\x00" + v(0) + v(0) + v(-1) + v(-1) + v(1) + v(2) + b"\xff\xfe" + v(-1)
    with pytest.raises(InvalidRecordError, match="UTF-8"):
        decode_batch(reframe(record(fields), 1))
