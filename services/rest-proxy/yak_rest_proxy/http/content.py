"""Content negotiation of the Confluent v2 dialect: which embedded format a body uses, which
media type an answer may have.

Media types (Confluent's ``application/vnd.kafka[.embedded][.version]+json``):

=========================================  ===========================================
``application/vnd.kafka.binary.v2+json``   keys and values are base64 strings
``application/vnd.kafka.json.v2+json``     keys and values are JSON, embedded as they are
``application/vnd.kafka.v2+json``          no embedded data (metadata, consumer calls);
                                           binary when a produce body names no format
``application/vnd.kafka+json``             the same without a version
``application/json``                       accepted everywhere; a produce body in it
                                           embeds JSON (Yak's choice, documented)
``application/octet-stream``               Confluent's fallback: binary
(no Content-Type)                          JSON, as Karapace assumes
=========================================  ===========================================

``application/vnd.kafka.{avro,jsonschema,protobuf}.v2+json`` are the schema formats: keys and
values are JSON, written in the schema registry's wire format (``schemas``); a proxy without a
registry refuses them where they are used (415 / 41501). Only version v2 is served (v1 was removed
from Confluent's proxy in 6.0; v3 is another API). ``Accept`` is matched with its q-values
(``q=0`` excludes); a missing Accept accepts anything.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import NamedTuple

from yak.errors import NotAcceptableError, UnsupportedMediaTypeError

__all__ = [
    "EmbeddedFormat",
    "MediaRange",
    "negotiate",
    "parse_accept",
    "request_format",
]

_VND = re.compile(r"application/vnd\.kafka(?:\.(?P<fmt>[a-z]+))?(?:\.(?P<ver>v\d+))?\+json")


class EmbeddedFormat(StrEnum):
    """How keys and values are embedded in JSON bodies."""

    BINARY = "binary"
    JSON = "json"
    AVRO = "avro"
    JSONSCHEMA = "jsonschema"
    PROTOBUF = "protobuf"

    @property
    def schema_based(self) -> bool:
        """Needs a schema registry (avro, jsonschema, protobuf)."""
        return self not in (EmbeddedFormat.BINARY, EmbeddedFormat.JSON)


class MediaRange(NamedTuple):
    """One entry of an Accept header."""

    media_type: str
    quality: float


def _essence(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def request_format(content_type: str | None) -> EmbeddedFormat:
    """The embedded format a request body declares; 415 for anything else."""
    if content_type is None or not content_type.strip():
        return EmbeddedFormat.JSON
    essence = _essence(content_type)
    if essence == "application/json":
        return EmbeddedFormat.JSON
    if essence == "application/octet-stream":
        return EmbeddedFormat.BINARY
    match = _VND.fullmatch(essence)
    if match is None:
        raise UnsupportedMediaTypeError(
            f"Content-Type {content_type!r} is not supported; use "
            "application/vnd.kafka.json.v2+json, application/vnd.kafka.binary.v2+json, "
            "application/vnd.kafka.v2+json or application/json"
        )
    version, fmt = match["ver"], match["fmt"]
    if version not in (None, "v2"):
        raise UnsupportedMediaTypeError(f"API version {version} is not served; use v2")
    if fmt is None or fmt == "binary":
        return EmbeddedFormat.BINARY
    try:
        return EmbeddedFormat(fmt)
    except ValueError:
        raise UnsupportedMediaTypeError(
            f"unknown embedded format {fmt!r}; use binary, json, avro, jsonschema or protobuf"
        ) from None


def parse_accept(accept: str | None) -> list[MediaRange]:
    """The ranges of an Accept header, best first (a missing header accepts anything)."""
    if accept is None or not accept.strip():
        return [MediaRange("*/*", 1.0)]
    ranges = []
    for part in accept.split(","):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        quality = 1.0
        for param in pieces[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        ranges.append(MediaRange(pieces[0].lower(), quality))
    ranges.sort(key=lambda r: -r.quality)
    return ranges


def _matches(media_range: str, embedded: EmbeddedFormat | None) -> str | None:
    """The media type to answer with if ``media_range`` allows it, else None."""
    generic = "application/vnd.kafka.v2+json"
    wanted = generic if embedded is None else f"application/vnd.kafka.{embedded}.v2+json"
    if media_range in ("*/*", "application/*"):
        return wanted
    if media_range == "application/json":
        return "application/json"
    match = _VND.fullmatch(media_range)
    if match is None or match["ver"] not in (None, "v2"):
        return None
    fmt = match["fmt"]
    if embedded is None:
        return wanted if fmt is None else None
    if fmt == embedded.value:
        return wanted
    return None


def negotiate(accept: str | None, embedded: EmbeddedFormat | None = None) -> str:
    """The media type of the answer, given the request's Accept header.

    ``embedded``: the format of the records in the answer (a consumer's records), or None for
    answers without embedded data. Raises ``NotAcceptableError`` (406) when nothing matches;
    for records of another format than the consumer's its details say so (Confluent's 40601).
    """
    ranges = parse_accept(accept)
    for media_range in ranges:
        if media_range.quality <= 0:
            continue
        chosen = _matches(media_range.media_type, embedded)
        if chosen is not None:
            return chosen
    if embedded is not None and any(_VND.fullmatch(r.media_type) for r in ranges):
        raise NotAcceptableError(
            f"the consumer's format is {embedded.value}; the Accept header "
            f"{accept!r} asks for another (use application/vnd.kafka.{embedded.value}.v2+json)",
            reason="consumer_format",
        )
    raise NotAcceptableError(
        f"cannot answer in any type the Accept header {accept!r} allows; "
        "use application/vnd.kafka.v2+json or application/json"
    )
