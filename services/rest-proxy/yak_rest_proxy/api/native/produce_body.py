"""The native produce body on the hot path: one ``orjson.loads`` and plain checks, no models.

``ProduceRecordsRequest`` (pydantic) is the documented schema, and parsing a 500-record body
through it, then walking the models again to encode keys and values, was the largest per-record
cost of the proxy's produce path (about 5 µs a record of 1 KiB, against 2 µs here). This reads
the common shape — an object with ``records`` and the three encodings, each record an object of
``key``, ``value``, ``headers``, ``timestamp``, ``partition`` with values of exactly the
expected JSON types — and turns it straight into ``RequestRecords`` stamped ``now_ms``: each
record's body encoded as it will sit in the batch (``encode_record_body``; inline for the
common record without key or headers), and no object made per record.

Anything else (malformed JSON, an unknown field — ``deliver_after_ms`` and ``deliver_at`` among
them —, a ``yak-deliver-at`` header, a string where an integer belongs, an
out-of-range number, an empty list) makes ``fast_outgoing`` return ``None``, and the caller
parses the body with the model: so every error, and every value the model would coerce, is
answered exactly as the schema says, and only well-formed bodies take this path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import orjson

from yak.api.records import INT32_MAX, INT64_MAX, Encoding, HeaderEncoding, encode_data, utf8
from yak.delays import DELIVER_AT_HEADER
from yak.errors import InvalidRequestError
from yak.record import RecordInput
from yak.record.record_encoder import encode_record_body
from yak.record.varint import SMALL_LIMIT, VARINT_OF, encode_varint
from yak_rest_proxy.produce.accumulator import record_size
from yak_rest_proxy.produce.publish import OutgoingRecord, RequestRecords

__all__ = ["fast_outgoing"]

_BODY_FIELDS = frozenset({"records", "key_encoding", "value_encoding", "header_encoding"})
_RECORD_FIELDS = frozenset({"key", "value", "headers", "timestamp", "partition"})
_HEADER_FIELDS = frozenset({"key", "value"})
_ENCODINGS = {e.value: e for e in Encoding}
_HEADER_ENCODINGS = {e.value: e for e in HeaderEncoding}
_EMPTY: tuple[tuple[str, bytes | None], ...] = ()
_NO_HEADERS: list[Any] = []
#: An integer past 64 bits comes out of ``orjson.loads`` as a float, where the model keeps it
#: exact (and refuses it: ``json_bytes``). Written back by ``orjson.dumps`` such a float has an
#: exponent of +18 or more (orjson writes |x| >= 1e16 as ``1.8446744073709552e+19``), so a
#: dumped value with a ``+`` in it (one memchr) is searched for such a float, and one that holds
#: it goes to the model path. Scanning the whole body instead costs more than parsing it: a regex
#: over it (100 MB/s) doubled the proxy's CPU per record in bench-latency; substring searches
#: per value cost 5 us per KiB.
_PLUS = ord("+")
_BIG_FLOAT = re.compile(rb"[0-9]e\+(?:1[89]|[2-9][0-9]|[0-9]{3})")


def _maybe_rounded(dumped: bytes) -> bool:
    """Whether a value dumped from ``orjson.loads``' output may hold an integer it rounded."""
    return _PLUS in dumped and _BIG_FLOAT.search(dumped) is not None


_NULL = b"\x01"  # the varint -1: a null key or value
_ZERO = b"\x00"  # the varint 0: no headers
_NULL_BODY = _NULL + _NULL + _ZERO  # no key, a null value, no headers


def _text(value: Any) -> str:
    """``value`` if it is a string, else "" (found in no table: any JSON value may come)."""
    return value if type(value) is str else ""


def _int_in(value: Any, high: int) -> bool:
    return type(value) is int and 0 <= value <= high


def _headers(given: Any, encoding: HeaderEncoding, where: str) -> tuple[Any, ...] | None:
    """The record's headers as (key, bytes) pairs; None when the shape is not the plain one."""
    if type(given) is not list:
        return None
    headers: list[tuple[str, bytes | None]] = []
    for i, header in enumerate(given):
        if type(header) is not dict or not header.keys() <= _HEADER_FIELDS:
            return None
        key, value = header.get("key"), header.get("value")
        if type(key) is not str or (value is not None and type(value) is not str):
            return None
        if key == DELIVER_AT_HEADER:
            return None  # a delay: the model path checks it against the topic's configs
        at = f"{where}.headers[{i}]"
        utf8(key, f"{at}.key")
        if value is None:
            headers.append((key, None))
        elif encoding is HeaderEncoding.STRING:
            headers.append((key, utf8(value, at)))
        else:
            headers.append((key, encode_data(value, Encoding.BASE64, at)))
    return tuple(headers)


def fast_outgoing(body: bytes, now_ms: int) -> Sequence[OutgoingRecord] | None:
    """The body's records ready to publish (``RequestRecords``), or None: parse it with the
    model (see above).

    Data the encodings refuse (a non-string key with ``key_encoding`` string, bad base64, a
    lone surrogate) also returns None: the model path reports it, after any shape error of a
    later record, as it always has."""
    try:
        data = orjson.loads(body)
        return _outgoing(data, now_ms)
    except (ValueError, TypeError, InvalidRequestError):  # JSONDecodeError is a ValueError
        return None  # and a shape this path did not foresee is the model's to judge


def _outgoing(data: Any, now_ms: int) -> RequestRecords | None:
    if type(data) is not dict or not data.keys() <= _BODY_FIELDS:
        return None
    items = data.get("records")
    key_encoding = _ENCODINGS.get(_text(data.get("key_encoding", "string")))
    value_encoding = _ENCODINGS.get(_text(data.get("value_encoding", "json")))
    header_encoding = _HEADER_ENCODINGS.get(_text(data.get("header_encoding", "string")))
    if type(items) is not list or not items:
        return None
    if key_encoding is None or value_encoding is None or header_encoding is None:
        return None
    value_json = value_encoding is Encoding.JSON
    dumps = orjson.dumps  # the common encoding inline: no per-record call, no error context
    join = b"".join
    varint_of, small = VARINT_OF, SMALL_LIMIT
    bodies: list[bytes] = []
    sizes: list[int] = []
    add_body, add_size = bodies.append, sizes.append
    # Made at the first record that is not a value alone (until then: no key, now, none).
    keys: list[bytes | None] | None = None
    stamps: list[int] | None = None
    partitions: list[int | None] | None = None
    for index, item in enumerate(items):
        if type(item) is not dict:
            return None
        if len(item) == 1 and "value" in item:  # the commonest shape: a value alone
            value: Any = item["value"]
            if value is None:
                add_body(_NULL_BODY)
                add_size(24)  # record_size
            else:
                # A value an encoding refuses raises (JSONEncodeError, InvalidRequestError):
                # the caller answers None and the model path names the record and field.
                value = dumps(value) if value_json else encode_data(value, value_encoding, "value")
                if value_json and _maybe_rounded(value):
                    return None
                n = len(value)
                add_body(
                    join((_NULL, varint_of[n] if n < small else encode_varint(n), value, _ZERO))
                )
                add_size(24 + n)
            if keys is not None:
                keys.append(None)
                stamps.append(now_ms)  # type: ignore[union-attr]  # made together
                partitions.append(None)  # type: ignore[union-attr]
            continue
        found = _record(item, index, now_ms, key_encoding, value_encoding, header_encoding)
        if found is None:
            return None
        if keys is None:
            keys, stamps, partitions = [None] * index, [now_ms] * index, [None] * index
        key, value, headers, stamp, partition = found
        add_body(encode_record_body(key, value, headers))
        add_size(record_size(RecordInput(key, value, headers)))
        keys.append(key)
        stamps.append(stamp)  # type: ignore[union-attr]  # made together
        partitions.append(partition)  # type: ignore[union-attr]
    count = len(bodies)
    if keys is None or stamps is None:
        return RequestRecords([None] * count, bodies, [now_ms] * count, sizes)
    if not any(p is not None for p in partitions or ()):
        partitions = None
    return RequestRecords(keys, bodies, stamps, sizes, partitions)


def _record(
    item: dict[str, Any],
    index: int,
    now_ms: int,
    key_encoding: Encoding,
    value_encoding: Encoding,
    header_encoding: HeaderEncoding,
) -> tuple[bytes | None, bytes | None, tuple[Any, ...], int, int | None] | None:
    """Key, value, headers, timestamp and partition of a record with any of the fields; None
    when it is not of the plain shape (the encodings raise as in ``_outgoing``)."""
    if not item.keys() <= _RECORD_FIELDS:
        return None
    stamp = item.get("timestamp")
    if stamp is None:
        stamp = now_ms
    elif not _int_in(stamp, INT64_MAX):
        return None
    partition = item.get("partition")
    if partition is not None and not _int_in(partition, INT32_MAX):
        return None
    given = item.get("headers", _NO_HEADERS)
    headers = _headers(given, header_encoding, f"records[{index}]") if given else _EMPTY
    if headers is None or type(given) is not list:
        return None
    key, value = item.get("key"), item.get("value")
    if key is not None:
        key = (
            orjson.dumps(key)
            if key_encoding is Encoding.JSON
            else encode_data(key, key_encoding, "key")
        )
    if value is not None:
        value = (
            orjson.dumps(value)
            if value_encoding is Encoding.JSON
            else encode_data(value, value_encoding, "value")
        )
    for data in (key, value) if Encoding.JSON in (key_encoding, value_encoding) else ():
        if data is not None and _maybe_rounded(data):
            return None
    return key, value, headers, stamp, partition
