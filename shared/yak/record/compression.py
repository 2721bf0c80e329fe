"""The compression codecs of RecordBatch v2: one registry from codec id to compress/decompress.

When a batch's attributes name a codec (bits 0-2), everything after the 61-byte header — all
the records, with their length prefixes — is one compressed block. The block formats are the
ones Kafka's Java client writes and reads:

===========  ====  =====================================================================
codec        id    block format
===========  ====  =====================================================================
none         0     the records as they are
gzip         1     a gzip stream (RFC 1952); several members are read one after another
snappy       2     xerial framing (as the Java client's ``SnappyOutputStream``): a 16-byte
                   header ``0x82 'SNAPPY' 0x00``, version int32 1, compatible int32 1, then
                   blocks of ``length int32 BE`` + raw snappy of up to 32 KiB of input.
                   Raw (unframed) snappy, as some non-Java clients write, is read too.
lz4          3     one LZ4 frame (lz4 frame format v1) with independent 64 KiB blocks, no
                   content size and no checksums, as ``KafkaLZ4BlockOutputStream`` writes
zstd         4     zstd frames; frames without a content size (Java's streaming encoder)
                   are fine
===========  ====  =====================================================================

Errors: a codec id outside 0-4 raises ``UnsupportedCompressionTypeError``; a block that its
codec cannot decompress (truncated, garbled, trailing junk) raises ``CorruptRecordError``.
Pure functions over bytes; the third-party codecs release no state between calls, so they are
safe from any thread.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable
from typing import NamedTuple

import cramjam
import lz4.frame
import zstandard

from yak.errors import CorruptRecordError, UnsupportedCompressionTypeError
from yak.record.batch_header import Buffer, CompressionType

__all__ = ["Codec", "codec_for", "compress", "decompress"]

_GZIP_DEFAULT_LEVEL = 6  # Java's Deflater.DEFAULT_COMPRESSION
_ZSTD_DEFAULT_LEVEL = 3  # zstd's (and Kafka's) default
_LZ4_DEFAULT_LEVEL = 0  # "fast" mode, what the Java client's LZ4 block stream uses

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = 16
_XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")


class Codec(NamedTuple):
    """One compression codec: its id and how to turn a records block into bytes and back."""

    compression: CompressionType
    compress: Callable[[bytes, int | None], bytes]
    decompress: Callable[[Buffer], bytes]


def _no_compress(data: bytes, level: int | None) -> bytes:
    return data


def _no_decompress(data: Buffer) -> bytes:
    return bytes(data)


def _gzip_compress(data: bytes, level: int | None) -> bytes:
    # mtime=0 keeps the output a pure function of the input (reproducible batches and CRCs).
    return gzip.compress(data, _GZIP_DEFAULT_LEVEL if level is None else level, mtime=0)


def _gzip_decompress(data: Buffer) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise CorruptRecordError(f"corrupt gzip records block: {exc}") from exc


def _snappy_compress(data: bytes, level: int | None) -> bytes:
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: Buffer) -> bytes:
    view = memoryview(data)
    try:
        if len(view) < _XERIAL_HEADER_SIZE or view[:8] != _XERIAL_MAGIC:
            return bytes(cramjam.snappy.decompress_raw(view))
        # The version/compatible fields are ignored: some producers write them little-endian.
        out = []
        pos = _XERIAL_HEADER_SIZE
        while pos < len(view):
            if pos + 4 > len(view):
                raise CorruptRecordError("truncated xerial snappy block length")
            (size,) = _INT32.unpack_from(view, pos)
            pos += 4
            if size < 0 or pos + size > len(view):
                raise CorruptRecordError(f"xerial snappy block of {size} bytes overruns the batch")
            out.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + size])))
            pos += size
        return b"".join(out)
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"corrupt snappy records block: {exc}") from exc


def _lz4_compress(data: bytes, level: int | None) -> bytes:
    return bytes(
        lz4.frame.compress(
            data,
            compression_level=_LZ4_DEFAULT_LEVEL if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    )


def _lz4_decompress(data: Buffer) -> bytes:
    try:
        out, used = lz4.frame.decompress(data, return_bytes_read=True)
    except RuntimeError as exc:
        raise CorruptRecordError(f"corrupt lz4 records block: {exc}") from exc
    if used != len(data):
        raise CorruptRecordError(f"{len(data) - used} bytes of junk after the lz4 frame")
    return bytes(out)


def _zstd_compress(data: bytes, level: int | None) -> bytes:
    level = _ZSTD_DEFAULT_LEVEL if level is None else level
    return bytes(zstandard.ZstdCompressor(level=level).compress(data))


def _zstd_decompress(data: Buffer) -> bytes:
    # One decompressobj per frame: it handles frames without a content size and tells us
    # (``eof``) whether the frame was complete, which ZstdDecompressor.decompress does not.
    out = []
    rest = bytes(data)
    try:
        while rest:
            frame = zstandard.ZstdDecompressor().decompressobj()
            out.append(frame.decompress(rest))
            if not frame.eof:
                raise CorruptRecordError("truncated zstd records block")
            rest = frame.unused_data
    except zstandard.ZstdError as exc:
        raise CorruptRecordError(f"corrupt zstd records block: {exc}") from exc
    return b"".join(out)


_CODECS: dict[int, Codec] = {
    codec.compression: codec
    for codec in (
        Codec(CompressionType.NONE, _no_compress, _no_decompress),
        Codec(CompressionType.GZIP, _gzip_compress, _gzip_decompress),
        Codec(CompressionType.SNAPPY, _snappy_compress, _snappy_decompress),
        Codec(CompressionType.LZ4, _lz4_compress, _lz4_decompress),
        Codec(CompressionType.ZSTD, _zstd_compress, _zstd_decompress),
    )
}


def codec_for(compression: int) -> Codec:
    """The codec for an attributes codec id; UnsupportedCompressionTypeError if unknown."""
    codec = _CODECS.get(compression)
    if codec is None:
        raise UnsupportedCompressionTypeError(
            f"unknown compression codec id {compression}; known: none, gzip, snappy, lz4, zstd",
            compression=compression,
        )
    return codec


def compress(compression: int, data: bytes, level: int | None = None) -> bytes:
    """Compress a records block with the codec ``compression`` (``level``: codec default)."""
    return codec_for(compression).compress(data, level)


def decompress(compression: int, data: Buffer) -> bytes:
    """Decompress a records block; CorruptRecordError if the codec cannot read it."""
    return codec_for(compression).decompress(data)
