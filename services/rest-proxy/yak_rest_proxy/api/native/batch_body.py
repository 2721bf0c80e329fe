"""The binary form of an idempotent batch: the client builds the record batch, the proxy checks it
and forwards its bytes unchanged.

``POST /api/v1/topics/{t}/partitions/{p}/batches`` with ``Content-Type:
application/vnd.yak.recordbatch.v2`` (``RECORD_BATCH_MEDIA_TYPE``) carries exactly one Kafka
RecordBatch v2 (magic 2; byte layout in ``yak.record.batch_header``), as Kafka's producer puts
one in a Produce request and as ``yak.record.encode_batch`` writes it. The proxy never re-encodes
it: what the client sent is what the leader appends (it patches only baseOffset and
partitionLeaderEpoch, which lie outside the CRC).

Checks, in this order, each raising the typed error named (statuses in docs/rest-api.md):

* the body holds at least the 61-byte header, and its ``batchLength`` accounts for every byte
  of the body, no more, no less (one batch) — ``CorruptRecordError``;
* magic 2 — ``CorruptRecordError``;
* the batch fits the topic's ``max.message.bytes`` — ``MessageTooLargeError``;
* at least one record and at most ``max_records`` (``YAK_MAX_RECORDS_PER_REQUEST``) —
  ``InvalidRecordError`` / ``TooManyRecordsError``; ``lastOffsetDelta`` is ``recordCount - 1``
  (a client's records are numbered 0, 1, 2 ..., so the answer's offsets are base + i);
* attributes: a known codec (``UnsupportedCompressionTypeError``), CreateTime, neither
  transactional nor control nor any other bit set (``InvalidRecordError``);
* an idempotent identity: producer id, epoch and base sequence all set — a batch without one
  (producer id -1) is refused (``InvalidRecordError``): the proxy resends a batch after a
  retriable failure, which only the broker's duplicate detection makes safe;
* the CRC-32C over attributes..end — ``CorruptRecordError``;
* the records decode (``yak.record.decode_batch``: lengths, varints, offset deltas, header keys
  as UTF-8; a compressed section is decompressed first) — ``CorruptRecordError`` /
  ``InvalidRecordError``. The brokers check framing and CRC only, so a well-framed batch of
  undecodable records would otherwise be stored and fail every read of its partition;
* with the topic's delay settings: each record's ``yak-deliver-at`` header
  (``yak.delays.check_delay_headers``) — ``InvalidDelayError`` / ``DelaysNotEnabledError``.

Pure functions over bytes; safe from any thread.
"""

from __future__ import annotations

from yak.api.records import RECORD_BATCH_MEDIA_TYPE
from yak.delays import DelaySettings, check_delay_headers
from yak.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
    UnsupportedMediaTypeError,
)
from yak.record import BatchHeader, CompressionType, decode_batch
from yak.record.batch_header import (
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    compute_crc,
    parse_header,
)
from yak_rest_proxy.produce.publish import check_record_count

__all__ = ["RECORD_BATCH_MEDIA_TYPE", "check_batch", "is_record_batch"]

_VENDOR_PREFIX = RECORD_BATCH_MEDIA_TYPE.rsplit(".", 1)[0] + "."  # application/vnd.yak.recordbatch.
_CODEC_MASK = 0x07
_MAX_CODEC = int(max(CompressionType))


def is_record_batch(content_type: str | None) -> bool:
    """Whether a batches body is the binary form (else it is the JSON one).

    415 ``UNSUPPORTED_MEDIA_TYPE`` for another version of the binary form and for
    ``application/octet-stream`` (bytes of no stated format); anything else stays JSON, as
    before the binary form existed.
    """
    if content_type is None:
        return False
    essence = content_type.split(";", 1)[0].strip().lower()
    if essence == RECORD_BATCH_MEDIA_TYPE:
        return True
    if essence.startswith(_VENDOR_PREFIX) or essence == "application/octet-stream":
        raise UnsupportedMediaTypeError(
            f"Content-Type {content_type!r} is not served here; send one record batch as "
            f"{RECORD_BATCH_MEDIA_TYPE} (format v2, magic 2) or a JSON body as application/json"
        )
    return False


def check_batch(
    body: bytes,
    *,
    topic: str,
    max_message_bytes: int,
    max_records: int,
    delays: DelaySettings | None = None,
    now_ms: int = 0,
) -> BatchHeader:
    """The header of the one batch ``body`` holds, once every check above passed (with
    ``delays``: the topic's, also the records' ``yak-deliver-at`` headers at ``now_ms``)."""
    if len(body) < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"the body holds {len(body)} bytes; a record batch header alone takes "
            f"{RECORD_BATCH_OVERHEAD}"
        )
    header = parse_header(body)
    if header.size != len(body):
        raise CorruptRecordError(
            f"batchLength {header.batch_length} makes a {header.size:,}-byte batch, but the body "
            f"holds {len(body):,} bytes: send exactly one record batch"
        )
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(
            f"the batch has magic {header.magic}; only record batch format v2 (magic 2) is taken"
        )
    if header.size > max_message_bytes:
        raise MessageTooLargeError(
            f"the batch is {header.size:,} bytes; topic {topic!r} accepts at most "
            f"{max_message_bytes:,} (max.message.bytes)",
            topic=topic,
        )
    count = header.record_count
    if count < 1:
        raise InvalidRecordError(f"the batch holds {count} records; a batch needs at least one")
    check_record_count(count, max_records)
    if header.last_offset_delta != count - 1:
        raise InvalidRecordError(
            f"the batch holds {count} records but its lastOffsetDelta is "
            f"{header.last_offset_delta}; a producer's batch numbers its records 0 to {count - 1}"
        )
    _check_attributes(header.attributes)
    if header.producer_id < 0 or header.producer_epoch < 0 or header.base_sequence < 0:
        raise InvalidRecordError(
            f"the batch is not idempotent (producer id {header.producer_id}, epoch "
            f"{header.producer_epoch}, base sequence {header.base_sequence}): this route takes "
            "batches stamped with a session of POST /api/v1/producers"
        )
    actual = compute_crc(body, 0, header.size)
    if actual != header.crc:
        raise CorruptRecordError(
            f"CRC-32C mismatch: the batch stores {header.crc:#010x}, its bytes give {actual:#010x}"
        )
    decoded = decode_batch(body, verify_crc=False)  # checked just above
    if delays is not None:
        for record in decoded.records:
            check_delay_headers(record.headers, now_ms, delays)
    return header


def _check_attributes(attributes: int) -> None:
    codec = attributes & _CODEC_MASK
    if codec > _MAX_CODEC:
        raise UnsupportedCompressionTypeError(
            f"the batch names codec {codec}; known: "
            + ", ".join(f"{c.value} ({c.name.lower()})" for c in CompressionType)
        )
    if attributes & ~_CODEC_MASK:
        raise InvalidRecordError(
            f"the batch has attributes {attributes:#06x}: a producer's batch sets only the codec "
            "(bits 0-2); CreateTime, not transactional, not control"
        )
