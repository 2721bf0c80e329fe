"""Cross-checks against kafka-python's independent RecordBatch v2 implementation."""

import warnings
from typing import Any

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yak.record import CompressionType, Record, RecordInput, decode_batch, encode_batch

with warnings.catch_warnings():
    # kafka-python's package import uses a deprecated importlib API; not our code.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec as kp_codec
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

NOW = 1_700_000_000_000
# kafka-python has no snappy codec installed; the fixture below lends it cramjam's.
CODECS = list(CompressionType)


class _CramjamSnappy:
    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


@pytest.fixture(autouse=True)
def _kafka_python_snappy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kp_codec, "snappy", _CramjamSnappy)


nullable_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=8), nullable_bytes), max_size=3).map(tuple)


@st.composite
def batches(draw: st.DrawFn) -> list[tuple[int, int, bytes | None, bytes | None, Any]]:
    """(offset delta, timestamp, key, value, headers) rows with gaps and unordered times."""
    rows, delta = [], -1
    for _ in range(draw(st.integers(1, 10))):
        delta += draw(st.sampled_from([1, 1, 1, 2, 70, 9000]))
        ts = NOW + draw(st.integers(-100_000, 100_000))
        rows.append((delta, ts, draw(nullable_bytes), draw(nullable_bytes), draw(headers)))
    return rows


producers = st.sampled_from(
    [(-1, -1, -1, False), (7, 0, 0, False), (123_456_789_012, 3, 2_000_000_000, True)]
)
_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _kafka_python_batch(
    rows: list[Any], codec: CompressionType, producer: tuple[int, int, int, bool]
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=producer[3],
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        batch_size=1 << 30,
    )
    for delta, ts, key, value, hdrs in rows:
        assert builder.append(delta, ts, key, value, list(hdrs)) is not None
    return bytes(builder.build())


@_SETTINGS
@given(rows=batches(), codec=st.sampled_from(CODECS), producer=producers)
def test_our_batches_decode_in_kafka_python(
    rows: list[Any], codec: CompressionType, producer: tuple[int, int, int, bool]
) -> None:
    inputs = [RecordInput(key, value, hdrs, ts, delta) for delta, ts, key, value, hdrs in rows]
    raw = encode_batch(
        inputs,
        base_offset=1000,
        compression=codec,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        is_transactional=producer[3],
    )
    theirs = DefaultRecordBatch(raw)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert (theirs.base_offset, theirs.last_offset_delta) == (1000, rows[-1][0])
    assert theirs.first_timestamp == rows[0][1]
    assert theirs.max_timestamp == max(row[1] for row in rows)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == producer[:3]
    assert theirs.is_transactional == producer[3]
    assert theirs.records_count == len(rows)
    got = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in theirs]
    assert got == [(1000 + d, ts, k, v, h) for d, ts, k, v, h in rows]


@_SETTINGS
@given(rows=batches(), codec=st.sampled_from(CODECS), producer=producers)
def test_kafka_python_batches_decode_here(
    rows: list[Any], codec: CompressionType, producer: tuple[int, int, int, bool]
) -> None:
    raw = _kafka_python_batch(rows, codec, producer)
    batch = decode_batch(raw)
    # kafka-python sends a batch uncompressed when compressing would not shrink it.
    assert batch.header.compression in (codec, CompressionType.NONE)
    assert (batch.header.producer_id, batch.header.producer_epoch) == producer[:2]
    assert batch.header.base_sequence == producer[2]
    assert batch.header.is_transactional == producer[3]
    assert batch.records == tuple(Record(d, ts, k, v, h) for d, ts, k, v, h in rows)


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD])
def test_same_input_gives_the_same_bytes_as_kafka_python(codec: CompressionType) -> None:
    # kafka-python writes baseOffset 0 and partitionLeaderEpoch 0; zstd uses the same library
    # at the same default level, so even the compressed block is identical.
    rows: list[Any] = [
        (d, NOW + d, b"key-%d" % d, b"value " * 20, (("h", b"v"),) if d % 2 else ())
        for d in (0, 1, 2, 5, 300)
    ]
    inputs = [RecordInput(key, value, hdrs, ts, delta) for delta, ts, key, value, hdrs in rows]
    ours = encode_batch(inputs, compression=codec, partition_leader_epoch=0)
    assert ours == _kafka_python_batch(rows, codec, (-1, -1, -1, False))


def test_kafka_python_reads_several_of_our_batches_as_memory_records() -> None:
    raw = b"".join(
        encode_batch([RecordInput(b"k", b"v%d" % i, timestamp=NOW)], base_offset=i, compression=c)
        for i, c in enumerate(CODECS)
    )
    values: list[tuple[int, bytes]] = []
    records = MemoryRecords(raw)
    while (batch := records.next_batch()) is not None:
        values.extend((r.offset, r.value) for r in batch)
    assert values == [(i, b"v%d" % i) for i in range(len(CODECS))]
