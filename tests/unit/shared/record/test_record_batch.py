import struct
import time
from typing import Any

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yak.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionTypeError
from yak.record import (
    CompressionType,
    Record,
    RecordInput,
    TimestampType,
    decode_batch,
    decode_batches,
    encode_batch,
    iter_records,
)
from yak.record.batch import encode_batch_of
from yak.record.batch_header import compute_crc, patch_offset_and_epoch, validate_batch
from yak.record.record_encoder import encode_bodies, encode_record_body

NOW = 1_700_000_000_000

nullable_bytes = st.none() | st.binary(max_size=200)
headers = st.lists(st.tuples(st.text(max_size=12), nullable_bytes), max_size=3).map(tuple)
timestamps = st.none() | st.integers(-1, 1 << 42)
# Gaps up to 20,000 cross the precomputed-varint limit (8,192); None means "previous + 1".
gaps = st.none() | st.integers(1, 20_000)


@st.composite
def record_inputs(draw: st.DrawFn) -> list[RecordInput]:
    count = draw(st.integers(1, 12))
    out, delta = [], -1
    for _ in range(count):
        gap = draw(gaps)
        explicit = None if gap is None else delta + gap
        delta = delta + 1 if explicit is None else explicit
        out.append(
            RecordInput(
                draw(nullable_bytes), draw(nullable_bytes), draw(headers), draw(timestamps)
            )._replace(offset_delta=explicit)
        )
    return out


producer_fields: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.just({}),
    st.fixed_dictionaries(
        {
            "producer_id": st.integers(0, (1 << 63) - 1),
            "producer_epoch": st.integers(0, (1 << 15) - 1),
            "base_sequence": st.integers(0, (1 << 31) - 1),
            "is_transactional": st.booleans(),
        }
    ),
)


def expected_records(
    inputs: list[RecordInput], base_offset: int, log_append: bool
) -> tuple[Record, ...]:
    stamps = [NOW if r.timestamp is None else r.timestamp for r in inputs]
    out, delta = [], -1
    for record, ts in zip(inputs, stamps, strict=True):
        delta = delta + 1 if record.offset_delta is None else record.offset_delta
        out.append(
            Record(
                base_offset + delta,
                max(stamps) if log_append else ts,
                record.key,
                record.value,
                record.headers,
            )
        )
    return tuple(out)


@settings(max_examples=150, deadline=None)
@given(
    inputs=record_inputs(),
    codec=st.sampled_from(list(CompressionType)),
    base_offset=st.integers(0, 1 << 62),
    leader_epoch=st.integers(-1, (1 << 31) - 1),
    timestamp_type=st.sampled_from(list(TimestampType)),
    producer=producer_fields,
)
def test_batches_round_trip(
    inputs: list[RecordInput],
    codec: CompressionType,
    base_offset: int,
    leader_epoch: int,
    timestamp_type: TimestampType,
    producer: dict[str, Any],
) -> None:
    raw = encode_batch(
        inputs,
        base_offset=base_offset,
        compression=codec,
        timestamp_type=timestamp_type,
        partition_leader_epoch=leader_epoch,
        now_ms=NOW,
        **producer,
    )
    batch = decode_batch(raw)
    log_append = timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.records == expected_records(inputs, base_offset, log_append)
    header = batch.header
    stamps = [NOW if r.timestamp is None else r.timestamp for r in inputs]
    assert header.size == len(raw)
    assert header.base_offset == base_offset
    assert header.partition_leader_epoch == leader_epoch
    assert header.compression == codec
    assert header.timestamp_type == timestamp_type
    assert header.record_count == len(inputs)
    assert header.last_offset == batch.records[-1].offset
    assert header.base_timestamp == stamps[0]
    assert header.max_timestamp == max(stamps)
    assert header.producer_id == producer.get("producer_id", -1)
    assert header.producer_epoch == producer.get("producer_epoch", -1)
    assert header.base_sequence == producer.get("base_sequence", -1)
    assert header.is_transactional == producer.get("is_transactional", False)
    assert not header.is_control
    assert header.crc == crc32c.crc32c(raw[21:])


def test_header_layout_matches_kafkas_field_offsets() -> None:
    raw = encode_batch(
        [RecordInput(b"k", b"v", timestamp=1000), RecordInput(None, None, timestamp=1005)],
        base_offset=7,
        partition_leader_epoch=3,
        producer_id=11,
        producer_epoch=2,
        base_sequence=40,
        is_transactional=True,
        compression=CompressionType.GZIP,
    )
    fields = struct.unpack_from(">qiibIhiqqqhii", raw)
    assert fields[0] == 7  # baseOffset
    assert fields[1] == len(raw) - 12  # batchLength counts the bytes after itself
    assert fields[2:4] == (3, 2)  # partitionLeaderEpoch, magic
    assert fields[5] == 0x10 | 1  # transactional, gzip
    assert fields[6:9] == (1, 1000, 1005)  # lastOffsetDelta, base and max timestamp
    assert fields[9:13] == (11, 2, 40, 2)  # producer id/epoch, base sequence, record count


def test_uncompressed_records_are_laid_out_as_kafka_documents() -> None:
    raw = encode_batch(
        [RecordInput(b"key", b"value", (("h", b"x"), ("n", None)), timestamp=NOW)],
        base_timestamp=NOW - 1,
    )
    body = raw[61:]
    expected = (
        b"\x00"  # attributes
        b"\x02"  # timestampDelta 1
        b"\x00"  # offsetDelta 0
        b"\x06key"  # key length 3
        b"\x0avalue"  # value length 5
        b"\x04"  # 2 headers
        b"\x02h\x02x"  # "h" -> b"x"
        b"\x02n\x01"  # "n" -> null
    )
    assert body == bytes([len(expected) * 2]) + expected


def test_offset_gaps_are_kept_and_last_offset_delta_can_be_wider() -> None:
    inputs = [
        RecordInput(b"a", b"1", offset_delta=0),
        RecordInput(b"b", b"2", offset_delta=5),
        RecordInput(b"c", b"3"),
        RecordInput(b"d", b"4", offset_delta=100_000),
    ]
    raw = encode_batch(inputs, base_offset=1000, last_offset_delta=100_010, now_ms=NOW)
    batch = decode_batch(raw)
    assert [r.offset for r in batch.records] == [1000, 1005, 1006, 101_000]
    assert batch.header.last_offset_delta == 100_010
    assert batch.header.next_offset == 101_011


def test_explicit_base_timestamp_allows_negative_deltas() -> None:
    raw = encode_batch([RecordInput(value=b"v", timestamp=NOW)], base_timestamp=NOW + 50_000)
    batch = decode_batch(raw)
    assert batch.header.base_timestamp == NOW + 50_000
    assert batch.records[0].timestamp == NOW


def test_large_values_and_many_headers_take_the_general_path() -> None:
    big = bytes(range(256)) * 100
    many = tuple((f"h{i}", bytes([i]) * i) for i in range(70))
    inputs = [RecordInput(big[:9000], big, many, NOW, 0), RecordInput(b"k", b"v", (), NOW, 9000)]
    for codec in CompressionType:
        batch = decode_batch(encode_batch(inputs, compression=codec))
        assert [(r.key, r.value, r.headers, r.offset) for r in batch.records] == [
            (big[:9000], big, many, 0),
            (b"k", b"v", (), 9000),
        ]


def test_empty_batch_keeps_offsets_and_has_no_records_section() -> None:
    raw = encode_batch(
        [],
        base_offset=50,
        last_offset_delta=9,
        base_timestamp=NOW,
        compression=CompressionType.ZSTD,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
    )
    assert len(raw) == 61
    batch = decode_batch(raw)
    assert batch.records == ()
    assert batch.header.compression == CompressionType.NONE
    assert (batch.header.record_count, batch.header.next_offset) == (0, 60)
    assert batch.header.max_timestamp == NOW


def test_delete_horizon_sets_bit_6_and_is_the_base_timestamp() -> None:
    raw = encode_batch([RecordInput(b"k", None, timestamp=NOW)], delete_horizon_ms=NOW + 86_400_000)
    assert struct.unpack_from(">h", raw, 21)[0] & 0x40
    batch = decode_batch(raw)
    assert batch.header.has_delete_horizon
    assert batch.header.base_timestamp == NOW + 86_400_000
    assert batch.records[0].timestamp == NOW
    with pytest.raises(InvalidRecordError, match="delete horizon"):
        encode_batch([RecordInput()], delete_horizon_ms=NOW, base_timestamp=NOW)


def test_control_batches_are_flagged() -> None:
    marker = RecordInput(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", timestamp=NOW)
    raw = encode_batch(
        [marker], is_control=True, is_transactional=True, producer_id=3, producer_epoch=1
    )
    batch = decode_batch(raw)
    assert batch.header.is_control
    assert batch.records[0].key == marker.key


def test_timestamps_default_to_the_clock() -> None:
    batch = decode_batch(encode_batch([RecordInput(value=b"v")]))
    assert abs(batch.records[0].timestamp - time.time() * 1000) < 60_000


@pytest.mark.parametrize(
    ("inputs", "kwargs", "message"),
    [
        ([RecordInput(offset_delta=3), RecordInput(offset_delta=3)], {}, "does not increase"),
        ([RecordInput(offset_delta=-1)], {}, "does not increase"),
        ([RecordInput(offset_delta=1 << 31)], {}, "cannot be encoded"),
        ([RecordInput(timestamp=1 << 63)], {"base_timestamp": 0}, "cannot be encoded"),
        ([RecordInput(headers=(("\ud800", None),))], {}, "cannot be encoded"),
        ([RecordInput(), RecordInput()], {"last_offset_delta": 0}, "below the last"),
        ([RecordInput()], {"is_transactional": True}, "producer id"),
        ([RecordInput()], {"producer_id": 5}, "no producer epoch"),
        ([RecordInput()], {"producer_id": 5, "producer_epoch": 0}, "no base sequence"),
        ([RecordInput()], {"base_offset": 1 << 63}, "out of range"),
        ([RecordInput()], {"partition_leader_epoch": 1 << 31}, "out of range"),
    ],
)
def test_impossible_batches_are_refused(
    inputs: list[RecordInput], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidRecordError, match=message):
        encode_batch(inputs, now_ms=NOW, **kwargs)


def test_unknown_codec_is_refused_on_encode() -> None:
    with pytest.raises(UnsupportedCompressionTypeError):
        encode_batch([RecordInput()], compression=6)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedCompressionTypeError):
        encode_batch([], compression=6)  # type: ignore[arg-type]


def test_several_batches_decode_in_order_from_any_buffer_type() -> None:
    first = encode_batch([RecordInput(b"a", b"1"), RecordInput(b"b", b"2")], base_offset=0)
    second = encode_batch([RecordInput(b"c", b"3")], base_offset=2, compression=CompressionType.LZ4)
    joined = first + second
    for buf in (joined, bytearray(joined), memoryview(joined)):
        batches = list(decode_batches(buf))
        assert [b.header.base_offset for b in batches] == [0, 2]
        assert [(r.offset, r.key) for r in iter_records(buf)] == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert decode_batch(joined, len(first)).records[0].value == b"3"


def test_broker_patching_keeps_the_batch_valid() -> None:
    raw = bytearray(encode_batch([RecordInput(b"k", b"v"), RecordInput(b"k2", b"v2")]))
    crc_before = compute_crc(raw, 0, len(raw))
    patch_offset_and_epoch(raw, 0, 12_345, 7)
    assert validate_batch(raw).crc == crc_before
    batch = decode_batch(raw)
    assert [r.offset for r in batch.records] == [12_345, 12_346]
    assert batch.header.partition_leader_epoch == 7


def test_crc32c_known_value() -> None:
    # RFC 3720 / Kafka's Crc32C check value; compute_crc covers bytes 21.. of a batch.
    assert crc32c.crc32c(b"123456789") == 0xE3069283
    assert compute_crc(b"\xff" * 21 + b"123456789", 0, 30) == 0xE3069283


@given(
    st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=4),
    st.integers(min_value=0, max_value=130),
)
def test_from_offset_returns_the_tail_of_a_full_decode(sizes: list[int], from_offset: int) -> None:
    data, base = b"", 0
    for size in sizes:
        batch = bytearray(
            encode_batch(
                [RecordInput(key=b"k", value=b"v%d" % i, timestamp=5) for i in range(size)]
            )
        )
        struct.pack_into(">q", batch, 0, base)  # the broker's offset assignment
        data += bytes(batch)
        base += size
    every = list(iter_records(data))
    assert list(iter_records(data, from_offset=from_offset)) == [
        r for r in every if r.offset >= from_offset
    ]


def test_a_batch_wholly_below_from_offset_is_not_checksummed() -> None:
    first = bytearray(encode_batch([RecordInput(key=None, value=b"old", timestamp=1)]))
    second = bytearray(encode_batch([RecordInput(key=None, value=b"new", timestamp=1)]))
    struct.pack_into(">q", second, 0, 1)
    first[-1] ^= 0xFF  # damage the skipped batch's records
    data = bytes(first + second)
    assert [r.value for r in iter_records(data, from_offset=1)] == [b"new"]
    with pytest.raises(CorruptRecordError):
        list(iter_records(data))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            nullable_bytes, nullable_bytes | st.binary(min_size=9000, max_size=9000), headers
        ),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.integers(-1, 1 << 42), min_size=12, max_size=12),
    st.sampled_from([CompressionType.NONE, CompressionType.GZIP]),
    st.integers(0, (1 << 31) - 1),
)
def test_a_batch_of_encoded_bodies_is_byte_for_byte_encode_batch(
    fields: list[tuple[bytes | None, bytes | None, tuple[Any, ...]]],
    stamps: list[int],
    compression: CompressionType,
    base_sequence: int,
) -> None:
    """The producer's path (bodies encoded when queued, framed when sent) writes the bytes,
    and so the CRC, of ``encode_batch`` for the same records."""
    records = [RecordInput(k, v, h, stamps[i]) for i, (k, v, h) in enumerate(fields)]
    producer: dict[str, Any] = {
        "producer_id": 7,
        "producer_epoch": 0,
        "base_sequence": base_sequence,
    }
    expected = encode_batch(records, compression=compression, **producer)
    bodies = [encode_record_body(r.key, r.value, r.headers) for r in records]
    section = encode_bodies(bodies, [r.timestamp or 0 for r in records])
    batch = encode_batch_of(section, compression=compression, **producer)
    assert batch == expected
    assert validate_batch(batch).crc == validate_batch(expected).crc


def test_bodies_and_timestamps_must_pair_up_and_deltas_fit() -> None:
    with pytest.raises(ValueError, match="1 bodies and 0 timestamps"):
        encode_bodies([b"\x01\x01\x00"], [])
    with pytest.raises(InvalidRecordError):
        encode_bodies([b"\x01\x01\x00"] * 2, [-(1 << 63), 1 << 62])
    assert encode_bodies([], []).record_count == 0


@given(st.integers(min_value=1, max_value=40), st.integers(0, 45), st.integers(0, 45))
def test_a_window_of_a_batch_is_the_window_of_a_full_decode(size: int, low: int, high: int) -> None:
    data = encode_batch([RecordInput(key=b"k%d" % i, value=b"v%d" % i) for i in range(size)])
    every = decode_batch(data).records
    window = decode_batch(data, from_offset=low, until_offset=high).records
    assert list(window) == [r for r in every if low <= r.offset <= high]


def test_records_above_until_offset_are_still_framed() -> None:
    data = bytearray(encode_batch([RecordInput(key=None, value=b"v%d" % i) for i in range(3)]))
    pos = 61  # the first record's length varint (one byte, zig-zag, for records this small)
    for _ in range(2):
        pos += 1 + data[pos] // 2
    data[pos] = (data[pos] // 2 + 5) * 2  # the last record claims 5 bytes more than there are
    with pytest.raises(CorruptRecordError, match="overruns"):
        decode_batch(bytes(data), verify_crc=False, until_offset=0)
