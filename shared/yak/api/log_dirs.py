"""The brokers' data folders as the public API shows them (Kafka's DescribeLogDirs):
``GET /api/v1/log-dirs`` lists every replica, ``GET /api/v1/log-dirs/topics`` sums them per
topic. Re-exported by ``yak.api.admin``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BrokerLogDir", "BrokerTopicLogs", "LogDirs", "ReplicaLog", "TopicLog", "TopicLogDirs"]


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ReplicaLog(_Body):
    """One partition replica's log on one broker (Kafka's DescribeLogDirs, with offsets)."""

    topic: str
    partition: int
    is_leader: bool
    leader_epoch: int
    size_bytes: int
    segments: int
    log_start_offset: int
    high_watermark: int
    log_end_offset: int


class _DataFolder(_Body):
    """What both listings say of a broker's data folder. ``error`` is set (and the rest
    empty) when the broker did not answer."""

    broker_id: int
    error: str | None = None
    log_dir: str = ""
    disk_total_bytes: int = 0
    disk_free_bytes: int = 0
    size_bytes: int = Field(default=0, description="Bytes of all the replicas' logs.")


class BrokerLogDir(_DataFolder):
    """A broker's data folder: disk usage and the replicas it holds."""

    replicas: list[ReplicaLog] = []


class LogDirs(_Body):
    """Every live broker's data folder (``GET /api/v1/log-dirs``)."""

    brokers: list[BrokerLogDir]


class TopicLog(_Body):
    """One topic's replicas on one broker, summed. The ``leader_*`` figures and ``records``
    cover the partitions that broker leads, so summing them over the brokers counts each led
    partition once."""

    topic: str
    replicas: int
    leaders: int
    size_bytes: int = Field(description="Bytes of the topic's replicas on this broker.")
    leader_size_bytes: int = Field(description="Bytes of the replicas this broker leads.")
    records: int = Field(
        description="Sum over the led partitions of high watermark - log start offset."
    )
    high_watermark_sum: int = Field(
        description="Sum over the led partitions of the high watermark (its growth over "
        "time is the topic's produce rate)."
    )


class BrokerTopicLogs(_DataFolder):
    """A broker's data folder summed per topic."""

    replicas: int = 0
    leaders: int = 0
    topics: list[TopicLog] = []


class TopicLogDirs(_Body):
    """Every live broker's data folder summed per topic (``GET /api/v1/log-dirs/topics``):
    one entry per topic and broker, however many partitions — what a dashboard polls."""

    brokers: list[BrokerTopicLogs]
