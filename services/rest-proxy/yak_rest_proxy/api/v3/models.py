"""Request bodies of the v3 admin routes, in Confluent's shapes (``CreateTopicRequest``,
``UpdateConfigRequest``, ``AlterConfigBatchRequest``); pydantic at the boundary only."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AlterConfigBatch", "AlterConfigEntry", "ConfigEntry", "CreateTopic", "UpdateConfig"]


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
