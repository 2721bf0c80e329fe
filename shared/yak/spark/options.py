"""The ``yak`` data source's options, parsed into frozen dataclasses (pure: no Spark, no I/O).

Spark hands a data source its options case-insensitively (``DataSource.options`` lowercases
the keys), so every name is matched without case: ``startingOffsets`` and ``startingoffsets``
are one option. A bad value raises ``OptionError`` naming the option and what it accepts.

Offsets follow Spark's Kafka source: ``earliest``, ``latest`` or JSON
``{"topic": {"0": 23, "1": -2}}`` where -2 means earliest and -1 latest. Partitions a JSON spec
does not name take the option's default (earliest for starting, latest for ending offsets).

``filter`` (docs/filters.md) is checked here, when the query is defined (a bad one raises
``OptionError`` with the parser's position), and sent with every read: the proxy returns only
the records it lets through, and offsets still advance past the others.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from yak.errors import InvalidFilterError
from yak.filters import compile_filter

__all__ = [
    "EARLIEST",
    "LATEST",
    "Assign",
    "Compression",
    "OffsetSpec",
    "OptionError",
    "ReadOptions",
    "Subscribe",
    "SubscribePattern",
    "Subscription",
    "WriteOptions",
    "parse_read_options",
    "parse_write_options",
]

#: Sentinel offsets of a JSON offset spec, as in Spark's Kafka source.
EARLIEST = -2
LATEST = -1
Compression = Literal["none", "gzip", "snappy", "lz4", "zstd"]
_COMPRESSIONS: tuple[Compression, ...] = ("none", "gzip", "snappy", "lz4", "zstd")


class OptionError(ValueError):
    """A ``yak`` data source option is missing, unknown in this mode, or has a bad value."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"yak data source option {option!r}: {message}")
        self.option = option


@dataclass(frozen=True, slots=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubscribePattern:
    #: Matched against whole topic names (``re.fullmatch``), as Kafka does.
    pattern: str


@dataclass(frozen=True, slots=True)
class Assign:
    #: (topic, partitions) pairs, topics sorted.
    partitions: tuple[tuple[str, tuple[int, ...]], ...]


Subscription = Subscribe | SubscribePattern | Assign


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where to start or end: ``earliest``, ``latest``, or per partition (``specific``)."""

    default: Literal["earliest", "latest"]
    #: Per (topic, partition): an offset, or ``EARLIEST`` / ``LATEST``.
    specific: tuple[tuple[str, int, int], ...] = ()

    def for_partition(self, topic: str, partition: int) -> int:
        """The offset asked for one partition: a number, ``EARLIEST`` or ``LATEST``."""
        for t, p, offset in self.specific:
            if t == topic and p == partition:
                return offset
        return EARLIEST if self.default == "earliest" else LATEST


@dataclass(frozen=True, slots=True)
class ReadOptions:
    urls: tuple[str, ...]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    #: ms since the epoch; overrides ``starting`` when set.
    starting_timestamp: int | None
    max_records_per_partition: int | None
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    fetch_max_bytes: int
    request_timeout_s: float
    #: A record filter the proxy applies to every read (None: every record).
    filter: str | None = None


@dataclass(frozen=True, slots=True)
class WriteOptions:
    urls: tuple[str, ...]
    #: The topic of rows without a ``topic`` column (or with a null one).
    topic: str | None
    max_records_per_batch: int
    max_bytes_per_batch: int
    compression: Compression
    request_timeout_s: float


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def _urls(opts: Mapping[str, str]) -> tuple[str, ...]:
    raw = opts.get("url", "")
    urls = tuple(u.strip().rstrip("/") for u in raw.split(",") if u.strip())
    if not urls:
        raise OptionError("url", "required: the rest-proxy URL(s), comma separated")
    for url in urls:
        if not re.match(r"^https?://[^/\s]+", url):
            raise OptionError("url", f"{url!r} is not an http:// or https:// URL")
    return urls


def _int(opts: Mapping[str, str], name: str, default: int | None, minimum: int = 1) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(name, f"{raw!r} is not an integer") from None
    if value < minimum:
        raise OptionError(name, f"must be >= {minimum}, not {value}")
    return value


def _required_int(opts: Mapping[str, str], name: str, default: int, minimum: int = 1) -> int:
    value = _int(opts, name, default, minimum)
    assert value is not None  # a default was given
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise OptionError(name, f"{raw!r} is not true or false")


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [n for n in ("subscribe", "subscribePattern", "assign") if n.lower() in opts]
    if len(given) != 1:
        raise OptionError(
            "subscribe",
            "give exactly one of subscribe, subscribePattern, assign"
            + (f" (got {', '.join(given)})" if given else ""),
        )
    (name,) = given
    raw = opts[name.lower()]
    if name == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError(name, "a comma list of at least one topic")
        return Subscribe(topics)
    if name == "subscribePattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(name, f"not a regular expression: {exc}") from None
        return SubscribePattern(raw)
    doc = _json_object(name, raw)
    assigned = []
    for topic, partitions in sorted(doc.items()):
        if not isinstance(partitions, list) or not partitions:
            raise OptionError(name, f"topic {topic!r}: a non-empty list of partitions")
        if not all(type(p) is int and p >= 0 for p in partitions):
            raise OptionError(name, f"topic {topic!r}: partitions are integers >= 0")
        assigned.append((topic, tuple(sorted(set(partitions)))))
    if not assigned:
        raise OptionError(name, 'JSON like {"topic": [0, 1]} naming at least one partition')
    return Assign(tuple(assigned))


def _json_object(name: str, raw: str) -> dict[str, object]:
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(name, f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise OptionError(name, "a JSON object keyed by topic")
    return doc


def _offsets(
    opts: Mapping[str, str], name: str, default: Literal["earliest", "latest"]
) -> OffsetSpec:
    raw = opts.get(name.lower())
    if raw is None:
        return OffsetSpec(default)
    word = raw.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetSpec("earliest" if word == "earliest" else "latest")
    doc = _json_object(name, raw)
    specific = []
    for topic, per_partition in sorted(doc.items()):
        if not isinstance(per_partition, dict):
            raise OptionError(name, f'topic {topic!r}: an object like {{"0": 23}}')
        for key, offset in per_partition.items():
            if not str(key).isdigit():
                raise OptionError(name, f"topic {topic!r}: {key!r} is not a partition number")
            if type(offset) is not int or offset < EARLIEST:
                raise OptionError(
                    name, f"{topic}-{key}: an offset >= 0, -2 (earliest) or -1 (latest)"
                )
            specific.append((topic, int(key), offset))
    return OffsetSpec(default, tuple(sorted(specific)))


def _filter(opts: Mapping[str, str]) -> str | None:
    text = opts.get("filter")
    if text is None:
        return None
    try:
        compile_filter(text)
    except InvalidFilterError as exc:
        raise OptionError("filter", exc.message) from None
    return text


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """The options of ``spark.read`` (``streaming=False``) or ``spark.readStream``."""
    opts = _lower(options)
    if streaming and "endingoffsets" in opts:
        raise OptionError("endingOffsets", "not supported by streaming queries")
    if not streaming and "maxoffsetspertrigger" in opts:
        raise OptionError("maxOffsetsPerTrigger", "only for streaming queries (readStream)")
    starting_timestamp = _int(opts, "startingTimestamp", None, minimum=0)
    if starting_timestamp is not None and "startingoffsets" in opts:
        raise OptionError("startingTimestamp", "give either it or startingOffsets, not both")
    starting = _offsets(opts, "startingOffsets", "latest" if streaming else "earliest")
    ending = _offsets(opts, "endingOffsets", "latest")
    if any(offset == LATEST for *_, offset in starting.specific) and not streaming:
        raise OptionError("startingOffsets", "-1 (latest) is not a starting offset of a batch")
    if any(offset == EARLIEST for *_, offset in ending.specific) or ending.default == "earliest":
        raise OptionError("endingOffsets", "earliest (-2) is not an ending offset")
    return ReadOptions(
        urls=_urls(opts),
        subscription=_subscription(opts),
        starting=starting,
        ending=ending,
        starting_timestamp=starting_timestamp,
        max_records_per_partition=_int(opts, "maxRecordsPerPartition", None),
        min_partitions=_int(opts, "minPartitions", None),
        max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger", None),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        fetch_max_bytes=_required_int(opts, "fetchMaxBytes", 4 * 1024 * 1024),
        request_timeout_s=_required_int(opts, "requestTimeoutMs", 30_000) / 1000,
        filter=_filter(opts),
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """The options of ``df.write`` and ``df.writeStream``."""
    opts = _lower(options)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("topic", "an empty topic name")
    raw_compression = opts.get("compression", "none").strip().lower()
    compression = next((c for c in _COMPRESSIONS if c == raw_compression), None)
    if compression is None:
        raise OptionError("compression", f"{raw_compression!r} is not one of {_COMPRESSIONS}")
    return WriteOptions(
        urls=_urls(opts),
        topic=None if topic is None else topic.strip(),
        max_records_per_batch=_required_int(opts, "maxRecordsPerBatch", 1000),
        max_bytes_per_batch=_required_int(opts, "maxBytesPerBatch", 1024 * 1024),
        compression=compression,
        request_timeout_s=_required_int(opts, "requestTimeoutMs", 30_000) / 1000,
    )
