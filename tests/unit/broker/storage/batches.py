"""Build valid RecordBatch v2 bytes for storage tests: a correct 61-byte header + opaque records.

The storage layer never decodes records, so the "records" here are arbitrary bytes; only the
header fields and the CRC-32C must be right.
"""

from __future__ import annotations

import struct

import crc32c

__all__ = ["HEADER", "make_batch", "make_batches"]

HEADER = struct.Struct(">qiibIhiqqqhii")


def make_batch(
    record_count: int = 1,
    payload: bytes | int = 64,
    *,
    base_offset: int = 0,
    timestamp: int = 1_700_000_000_000,
    max_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    epoch: int = -1,
    attributes: int = 0,
) -> bytes:
    """One batch of ``record_count`` records whose record bytes are ``payload``."""
    body = (
        payload
        if isinstance(payload, bytes)
        else bytes(range(256)) * (payload // 256) + bytes(payload % 256)
    )
    max_ts = timestamp if max_timestamp is None else max_timestamp
    length = 61 - 12 + len(body)
    header = bytearray(
        HEADER.pack(
            base_offset,
            length,
            epoch,
            2,
            0,
            attributes,
            record_count - 1,
            timestamp,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
        )
    )
    crc = crc32c.crc32c(bytes(header[21:]) + body)
    struct.pack_into(">I", header, 17, crc)
    return bytes(header) + body


def make_batches(count: int, record_count: int = 1, payload: bytes | int = 64) -> list[bytes]:
    """``count`` batches with increasing timestamps (one ms apart)."""
    return [
        make_batch(record_count, payload, timestamp=1_700_000_000_000 + i) for i in range(count)
    ]
