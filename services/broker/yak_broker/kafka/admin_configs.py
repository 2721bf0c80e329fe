"""DescribeConfigs (api key 32, v1-v4), IncrementalAlterConfigs (44, v0-v1) and AlterConfigs
(33, v0-v2): topic configs through the controller, this broker's static configs read-only.

- **Topic resources** (type 2) are described from this broker's metadata: every config of the
  catalogue (``yak.topic_config``), an override with source ``DYNAMIC_TOPIC_CONFIG`` and the
  rest at ``DEFAULT_CONFIG``; synonyms only when asked (the override, then the default), the
  documentation only when asked; no topic config is sensitive or read-only. Kafka's config
  types: a catalogue int bounded by ``INT_MAX`` is ``INT``, other ints ``LONG``, enums
  ``STRING``.
- **Broker resources** (type 4) name this broker's id (or ``""``, the cluster default):
  a few static settings (``STATIC_BROKER_CONFIG``, read-only); the cluster secret, when one is
  set, is listed as Kafka lists a sensitive config — flagged, with a null value. Another
  broker's id is an ``INVALID_REQUEST``: Kafka's clients send a broker's configs to it.
- **Alterations** are validated here first as the coordinator validates them (the catalogue,
  ``min.insync.replicas`` against the replication factor), so ``validate_only`` answers
  without a write; the rest goes to the controller's admin API (``kafka.controller``) as
  set/delete, and the answer waits (bounded) until this broker's metadata shows the new
  configs. Incremental ``SET``/``DELETE`` map directly; ``APPEND``/``SUBTRACT`` apply to
  list configs (``cleanup.policy``) against the current value, and are ``INVALID_CONFIG`` on
  any other, as Kafka answers. AlterConfigs (the legacy API) replaces the topic's overrides
  as a whole. Broker configs cannot be altered (Yak's are static): ``INVALID_REQUEST``.

ACLs, as Kafka's: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic (``TOPIC_AUTHORIZATION_FAILED``)
or, for a broker resource, on the cluster (``CLUSTER_AUTHORIZATION_FAILED``); denials and
changes audited. Errors per resource, as each Yak error's Kafka number. Single event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from yak.errors import (
    InvalidConfigError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
    YakError,
)
from yak.metadata.models import TopicRecord
from yak.protocol.broker_wire import Buffer
from yak.security.acl import CLUSTER_NAME, Operation, ResourceType
from yak.topic_config import (
    CATALOGUE,
    INT_MAX,
    ConfigDef,
    ConfigType,
    validate_min_insync_replicas,
    validate_topic_configs,
)
from yak_broker.kafka.context import KafkaRequest, KafkaServer
from yak_broker.kafka.controller import (
    await_metadata,
    controller_admin,
    failure,
    made,
    require,
)
from yak_broker.kafka.schemas import read_request, write_response

__all__ = [
    "handle_alter_configs",
    "handle_describe_configs",
    "handle_incremental_alter_configs",
    "topic_config_entries",
]

API_DESCRIBE_CONFIGS = 32
API_ALTER_CONFIGS = 33
API_INCREMENTAL_ALTER_CONFIGS = 44
TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_BOOLEAN, _STRING, _INT, _LONG, _DOUBLE, _LIST, _PASSWORD = 1, 2, 3, 5, 6, 7, 9
_ALTER_WAIT_MS = 5_000


def _config_type(definition: ConfigDef) -> int:
    if definition.type is ConfigType.INT:
        return _INT if definition.high is not None and definition.high <= INT_MAX else _LONG
    return {
        ConfigType.DOUBLE: _DOUBLE,
        ConfigType.BOOLEAN: _BOOLEAN,
        ConfigType.ENUM: _STRING,
        ConfigType.LIST: _LIST,
    }[definition.type]


def topic_config_entries(
    overrides: Mapping[str, str],
    keys: Iterable[str] | None = None,
    *,
    synonyms: bool = False,
    documentation: bool = False,
) -> list[dict[str, Any]]:
    """A topic's configs as Kafka describes them (``keys``: only those; None: all)."""
    names = CATALOGUE if keys is None else [k for k in keys if k in CATALOGUE]
    entries = []
    for name in names:
        definition = CATALOGUE[name]
        overridden = name in overrides
        chain = [{"name": name, "value": definition.default, "source": DEFAULT_CONFIG}]
        if overridden:
            chain.insert(
                0, {"name": name, "value": overrides[name], "source": DYNAMIC_TOPIC_CONFIG}
            )
        entry: dict[str, Any] = {
            "name": name,
            "value": overrides[name] if overridden else definition.default,
            "read_only": False,
            "config_source": DYNAMIC_TOPIC_CONFIG if overridden else DEFAULT_CONFIG,
            "is_sensitive": False,
            "synonyms": chain if synonyms else [],
            "config_type": _config_type(definition),
            "documentation": definition.doc if documentation else None,
        }
        entries.append(entry)
    return entries


def _broker_entries(server: KafkaServer) -> list[dict[str, Any]]:
    settings = server.broker.settings
    static: list[tuple[str, str | None, int, bool]] = [
        ("broker.id", str(settings.broker_id), _INT, False),
        ("broker.rack", settings.rack, _STRING, False),
        ("log.dirs", str(settings.data_dir), _STRING, False),
        ("socket.request.max.bytes", str(settings.max_request_bytes), _INT, False),
        ("replica.lag.time.max.ms", str(settings.replica_lag_time_max_ms), _LONG, False),
    ]
    if settings.cluster_secret is not None:
        static.append(("yak.cluster.secret", None, _PASSWORD, True))
    return [
        {
            "name": name,
            "value": value,
            "read_only": True,
            "config_source": STATIC_BROKER_CONFIG,
            "is_sensitive": sensitive,
            "synonyms": [],
            "config_type": kind,
            "documentation": None,
        }
        for name, value, kind, sensitive in static
    ]


def _topic_record(server: KafkaServer, name: str) -> TopicRecord:
    record = server.broker.snapshot().topics.get(name)
    if record is None or record.deleting:
        raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist", topic=name)
    return record


def _check_broker(server: KafkaServer, name: str) -> None:
    if name not in ("", str(server.broker.settings.broker_id)):
        raise InvalidRequestError(
            f"broker {name!r}'s configs are answered by that broker, not by broker "
            f"{server.broker.settings.broker_id}"
        )


def _require(request: KafkaRequest, operation: Operation, kind: int, name: str) -> None:
    """The ACL a config request needs: on the topic, or on the cluster for a broker."""
    if kind == TOPIC:
        require(request, operation, ResourceType.TOPIC, name)
    elif kind == BROKER:
        require(request, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def _describe(request: KafkaRequest, resource: Any, parsed: Any) -> dict[str, Any]:
    server, kind, name = request.server, int(resource.resource_type), str(resource.resource_name)
    keys = resource.configuration_keys or None
    answer: dict[str, Any] = {"resource_type": kind, "resource_name": name, "configs": []}
    try:
        _require(request, Operation.DESCRIBE_CONFIGS, kind, name)
        if kind == TOPIC:
            answer["configs"] = topic_config_entries(
                _topic_record(server, name).configs,
                keys,
                synonyms=bool(parsed.include_synonyms),
                documentation=bool(getattr(parsed, "include_documentation", False)),
            )
        elif kind == BROKER:
            _check_broker(server, name)
            entries = _broker_entries(server)
            answer["configs"] = [e for e in entries if keys is None or e["name"] in keys]
        else:
            raise InvalidRequestError(f"resource type {kind} has no configs in Yak")
    except YakError as exc:
        answer.update(failure(exc))
        return answer
    answer.update(error_code=0, error_message=None)
    return answer


async def handle_describe_configs(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_DESCRIBE_CONFIGS, request.api_version, request.body)
    results = [_describe(request, resource, parsed) for resource in parsed.resources]
    values = {"throttle_time": 0, "results": results}
    return write_response(API_DESCRIBE_CONFIGS, request.api_version, request.correlation_id, values)


def _text(value: str | None) -> str:
    return "" if value is None else str(value)


def _list_items(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _incremental_changes(
    record: TopicRecord, configs: Iterable[Any]
) -> tuple[dict[str, str], list[str]]:
    """The set/delete a topic's incremental alteration comes to (validated)."""
    to_set: dict[str, str] = {}
    to_delete: list[str] = []
    for config in configs:
        name, operation = str(config.name), int(config.config_operation)
        definition = CATALOGUE.get(name)
        if definition is None:
            raise InvalidConfigError(f"unknown topic config {name!r}", config=name)
        if operation == SET:
            to_set[name] = _text(config.value)
        elif operation == DELETE:
            to_delete.append(name)
        elif operation in (APPEND, SUBTRACT):
            if definition.type is not ConfigType.LIST:
                raise InvalidConfigError(
                    f"{name} is not a list config: it can only be set or deleted", config=name
                )
            current = _list_items(record.configs.get(name, definition.default))
            items = _list_items(config.value)
            if operation == APPEND:
                merged = current + [i for i in items if i not in current]
            else:
                merged = [i for i in current if i not in items]
            to_set[name] = ",".join(merged)
        else:
            raise InvalidRequestError(f"unknown config operation {operation} for {name}")
    return to_set, to_delete


async def _alter_topic(
    request: KafkaRequest, name: str, to_set: dict[str, str], to_delete: list[str], dry: bool
) -> None:
    server = request.server
    record = _topic_record(server, name)
    normalised = validate_topic_configs(to_set)
    merged = {k: v for k, v in record.configs.items() if k not in to_delete}
    merged.update(normalised)
    validate_min_insync_replicas(merged, record.replication_factor)
    if dry:
        return
    async with controller_admin(request) as admin:
        described = await admin.alter_topic_configs(
            name, set_configs=normalised, delete_configs=to_delete
        )
    made(request, Operation.ALTER_CONFIGS, ResourceType.TOPIC, name)

    def shown(snapshot: Any) -> bool:
        topic = snapshot.topics.get(name)
        return topic is None or dict(topic.configs) == described.configs

    await await_metadata(server.broker, shown, _ALTER_WAIT_MS)


async def _alter(request: KafkaRequest, resource: Any, incremental: bool, dry: bool) -> Any:
    server, kind, name = request.server, int(resource.resource_type), str(resource.resource_name)
    answer: dict[str, Any] = {"resource_type": kind, "resource_name": name}
    try:
        _require(request, Operation.ALTER_CONFIGS, kind, name)
        if kind == BROKER:
            _check_broker(server, name)
            raise InvalidRequestError("Yak's broker configs are static: set them at startup")
        if kind != TOPIC:
            raise InvalidRequestError(f"resource type {kind} has no configs in Yak")
        if incremental:
            to_set, to_delete = _incremental_changes(_topic_record(server, name), resource.configs)
        else:  # AlterConfigs: the given configs become the whole set of overrides
            to_set = {
                str(c.name): "" if c.value is None else str(c.value) for c in resource.configs
            }
            current = _topic_record(server, name).configs
            to_delete = [k for k in current if k not in to_set]
        await _alter_topic(request, name, to_set, to_delete, dry)
    except YakError as exc:
        answer.update(failure(exc))
        return answer
    answer.update(error_code=0, error_message=None)
    return answer


async def _handle_alter(request: KafkaRequest, api_key: int, incremental: bool) -> list[Buffer]:
    parsed = read_request(api_key, request.api_version, request.body)
    seen = [(int(r.resource_type), str(r.resource_name)) for r in parsed.resources]
    responses = []
    for resource, key in zip(parsed.resources, seen, strict=True):
        if seen.count(key) > 1:
            duplicate = InvalidRequestError(f"resource {key[1]!r} appears more than once")
            responses.append(
                {"resource_type": key[0], "resource_name": key[1]} | failure(duplicate)
            )
            continue
        responses.append(await _alter(request, resource, incremental, bool(parsed.validate_only)))
    values = {"throttle_time": 0, "responses": responses}
    return write_response(api_key, request.api_version, request.correlation_id, values)


async def handle_incremental_alter_configs(request: KafkaRequest) -> list[Buffer]:
    return await _handle_alter(request, API_INCREMENTAL_ALTER_CONFIGS, incremental=True)


async def handle_alter_configs(request: KafkaRequest) -> list[Buffer]:
    return await _handle_alter(request, API_ALTER_CONFIGS, incremental=False)
