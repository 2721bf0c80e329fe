"""Share groups' admin rules: what a share group's settings may be, and the state topic's shape.

Pure functions over values (a ``ClusterSnapshot``, a ``ShareGroupRecord``, ``now_ms``); the
driver is ``share_group_admin``. Every refusal is a typed error with a documented code:

- a bad group name: 400 ``INVALID_GROUP_ID`` (``yak.names``: Kafka's rule for names);
- ``max_delivery_attempts`` outside 1-100 or ``lock_duration_ms`` outside 1 s-1 h: 400
  ``INVALID_CONFIG``, the details name the setting, the value and both bounds (the same bounds
  as ``ShareGroupRecord``, Kafka's ``group.share.delivery.attempt.limit`` and
  ``group.share.record.lock.duration.ms`` ranges narrowed to what a queue needs);
- a dead-letter topic with an illegal name or under the reserved ``__yak_`` prefix (the share
  state topic above all): 400 ``INVALID_TOPIC_EXCEPTION``; one that does not exist or is being
  deleted: 404 ``UNKNOWN_TOPIC_OR_PARTITION``.

Topic names starting with ``__yak_`` are Yak's internal topics: only the coordinator creates
them (``check_user_topic_name`` refuses them to users). The share state topic,
``__yak_share_state`` (the broker's ``yak_broker.share.state_store.SHARE_STATE_TOPIC``, which a
unit test keeps equal), has 16 partitions, RF min(3, brokers), ``cleanup.policy=compact`` and
``min.insync.replicas=2`` when RF is 3 (docs/decisions.md, "Share groups: where their state
lives").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from yak.errors import (
    InvalidConfigError,
    InvalidTopicError,
    PolicyViolationError,
    UnknownTopicOrPartitionError,
)
from yak.metadata.models import (
    SHARE_LOCK_DURATION_MS,
    SHARE_MAX_DELIVERY_ATTEMPTS,
    ShareGroupRecord,
    ShareOffsetReset,
)
from yak.metadata.snapshot import ClusterSnapshot
from yak.names import validate_group_id, validate_topic_name

__all__ = [
    "DELIVERY_ATTEMPTS_RANGE",
    "INTERNAL_TOPIC_PREFIX",
    "LOCK_DURATION_RANGE_MS",
    "SHARE_STATE_PARTITIONS",
    "SHARE_STATE_TOPIC",
    "ShareGroupChanges",
    "ShareGroupSettings",
    "StateTopicSpec",
    "altered_share_group",
    "check_user_may_change",
    "check_user_topic_name",
    "new_share_group",
    "settings_of",
    "state_topic_spec",
]

#: Topic names Yak keeps for itself; users may not create them.
INTERNAL_TOPIC_PREFIX = "__yak_"
#: The compacted topic holding every share-partition's state snapshot.
SHARE_STATE_TOPIC = f"{INTERNAL_TOPIC_PREFIX}share_state"
SHARE_STATE_PARTITIONS = 16
#: Inclusive bounds of ``max_delivery_attempts``.
DELIVERY_ATTEMPTS_RANGE = (1, 100)
#: Inclusive bounds of ``lock_duration_ms`` (1 s to 1 h).
LOCK_DURATION_RANGE_MS = (1_000, 3_600_000)
_STATE_TOPIC_MAX_RF = 3
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    """What an administrator sets on a share group (defaults: Kafka's)."""

    dead_letter_topic: str | None = None
    max_delivery_attempts: int = SHARE_MAX_DELIVERY_ATTEMPTS
    lock_duration_ms: int = SHARE_LOCK_DURATION_MS
    offset_reset: ShareOffsetReset = ShareOffsetReset.LATEST


@dataclass(frozen=True, slots=True)
class ShareGroupChanges:
    """What an alteration changes: None leaves a setting as it is; ``clear_dead_letter_topic``
    removes the dead-letter topic."""

    dead_letter_topic: str | None = None
    clear_dead_letter_topic: bool = False
    max_delivery_attempts: int | None = None
    lock_duration_ms: int | None = None
    offset_reset: ShareOffsetReset | None = None

    def applied_to(self, settings: ShareGroupSettings) -> ShareGroupSettings:
        """``settings`` with these changes."""
        dead_letter_topic = (
            None
            if self.clear_dead_letter_topic
            else _either(self.dead_letter_topic, settings.dead_letter_topic)
        )
        return ShareGroupSettings(
            dead_letter_topic=dead_letter_topic,
            max_delivery_attempts=_either(
                self.max_delivery_attempts, settings.max_delivery_attempts
            ),
            lock_duration_ms=_either(self.lock_duration_ms, settings.lock_duration_ms),
            offset_reset=_either(self.offset_reset, settings.offset_reset),
        )


def _either(changed: _T | None, current: _T) -> _T:
    return current if changed is None else changed


@dataclass(frozen=True, slots=True)
class StateTopicSpec:
    """How the share state topic is created."""

    partitions: int
    replication_factor: int
    configs: dict[str, str]


def check_user_topic_name(name: str) -> str:
    """``name`` if a user may create a topic of that name: legal and not reserved."""
    validate_topic_name(name)
    if name.startswith(INTERNAL_TOPIC_PREFIX):
        raise InvalidTopicError(
            f"topic names starting with {INTERNAL_TOPIC_PREFIX!r} are reserved for Yak's "
            f"internal topics; {name!r} cannot be created",
            topic=name,
        )
    return name


def check_user_may_change(name: str, what: str) -> str:
    """``name`` if a user may ``what`` (delete, alter, grow) the topic: not an internal one.
    Kafka refuses deleting its internal topics too; a user who deleted ``__yak_share_state``
    would lose every share group's progress."""
    if name.startswith(INTERNAL_TOPIC_PREFIX):
        raise PolicyViolationError(
            f"{name!r} is one of Yak's internal topics: it cannot be {what}",
            topic=name,
        )
    return name


def state_topic_spec(brokers: int) -> StateTopicSpec:
    """The state topic for a cluster of ``brokers`` placeable brokers (at least one)."""
    factor = min(_STATE_TOPIC_MAX_RF, brokers)
    configs = {"cleanup.policy": "compact"}
    if factor == _STATE_TOPIC_MAX_RF:
        configs["min.insync.replicas"] = "2"
    return StateTopicSpec(SHARE_STATE_PARTITIONS, factor, configs)


def settings_of(record: ShareGroupRecord) -> ShareGroupSettings:
    """The settings a stored group has."""
    return ShareGroupSettings(
        dead_letter_topic=record.dead_letter_topic,
        max_delivery_attempts=record.max_delivery_attempts,
        lock_duration_ms=record.lock_duration_ms,
        offset_reset=record.offset_reset,
    )


def new_share_group(
    name: str, settings: ShareGroupSettings, snapshot: ClusterSnapshot, now_ms: int
) -> ShareGroupRecord:
    """The record of a new group, or the typed error saying why it cannot be."""
    validate_group_id(name)
    _check_settings(settings, snapshot)
    return _record(name, now_ms, settings)


def altered_share_group(
    record: ShareGroupRecord, settings: ShareGroupSettings, snapshot: ClusterSnapshot
) -> ShareGroupRecord:
    """``record`` with ``settings`` (validated as a whole); its name and creation time stay."""
    _check_settings(settings, snapshot)
    return _record(record.name, record.created_at_ms, settings)


def _record(name: str, created_at_ms: int, settings: ShareGroupSettings) -> ShareGroupRecord:
    return ShareGroupRecord(
        name=name,
        created_at_ms=created_at_ms,
        dead_letter_topic=settings.dead_letter_topic,
        max_delivery_attempts=settings.max_delivery_attempts,
        lock_duration_ms=settings.lock_duration_ms,
        offset_reset=settings.offset_reset,
    )


def _check_settings(settings: ShareGroupSettings, snapshot: ClusterSnapshot) -> None:
    _check_range("max_delivery_attempts", settings.max_delivery_attempts, DELIVERY_ATTEMPTS_RANGE)
    _check_range("lock_duration_ms", settings.lock_duration_ms, LOCK_DURATION_RANGE_MS)
    if settings.dead_letter_topic is not None:
        _check_dead_letter_topic(settings.dead_letter_topic, snapshot)


def _check_range(setting: str, value: int, bounds: tuple[int, int]) -> None:
    low, high = bounds
    if not low <= value <= high:
        raise InvalidConfigError(
            f"{setting} must be between {low} and {high}, got {value}",
            config=setting,
            value=value,
            min=low,
            max=high,
        )


def _check_dead_letter_topic(topic: str, snapshot: ClusterSnapshot) -> None:
    validate_topic_name(topic)
    if topic.startswith(INTERNAL_TOPIC_PREFIX):
        raise InvalidTopicError(
            f"the dead-letter topic cannot be the internal topic {topic!r}", topic=topic
        )
    record = snapshot.topics.get(topic)
    if record is None or record.deleting:
        raise UnknownTopicOrPartitionError(
            f"the dead-letter topic {topic!r} does not exist; create it first", topic=topic
        )
