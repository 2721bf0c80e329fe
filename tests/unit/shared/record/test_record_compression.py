import gzip
import os
import struct
import warnings
from collections.abc import Callable

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from yak.errors import CorruptRecordError, UnsupportedCompressionTypeError
from yak.record.batch_header import CompressionType
from yak.record.compression import codec_for, compress, decompress

with warnings.catch_warnings():
    # kafka-python's package import uses a deprecated importlib API; not our code.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec as kp_codec

CODECS = list(CompressionType)
COMPRESSED = [c for c in CompressionType if c != CompressionType.NONE]
SAMPLE = b"".join(b"record %d " % i + os.urandom(8) for i in range(5000))  # ~80 KiB, compressible


class _CramjamSnappy:
    """Stands in for python-snappy (not installed) so kafka-python's snappy codec can run."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


@pytest.fixture
def kafka_python_snappy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kp_codec, "snappy", _CramjamSnappy)


@settings(max_examples=40, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000))
def test_every_codec_round_trips(codec: CompressionType, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_large_blocks_round_trip_from_any_buffer_type(codec: CompressionType) -> None:
    block = compress(codec, SAMPLE)
    assert decompress(codec, block) == SAMPLE
    assert decompress(codec, bytearray(block)) == SAMPLE
    assert decompress(codec, memoryview(b"xx" + block)[2:]) == SAMPLE


@pytest.mark.parametrize("codec", COMPRESSED)
def test_compressible_data_shrinks(codec: CompressionType) -> None:
    assert len(compress(codec, b"a" * 100_000)) < 10_000


@pytest.mark.parametrize("codec_id", [5, 6, 7, -1])
def test_unknown_codec_ids_are_unsupported(codec_id: int) -> None:
    with pytest.raises(UnsupportedCompressionTypeError) as info:
        decompress(codec_id, b"abc")
    assert info.value.details == {"compression": codec_id}
    with pytest.raises(UnsupportedCompressionTypeError):
        compress(codec_id, b"abc")
    with pytest.raises(UnsupportedCompressionTypeError):
        codec_for(codec_id)


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize(
    "damage",
    [
        lambda block: block[: len(block) // 2],
        lambda block: block[:-1],
        lambda block: b"\x00" * len(block),
        lambda block: b"not a compressed block at all, clearly",
    ],
    ids=["half", "minus-one", "zeros", "text"],
)
def test_damaged_blocks_are_corrupt_records(
    codec: CompressionType, damage: Callable[[bytes], bytes]
) -> None:
    block = compress(codec, SAMPLE)
    with pytest.raises(CorruptRecordError):
        decompress(codec, damage(block))


@pytest.mark.parametrize("codec", [CompressionType.LZ4, CompressionType.GZIP])
def test_junk_after_the_stream_is_corrupt(codec: CompressionType) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, compress(codec, SAMPLE) + b"junk")


def test_gzip_reads_several_members() -> None:
    assert decompress(CompressionType.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


def test_gzip_output_is_reproducible() -> None:
    assert compress(CompressionType.GZIP, SAMPLE) == compress(CompressionType.GZIP, SAMPLE)


def test_zstd_reads_frames_without_content_size_and_several_frames() -> None:
    # Java's streaming zstd encoder writes no content size in the frame header.
    streamed = zstandard.ZstdCompressor(write_content_size=False).compress(SAMPLE)
    assert decompress(CompressionType.ZSTD, streamed) == SAMPLE
    twice = zstandard.ZstdCompressor().compress(b"ab") + streamed
    assert decompress(CompressionType.ZSTD, twice) == b"ab" + SAMPLE


def test_lz4_frame_descriptor_is_kafkas() -> None:
    block = compress(CompressionType.LZ4, SAMPLE)
    assert block[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic 0x184D2204, little-endian
    flg, bd = block[4], block[5]
    assert flg >> 6 == 0b01  # version 1
    assert flg & 0x20  # independent blocks, as KafkaLZ4BlockOutputStream
    assert not flg & 0x10  # no block checksum
    assert not flg & 0x08  # no content size
    assert not flg & 0x04  # no content checksum
    assert bd == 0x40  # 64 KiB maximum block size
    assert lz4.frame.decompress(block) == SAMPLE


def test_snappy_uses_xerial_framing_with_32_kib_blocks() -> None:
    data = os.urandom(100 * 1024)
    block = compress(CompressionType.SNAPPY, data)
    assert block[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, chunks = 16, []
    while pos < len(block):
        (size,) = struct.unpack_from(">i", block, pos)
        chunks.append(bytes(cramjam.snappy.decompress_raw(block[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert [len(c) for c in chunks] == [32768, 32768, 32768, 4096]
    assert b"".join(chunks) == data


def test_snappy_reads_raw_unframed_blocks() -> None:
    raw = bytes(cramjam.snappy.compress_raw(SAMPLE))
    assert decompress(CompressionType.SNAPPY, raw) == SAMPLE


def test_snappy_block_length_overrunning_the_block_is_corrupt() -> None:
    block = bytearray(compress(CompressionType.SNAPPY, SAMPLE))
    struct.pack_into(">i", block, 16, len(block))
    with pytest.raises(CorruptRecordError, match="overruns"):
        decompress(CompressionType.SNAPPY, bytes(block))


_KAFKA_PYTHON = {
    CompressionType.GZIP: (kp_codec.gzip_encode, kp_codec.gzip_decode),
    CompressionType.SNAPPY: (kp_codec.snappy_encode, kp_codec.snappy_decode),
    CompressionType.LZ4: (kp_codec.lz4_encode, kp_codec.lz4_decode),
    CompressionType.ZSTD: (kp_codec.zstd_encode, kp_codec.zstd_decode),
}


@pytest.mark.usefixtures("kafka_python_snappy")
@pytest.mark.parametrize("codec", COMPRESSED)
def test_blocks_interoperate_with_kafka_python(codec: CompressionType) -> None:
    kp_encode, kp_decode = _KAFKA_PYTHON[codec]
    assert kp_decode(compress(codec, SAMPLE)) == SAMPLE
    assert decompress(codec, kp_encode(SAMPLE)) == SAMPLE


@pytest.mark.usefixtures("kafka_python_snappy")
def test_snappy_reads_kafka_pythons_raw_mode() -> None:
    raw = kp_codec.snappy_encode(SAMPLE, xerial_compatible=False)
    assert decompress(CompressionType.SNAPPY, raw) == SAMPLE
