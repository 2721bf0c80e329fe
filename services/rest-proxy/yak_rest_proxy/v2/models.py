"""Request and response bodies of the Confluent v2 dialect (shapes of Confluent's entities).

Unknown fields are ignored, as Confluent's proxy ignores them; the schema fields of avro,
jsonschema and protobuf bodies are accepted and unused (those formats are refused by Content-Type
before a body is read).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "V2BrokerList",
    "V2PartitionInfo",
    "V2PartitionOffset",
    "V2PartitionOffsets",
    "V2ProduceRecord",
    "V2ProduceRequest",
    "V2ProduceResponse",
    "V2ReplicaInfo",
    "V2TopicInfo",
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class V2ProduceRecord(_Body):
    key: Any = None
    value: Any = None
    #: Only on ``POST /topics/{topic}``; the partition URL names it instead.
    partition: int | None = Field(default=None, ge=0)


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
