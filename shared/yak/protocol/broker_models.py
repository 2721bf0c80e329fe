"""Pydantic models of the broker's JSON endpoints (list offsets, delete records, partitions).

The binary data plane (produce, fetch) is framed by ``broker_wire``; these are the small admin
messages, validated at the HTTP boundary on both sides. Per-partition failures travel inside the
response as ``ErrorBody`` (``code`` as in ``yak.errors``), so one bad partition does not fail
the others; request-level failures are the usual ``{"code", "message", "details"}`` error body.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from yak.errors import YakError, error_for_code

__all__ = [
    "EARLIEST",
    "LATEST",
    "DeleteRecordsPartition",
    "DeleteRecordsRequest",
    "DeleteRecordsResponse",
    "DeleteRecordsResult",
    "EpochEndOffset",
    "ErrorBody",
    "HostedPartition",
    "HostedTopic",
    "ListOffsetsResponse",
    "LogDirResponse",
    "OffsetForLeaderEpoch",
    "OffsetResult",
    "OffsetsForLeaderEpochRequest",
    "OffsetsForLeaderEpochResponse",
    "PartitionsResponse",
]

#: Kafka's ListOffsets special timestamps.
LATEST = -1
EARLIEST = -2


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ErrorBody(_Model):
    """A typed error as it travels (see ``yak.errors``)."""

    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, error: YakError) -> ErrorBody:
        return cls(code=error.code, message=error.message, details=dict(error.details))

    def exception(self) -> YakError:
        return error_for_code(self.code, self.message, **self.details)


class OffsetResult(_Model):
    """ListOffsets for one partition: ``offset`` is -1 when no batch matches the timestamp."""

    topic: str
    partition: int
    timestamp: int
    offset: int = -1
    error: ErrorBody | None = None


class ListOffsetsResponse(_Model):
    partitions: list[OffsetResult]


class DeleteRecordsPartition(_Model):
    """Delete every record below ``offset`` (-1: below the high watermark)."""

    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)
    offset: int = Field(ge=-1)


class DeleteRecordsRequest(_Model):
    partitions: list[DeleteRecordsPartition] = Field(min_length=1)


class DeleteRecordsResult(_Model):
    """The partition's new log start offset (``low_watermark``), or why it did not move."""

    topic: str
    partition: int
    low_watermark: int = -1
    error: ErrorBody | None = None


class DeleteRecordsResponse(_Model):
    partitions: list[DeleteRecordsResult]


class OffsetForLeaderEpoch(_Model):
    """OffsetsForLeaderEpoch, asked by a follower: where does ``leader_epoch`` end on the leader?

    ``current_leader_epoch`` fences the question like a fetch (-1: unchecked).
    """

    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)
    current_leader_epoch: int = Field(default=-1, ge=-1)
    leader_epoch: int = Field(ge=-1)


class OffsetsForLeaderEpochRequest(_Model):
    replica_id: int = Field(default=-1, ge=-1)
    partitions: list[OffsetForLeaderEpoch] = Field(min_length=1)


class EpochEndOffset(_Model):
    """The largest epoch <= the one asked that the leader knows, and where it ends (KIP-279).

    ``(-1, -1)`` when the leader knows no such epoch.
    """

    topic: str
    partition: int
    leader_epoch: int = -1
    end_offset: int = -1
    error: ErrorBody | None = None


class OffsetsForLeaderEpochResponse(_Model):
    partitions: list[EpochEndOffset]


class HostedPartition(_Model):
    """One partition replica on this broker, for operators."""

    topic: str
    partition: int
    topic_id: str
    is_leader: bool
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    size_bytes: int
    segments: int


class PartitionsResponse(_Model):
    broker_id: int
    partitions: list[HostedPartition]
    #: The data folder and its file system's size and free space (DescribeLogDirs).
    log_dir: str = ""
    disk_total_bytes: int = 0
    disk_free_bytes: int = 0


class HostedTopic(_Model):
    """One topic's replicas on this broker, summed: what a dashboard shows per topic, for the
    price of one entry per topic instead of one per replica (``GET /v1/log-dir``). The
    ``leader_*`` sums and ``records`` cover the partitions this broker leads, so adding them up
    over the brokers counts every led partition once."""

    topic: str
    replicas: int
    leaders: int
    size_bytes: int
    leader_size_bytes: int
    #: Sum over led partitions of high watermark - log start offset.
    records: int
    #: Sum over led partitions of the high watermark (its growth is the produce rate).
    high_watermark_sum: int


class LogDirResponse(_Model):
    """The data folder's usage and its replicas summed per topic (``GET /v1/log-dir``)."""

    broker_id: int
    log_dir: str
    disk_total_bytes: int
    disk_free_bytes: int
    topics: list[HostedTopic]
