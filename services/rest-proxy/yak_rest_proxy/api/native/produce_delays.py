"""Delayed delivery on the native produce routes: the ``yak-deliver-at`` header, checked.

docs/decisions.md, "Delayed and scheduled delivery"; the header and its rules: ``yak.delays``.

A native produce body asks for a delay per record (``deliver_after_ms`` or ``deliver_at``) or
for the whole request (the same two fields on the body: the default of the records that give
neither). ``record_headers`` turns the record's choice into the header, after
``yak.delays.resolve_delay`` (from the proxy's clock, at receipt), and checks a header the
client wrote itself with ``yak.delays.check_delay_headers``. A record may not do both. Every
error is raised before anything is sent (400 ``INVALID_DELAY``, ``DELAYS_NOT_ENABLED`` for a
topic without ``delayed.delivery.enable=true``), so a refused request writes nothing.

``deliver_at`` is epoch milliseconds or an RFC 3339 time with its zone (pydantic gives a
``datetime``); a time without a zone is refused, as it names no instant.

The hot path does not come here: ``produce_body.fast_outgoing`` hands a body with a delay field
or a ``yak-deliver-at`` header to the model path, so records without delays pay nothing. The
binary batches route checks its decoded records' headers (``batch_body.check_batch``).

Pure functions; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from yak.delays import (
    DELIVER_AT_HEADER,
    DelaySettings,
    check_delay_headers,
    delay_header,
    resolve_delay,
)
from yak.errors import DelaysNotEnabledError, InvalidDelayError
from yak.record.record import Header, Headers
from yak.topic_config import DELAYED_DELIVERY_ENABLE

__all__ = ["DeliverAt", "check_headers", "deliver_at_ms", "record_headers"]

#: A ``deliver_at`` as the API models give it.
DeliverAt = int | datetime | None


def deliver_at_ms(value: DeliverAt, where: str) -> int | None:
    """``deliver_at`` in epoch milliseconds (``None``: not given)."""
    if value is None or isinstance(value, int):
        return value
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidDelayError(
            f"{where}.deliver_at {value.isoformat()!r} has no time zone; give one "
            "(e.g. 2026-01-01T09:00:00Z) or epoch milliseconds",
            field=f"{where}.deliver_at",
        )
    return int(value.timestamp() * 1000)


def record_headers(
    headers: Headers,
    after_ms: int | None,
    at: DeliverAt,
    now_ms: int,
    settings: DelaySettings,
    where: str,
) -> Headers:
    """The record's headers with its delay as the ``yak-deliver-at`` header (unchanged when it
    asks for none); raises InvalidDelayError or DelaysNotEnabledError."""
    at_ms = deliver_at_ms(at, where)
    if after_ms is None and at_ms is None:
        check_delay_headers(headers, now_ms, settings)
        return headers
    if not settings.enabled:
        raise DelaysNotEnabledError(
            f"{where} asks for a delay, but this topic does not allow delayed delivery; set "
            f"{DELAYED_DELIVERY_ENABLE}=true on it first",
            field=where,
        )
    if any(key == DELIVER_AT_HEADER for key, _ in headers):
        raise InvalidDelayError(
            f"{where} gives both a delay field and a {DELIVER_AT_HEADER} header; give one",
            field=where,
        )
    due = resolve_delay(after_ms, at_ms, now_ms, settings.max_delay_ms)
    if due is None:  # pragma: no cover - resolve_delay answers a time when one was given
        return headers
    extra: Header = delay_header(due)
    return (*headers, extra)


def check_headers(records: Iterable[Headers], now_ms: int, settings: DelaySettings) -> None:
    """Check the ``yak-deliver-at`` headers clients wrote into their own records."""
    for headers in records:
        check_delay_headers(headers, now_ms, settings)
