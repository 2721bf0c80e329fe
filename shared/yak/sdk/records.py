"""Value types of the client SDK: topic-partitions, produced record metadata, consumed records.

Keys, values and header values are ``bytes`` (``None`` for a null key or value). The SDK's
idempotent producer sends them inside a Kafka record batch (``yak.sdk.sender``), and its
consumer reads them from the record batches of a binary poll (``fetched_records``); plain
records and partition reads travel base64-encoded in JSON (``yak.api.records``), so any bytes
survive the round trip; ``as_bytes`` turns the ``str`` a caller may pass into its UTF-8 bytes.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from yak.api.fetch_answer import FetchedBatches
from yak.api.records import ConsumedRecord, ProduceRecord, RecordHeader
from yak.record import decode_batches
from yak.types import TopicPartition

__all__ = [
    "ConsumerRecord",
    "Data",
    "Headers",
    "RecordMetadata",
    "TopicPartition",
    "as_bytes",
    "consumer_record",
    "fetched_records",
    "header_list",
    "produce_record",
]

#: What a key, value or header value may be given as (``str`` is sent as UTF-8).
Data = bytes | bytearray | memoryview | str
#: Record headers: (key, value) pairs in order (keys may repeat), or a mapping.
Headers = Iterable[tuple[str, Data | None]] | Mapping[str, Data | None]


class RecordMetadata(NamedTuple):
    """Where a produced record landed (``offset`` -1 when sent with acks=0)."""

    topic: str
    partition: int
    offset: int
    #: Create time in ms since the epoch.
    timestamp: int


class ConsumerRecord(NamedTuple):
    """One record read from a partition."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def as_bytes(data: Data | None) -> bytes | None:
    """``data`` as bytes: ``str`` as UTF-8, ``None`` stays ``None``."""
    if data is None:
        return None
    if isinstance(data, str):
        return data.encode()
    return bytes(data)


def header_list(headers: Headers | None) -> tuple[tuple[str, bytes | None], ...]:
    """Headers as a tuple of (key, bytes) pairs, in the order given."""
    if headers is None:
        return ()
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return tuple((str(k), as_bytes(v)) for k, v in pairs)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: object) -> bytes | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"expected base64 text, got {type(text).__name__}")
    return base64.b64decode(text)


def produce_record(
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...],
    timestamp: int | None,
    partition: int | None = None,
) -> ProduceRecord:
    """A record as the native API takes it with base64 key, value and header encodings."""
    return ProduceRecord(
        key=_b64(key),
        value=_b64(value),
        headers=[RecordHeader(key=k, value=_b64(v)) for k, v in headers],
        timestamp=timestamp,
        partition=partition,
    )


def consumer_record(record: ConsumedRecord) -> ConsumerRecord:
    """A record read with base64 key, value and header encodings, as bytes."""
    return ConsumerRecord(
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        timestamp=record.timestamp,
        key=_unb64(record.key),
        value=_unb64(record.value),
        headers=tuple((h.key, _unb64(h.value)) for h in record.headers),
    )


_new = tuple.__new__  # a ConsumerRecord without NamedTuple.__new__'s Python-level frame


def fetched_records(partitions: Iterable[FetchedBatches]) -> list[ConsumerRecord]:
    """The records of a binary poll's batches, from each partition's fetch offset on (the
    records below it in its first batch are skipped, as Kafka's consumers skip them). Every
    batch's framing and CRC-32C are checked (``CorruptRecordError``, never a wrong record)."""
    records: list[ConsumerRecord] = []
    for fetched in partitions:
        head = (fetched.topic, fetched.partition)
        data = bytes(fetched.batches)  # decoded in place: one copy per partition
        for batch in decode_batches(data, from_offset=fetched.fetch_offset):
            records += [_new(ConsumerRecord, head + record) for record in batch.records]
    return records
