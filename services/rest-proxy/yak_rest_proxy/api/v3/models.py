"""Request bodies of the v3 admin routes, in Confluent's shapes (``CreateTopicRequest``,
``UpdateConfigRequest``, ``AlterConfigBatchRequest``); pydantic at the boundary only."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AlterConfigBatch",
    "AlterConfigEntry",
    "ConfigEntry",
    "CreateTopic",
    "ProduceRecord",
    "ProduceRecordData",
    "ProduceRecordHeader",
    "UpdateConfig",
]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConfigEntry(_Request):
    name: str
    value: str | None = None


class CreateTopic(_Request):
    """``POST /v3/clusters/{cluster_id}/topics``. ``partitions_count`` defaults to 1 (Kafka's
    ``num.partitions``), ``replication_factor`` to the cluster's default."""

    topic_name: str
    partitions_count: int | None = Field(default=None, ge=1)
    replication_factor: int | None = Field(default=None, ge=1)
    replicas_assignments: dict[str, list[int]] | None = None
    configs: list[ConfigEntry] = Field(default_factory=list)
    validate_only: bool = False


class UpdateConfig(_Request):
    """``PUT …/configs/{name}``: the new value (null: back to the default)."""

    value: str | None = None


class AlterConfigEntry(_Request):
    name: str
    value: str | None = None
    operation: Literal["SET", "DELETE", "set", "delete"] | None = None


class AlterConfigBatch(_Request):
    """``POST …/configs:alter``: set or delete many configs at once."""

    data: list[AlterConfigEntry]
    validate_only: bool = False


class ProduceRecordHeader(_Request):
    name: str
    value: str | None = Field(default=None, description="Base64; null: a header without value.")


class ProduceRecordData(_Request):
    """A key or value. Only BINARY (base64 text), JSON (any JSON) and STRING (text) are served;
    the schema fields are Confluent's and answer 422 until the schema registry serves produce."""

    type: Literal["BINARY", "JSON", "STRING", "AVRO", "JSONSCHEMA", "PROTOBUF"] | None = None
    data: Any = None
    subject: str | None = None
    subject_name_strategy: Literal["TOPIC_NAME", "RECORD_NAME", "TOPIC_RECORD_NAME"] | None = None
    schema_id: int | None = None
    schema_version: int | None = None
    schema_: str | None = Field(default=None, alias="schema")


class ProduceRecord(_Request):
    """``POST …/records``: one record (documentation: the route parses records itself, one at a
    time, as ``api/v3/produce_request`` says). A body may concatenate many; with
    ``Transfer-Encoding: chunked`` it streams."""

    partition_id: int | None = Field(default=None, ge=0, le=2**31 - 1)
    headers: list[ProduceRecordHeader] = Field(default_factory=list)
    key: ProduceRecordData | None = None
    value: ProduceRecordData | None = None
    timestamp: str | None = Field(default=None, description="ISO 8601; default: now.")
