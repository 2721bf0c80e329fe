"""Kafka RecordBatch v2 (magic 2), byte for byte: framing, records, compression.

Modules, one concept each:

* ``batch_header`` — the 61-byte header, framing and CRC checks, offset/epoch patching.
* ``varint`` — Kafka's zig-zag varints.
* ``record`` — the ``Record`` (decoded) and ``RecordInput`` (to encode) value types.
* ``record_encoder`` / ``record_decoder`` — the records section after the header.
* ``compression`` — the codec registry (none, gzip, snappy, lz4, zstd).
* ``batch`` — whole batches: ``encode_batch``, ``decode_batch``, ``decode_batches``.

This package never imports asyncio or any web, HTTP or etcd library (an import-linter
contract checks it): the broker, the rest-proxy and the client SDK all share it.
"""

from yak.record.batch import DecodedBatch, decode_batch, decode_batches, encode_batch, iter_records
from yak.record.batch_header import BatchHeader, CompressionType, TimestampType
from yak.record.record import Header, Headers, Record, RecordInput

__all__ = [
    "BatchHeader",
    "CompressionType",
    "DecodedBatch",
    "Header",
    "Headers",
    "Record",
    "RecordInput",
    "TimestampType",
    "decode_batch",
    "decode_batches",
    "encode_batch",
    "iter_records",
]
