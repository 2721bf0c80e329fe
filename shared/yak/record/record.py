"""The record value types: ``Record`` (decoded, with its offset) and ``RecordInput`` (to encode).

One record inside a RecordBatch v2 is laid out as (``DefaultRecord`` in Kafka; varints are
zig-zag, see ``yak.record.varint``)::

    length          varint   bytes of everything after this field
    attributes      int8     one raw byte, unused (always 0)
    timestampDelta  varlong  timestamp - batch baseTimestamp
    offsetDelta     varint   offset - batch baseOffset
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value (a tombstone)
    value           bytes
    headersCount    varint
    headers         headersCount x (keyLength varint, key UTF-8, valueLength varint
                                    (-1 = null), value bytes)

Invariants: offset deltas strictly increase within a batch and none exceeds the batch's
lastOffsetDelta (gaps are legal: compaction keeps original offsets); header keys are never
null, header values may be. Both types are immutable NamedTuples — cheap to build in the hot
decode loop and safe to share between threads.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Header", "Headers", "Record", "RecordInput"]

#: One record header: a UTF-8 key and nullable bytes.
Header = tuple[str, bytes | None]
#: A record's headers, in wire order (keys may repeat, as in Kafka).
Headers = tuple[Header, ...]


class Record(NamedTuple):
    """A record decoded from a batch.

    ``offset`` is absolute (baseOffset + offsetDelta). ``timestamp`` is in milliseconds since the
    epoch: the producer's create time, or the batch's maxTimestamp when the batch uses
    LogAppendTime (as Kafka's consumers report it).
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


class RecordInput(NamedTuple):
    """A record to encode into a batch.

    ``timestamp`` in milliseconds since the epoch; ``None`` means "now" (one clock read per
    batch). ``offset_delta`` pins the record's offset relative to the batch's base offset;
    ``None`` means "previous record's delta + 1" (0 for the first record). Explicit deltas let
    compaction re-encode surviving records with their original offsets, gaps included.
    """

    key: bytes | None = None
    value: bytes | None = None
    headers: Headers = ()
    timestamp: int | None = None
    offset_delta: int | None = None
