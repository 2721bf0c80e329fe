"""Request and response bodies of the Confluent v2 dialect (shapes of Confluent's entities).

Unknown fields are ignored, as Confluent's proxy ignores them; the schema fields of avro,
jsonschema and protobuf bodies are accepted and unused (those formats are refused by Content-Type
before a body is read).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, WithJsonSchema

from yak.api.json_int import JsonInt
from yak.api.records import INT32_MAX, INT64_MAX
from yak.web.openapi import integer_text_pattern

__all__ = [
    "AUTO_OFFSET_RESETS",
    "FETCH_MIN_BYTES",
    "INSTANCE_TIMEOUT_MS",
    "V2BrokerList",
    "V2CommitRequest",
    "V2CommittedOffset",
    "V2CommittedOffsets",
    "V2ConsumerRecord",
    "V2CreateConsumer",
    "V2CreatedConsumer",
    "V2OffsetEntry",
    "V2PartitionInfo",
    "V2PartitionOffset",
    "V2PartitionOffsets",
    "V2Partitions",
    "V2Positions",
    "V2ProduceRecord",
    "V2ProduceRequest",
    "V2ProduceResponse",
    "V2ReplicaInfo",
    "V2Subscription",
    "V2TimestampEntry",
    "V2TopicInfo",
    "V2TopicPartition",
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class V2ProduceRecord(_Body):
    key: Any = None
    value: Any = None
    #: Only on ``POST /topics/{topic}``; the partition URL names it instead.
    partition: int | None = Field(default=None, ge=0, le=INT32_MAX)


class V2ProduceRequest(_Body):
    records: list[V2ProduceRecord] = Field(min_length=1)
    key_schema: str | None = None
    key_schema_id: int | None = None
    value_schema: str | None = None
    value_schema_id: int | None = None


class V2PartitionOffset(BaseModel):
    """One record's result: where it went, or ``error_code``/``error``."""

    partition: int | None
    offset: int | None
    error_code: int | None = None
    error: str | None = None


class V2ProduceResponse(BaseModel):
    offsets: list[V2PartitionOffset]
    key_schema_id: int | None = None
    value_schema_id: int | None = None


class V2BrokerList(BaseModel):
    brokers: list[int]


class V2ReplicaInfo(BaseModel):
    broker: int
    leader: bool
    in_sync: bool


class V2PartitionInfo(BaseModel):
    partition: int
    leader: int
    replicas: list[V2ReplicaInfo]


class V2TopicInfo(BaseModel):
    name: str
    configs: dict[str, str]
    partitions: list[V2PartitionInfo]


class V2PartitionOffsets(BaseModel):
    beginning_offset: int
    end_offset: int


#: What ``auto.offset.reset`` may say (any case), and the policy each stands for.
AUTO_OFFSET_RESETS = {
    "earliest": "earliest",
    "smallest": "earliest",
    "latest": "latest",
    "largest": "latest",
    "none": "none",
}
_RESET_SCHEMA = WithJsonSchema(
    {"anyOf": [{"type": "string", "enum": list(AUTO_OFFSET_RESETS)}, {"type": "null"}]}
)
#: ``auto.commit.enable``: a boolean, or ``"true"``/``"false"`` (any case).
_COMMIT_SCHEMA = WithJsonSchema(
    {
        "anyOf": [
            {"type": "boolean"},
            {"type": "string", "enum": ["true", "false"]},
            {"type": "null"},
        ]
    }
)
#: Bounds of create-consumer numbers (``consumer_routes.member_record``: ``fetch.min.bytes``
#: -1 for the proxy's default, an instance's idle timeout), integers or decimal strings.
FETCH_MIN_BYTES = (-1, 10_000_000)
INSTANCE_TIMEOUT_MS = (1_000, 86_400_000)


def _number(low: int, high: int) -> WithJsonSchema:
    """An integer ``low``..``high``, or the same in a decimal string (Confluent's clients
    send their configs as strings), or null for the default."""
    integer = {"type": "integer", "minimum": low, "maximum": high}
    text = {"type": "string", "pattern": integer_text_pattern(low, high)}
    return WithJsonSchema({"anyOf": [integer, text, {"type": "null"}]})


class V2CreateConsumer(_Body):
    """``POST /consumers/{group}`` (Confluent's ``CreateConsumerInstanceRequest``)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str | None = None
    #: Deprecated by Confluent; overrides ``name``.
    id: str | None = None
    format: str = "binary"
    auto_offset_reset: Annotated[str | None, _RESET_SCHEMA] = Field(
        default=None, alias="auto.offset.reset"
    )
    auto_commit_enable: Annotated[str | StrictBool | None, _COMMIT_SCHEMA] = Field(
        default=None, alias="auto.commit.enable"
    )
    fetch_min_bytes: Annotated[JsonInt | str | None, _number(*FETCH_MIN_BYTES)] = Field(
        default=None, alias="fetch.min.bytes"
    )
    #: At most the proxy's ``consumer_request_max_timeout_ms`` (``http.openapi`` says so).
    consumer_request_timeout_ms: JsonInt | str | None = Field(
        default=None, alias="consumer.request.timeout.ms"
    )
    #: Yak: the instance's own idle timeout (default: the proxy's
    #: ``consumer.instance.timeout.ms``).
    consumer_instance_timeout_ms: Annotated[JsonInt | str | None, _number(*INSTANCE_TIMEOUT_MS)] = (
        Field(default=None, alias="consumer.instance.timeout.ms")
    )
    #: Yak: the server-side assignor this member asks for (``uniform`` or ``range``).
    partition_assignment_strategy: str | None = Field(
        default=None, alias="partition.assignment.strategy"
    )


class V2CreatedConsumer(BaseModel):
    instance_id: str
    base_uri: str


class V2Subscription(_Body):
    topics: list[str] | None = None
    topic_pattern: str | None = None


class V2TopicPartition(_Body):
    topic: str
    partition: int = Field(ge=0, le=INT32_MAX)


class V2Partitions(_Body):
    partitions: list[V2TopicPartition]


class V2OffsetEntry(_Body):
    topic: str
    partition: int = Field(ge=0, le=INT32_MAX)
    offset: int = Field(le=INT64_MAX)
    metadata: str | None = None


class V2TimestampEntry(_Body):
    topic: str
    partition: int = Field(ge=0, le=INT32_MAX)
    timestamp: str
    metadata: str | None = None


class V2Positions(_Body):
    offsets: list[V2OffsetEntry] = Field(default_factory=list)
    timestamps: list[V2TimestampEntry] = Field(default_factory=list)


class V2CommitRequest(_Body):
    offsets: list[V2OffsetEntry] | None = None


class V2CommittedOffset(BaseModel):
    topic: str
    partition: int
    offset: int
    metadata: str


class V2CommittedOffsets(BaseModel):
    offsets: list[V2CommittedOffset]


class V2ConsumerRecord(BaseModel):
    topic: str
    key: Any = None
    value: Any = None
    partition: int
    offset: int
    #: Yak adds the record's timestamp (ms) and headers (values base64), as Karapace and
    #: Strimzi do; Confluent's v2 has neither.
    timestamp: int
    headers: list[dict[str, str | None]] = Field(default_factory=list)
