"""Errors on Kafka's wire, with their Yak identity kept (pure: no asyncio, no I/O).

A partition's error travels as Kafka's number (``YakError.kafka_code``) and message, which any
Kafka parser reads. When the number alone would lose something — the error's details
(``expected_sequence``, ``log_start_offset`` …) or a Yak code that is not the one its Kafka
number stands for — its stable Yak code and details ride in the tagged field
``YAK_ERROR_TAG`` as JSON ``{"code", "details"}``, which a Kafka parser skips. Shared by every
message codec of the internal plane (``kafka_wire``, ``kafka_share``). Safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Any

import orjson

from yak.errors import YakError, error_for_code, error_for_kafka_code
from yak.protocol.broker_wire import Buffer, PartitionError
from yak.protocol.kafka_types import EMPTY_TAGS, tags

__all__ = [
    "YAK_ERROR_TAG",
    "GroupErrorCode",
    "as_partition_error",
    "error_tags",
    "identity_payload",
    "kafka_error_code",
    "typed_error",
]

#: A tagged field number far above Kafka's own (which count up from 0).
YAK_ERROR_TAG = 0x7961


class GroupErrorCode(IntEnum):
    """Kafka's error numbers of the group APIs (FindCoordinator, JoinGroup, SyncGroup,
    Heartbeat, LeaveGroup, OffsetCommit/Fetch, List/Describe/DeleteGroups), as the classic
    group machine answers them; several have no ``YakError`` of their own."""

    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    GROUP_AUTHORIZATION_FAILED = 30
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    UNSTABLE_OFFSET_COMMIT = 88


def error_tags(error: PartitionError | None) -> bytes:
    """``YAK_ERROR_TAG`` when the Kafka number alone would lose something: details, or a Yak
    code that is not the one its Kafka number stands for."""
    payload = identity_payload(error)
    return EMPTY_TAGS if payload is None else tags({YAK_ERROR_TAG: payload})


def identity_payload(error: PartitionError | None) -> bytes | None:
    """The JSON ``{"code", "details"}`` a tagged field carries for ``error``, or None when its
    Kafka number says it all (a message with two errors tags each under its own number)."""
    if error is None:
        return None
    if not error.details and _canonical_code(error) == error.code:
        return None
    payload: dict[str, Any] = {"code": error.code}
    if error.details:
        payload["details"] = dict(error.details)
    return orjson.dumps(payload)


def _canonical_code(error: PartitionError) -> str:
    kafka_code = error.exception().kafka_code
    return error_for_kafka_code(kafka_code, "").code if kafka_code != -1 else ""


def kafka_error_code(error: PartitionError | None) -> int:
    if error is None:
        return 0
    return error.exception().kafka_code


def typed_error(
    code: int, message: str | None, tags: Mapping[int, Buffer], tag: int = YAK_ERROR_TAG
) -> YakError:
    """The typed error of a Kafka number, its Yak identity restored from tagged field ``tag``."""
    extra = tags.get(tag)
    if extra is not None:
        try:
            payload = orjson.loads(extra)
        except orjson.JSONDecodeError:
            payload = None
        if isinstance(payload, dict) and isinstance(payload.get("code"), str):
            details = payload.get("details")
            return error_for_code(
                payload["code"], message or "", **(details if isinstance(details, dict) else {})
            )
    return error_for_kafka_code(code, message or "")


def as_partition_error(
    code: int, message: str | None, tags: Mapping[int, Buffer], tag: int = YAK_ERROR_TAG
) -> PartitionError | None:
    if code == 0:
        return None
    return PartitionError.of(typed_error(code, message, tags, tag))
