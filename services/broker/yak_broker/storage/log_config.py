"""Per-topic log configuration, with Kafka's names and defaults (``LogConfig``).

Topic configs travel as ``{name: string}`` maps (etcd, admin API); ``LogConfig.from_dict``
parses and validates them, raising ``InvalidConfigError`` for an unknown name or a bad value.
Besides Kafka's settings, Yak adds ``flush.mode``: ``async`` (Kafka's behaviour: fsync only as
``flush.messages``/``flush.ms`` say, by default never on the write path) or ``sync`` (an append
is acknowledged only after an fsync covering it; concurrent appends share one fsync).

Immutable value; safe to share between threads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from yak.errors import InvalidConfigError

__all__ = ["LONG_MAX", "CleanupPolicy", "FlushMode", "LogConfig"]

#: Java's Long.MAX_VALUE: Kafka's "never" for flush.messages / flush.ms / max.compaction.lag.ms.
LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1
_DAY_MS = 86_400_000


class CleanupPolicy(StrEnum):
    """``cleanup.policy`` values: delete old segments, compact by key, or both."""

    DELETE = "delete"
    COMPACT = "compact"
    COMPACT_DELETE = "compact,delete"


class FlushMode(StrEnum):
    """``flush.mode``: when an append may be acknowledged relative to fsync."""

    ASYNC = "async"
    SYNC = "sync"


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The storage settings of one topic (Kafka ``LogConfig``, defaults of kafka.md §1.9)."""

    segment_bytes: int = 1_073_741_824
    segment_ms: int = 7 * _DAY_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    cleanup_policy: CleanupPolicy = CleanupPolicy.DELETE
    delete_retention_ms: int = _DAY_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    flush_mode: FlushMode = FlushMode.ASYNC
    max_message_bytes: int = 1024 * 1024 + 12
    producer_id_expiration_ms: int = _DAY_MS

    def __post_init__(self) -> None:
        _at_least("segment.bytes", self.segment_bytes, 14)
        _at_most("segment.bytes", self.segment_bytes, _INT_MAX)
        _at_least("segment.ms", self.segment_ms, 1)
        _at_least("segment.jitter.ms", self.segment_jitter_ms, 0)
        _at_least("segment.index.bytes", self.segment_index_bytes, 12)
        _at_most("segment.index.bytes", self.segment_index_bytes, _INT_MAX)
        _at_least("index.interval.bytes", self.index_interval_bytes, 0)
        _at_least("retention.ms", self.retention_ms, -1)
        _at_least("retention.bytes", self.retention_bytes, -1)
        _at_least("delete.retention.ms", self.delete_retention_ms, 0)
        _at_least("min.compaction.lag.ms", self.min_compaction_lag_ms, 0)
        _at_least("max.compaction.lag.ms", self.max_compaction_lag_ms, 1)
        _at_least("file.delete.delay.ms", self.file_delete_delay_ms, 0)
        _at_least("flush.messages", self.flush_messages, 1)
        _at_least("flush.ms", self.flush_ms, 0)
        _at_least("max.message.bytes", self.max_message_bytes, 0)
        _at_most("max.message.bytes", self.max_message_bytes, _INT_MAX)
        _at_least("producer.id.expiration.ms", self.producer_id_expiration_ms, 1)
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise InvalidConfigError(
                f"min.cleanable.dirty.ratio must be in [0, 1], got {self.min_cleanable_dirty_ratio}"
            )

    @property
    def compact(self) -> bool:
        return self.cleanup_policy in (CleanupPolicy.COMPACT, CleanupPolicy.COMPACT_DELETE)

    @property
    def delete(self) -> bool:
        return self.cleanup_policy in (CleanupPolicy.DELETE, CleanupPolicy.COMPACT_DELETE)

    @property
    def sync(self) -> bool:
        return self.flush_mode is FlushMode.SYNC

    @classmethod
    def from_dict(cls, configs: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Parse Kafka-named string configs over ``base`` (the defaults when omitted)."""
        changes: dict[str, Any] = {}
        for name, raw in configs.items():
            field = _FIELD_BY_NAME.get(name)
            if field is None:
                raise InvalidConfigError(f"unknown topic config {name!r}", config=name)
            changes[field.name] = _parse(name, field.type, str(raw).strip())
        return dataclasses.replace(base or cls(), **changes)

    def to_dict(self) -> dict[str, str]:
        """Every setting as ``{kafka.name: string}``; ``from_dict`` reads it back."""
        return {name: str(getattr(self, field.name)) for name, field in _FIELD_BY_NAME.items()}


def _at_least(name: str, value: int, low: int) -> None:
    if value < low:
        raise InvalidConfigError(f"{name} must be >= {low}, got {value}", config=name)


def _at_most(name: str, value: int, high: int) -> None:
    if value > high:
        raise InvalidConfigError(f"{name} must be <= {high}, got {value}", config=name)


def _parse(name: str, kind: object, raw: str) -> Any:
    try:
        if kind in ("int", int):
            return int(raw)
        if kind in ("float", float):
            return float(raw)
        if kind in ("CleanupPolicy", CleanupPolicy):
            return CleanupPolicy(",".join(sorted(part.strip() for part in raw.split(","))))
        if kind in ("FlushMode", FlushMode):
            return FlushMode(raw.lower())
    except ValueError as exc:
        raise InvalidConfigError(f"invalid value {raw!r} for {name}", config=name) from exc
    raise AssertionError(f"no parser for {name} of type {kind!r}")


_FIELD_BY_NAME: dict[str, dataclasses.Field[Any]] = {
    field.name.replace("_", "."): field for field in dataclasses.fields(LogConfig)
}
