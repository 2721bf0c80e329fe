"""What the topic pages compute without the network: form checks, partition health, retention.

The create and edit-configs forms are checked here before anything is sent, with one message
per field (the names of ``yak.names`` and the catalogue of ``yak.topic_config``); the public
API checks again and ``field_of`` places its refusals on the field they concern. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from yak.api.admin import MAX_PARTITIONS, TopicDescription
from yak.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    YakError,
)
from yak.names import validate_topic_name
from yak.topic_config import CATALOGUE, INT_MAX, validate_min_insync_replicas

__all__ = [
    "FormErrors",
    "NewTopic",
    "TopicHealth",
    "config_edit",
    "field_of",
    "format_duration_ms",
    "new_topic",
    "topic_health",
]

#: Field name → the message shown under it.
FormErrors = dict[str, str]

#: Configs the create form has a field of its own for (the rest go in the free-text box).
_CONFIG_FIELDS = {"retention.ms": "retention_ms", "cleanup.policy": "cleanup_policy"}
_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000))


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A checked create-topic form."""

    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicHealth:
    """How many of a topic's partitions need attention."""

    under_replicated: int = 0
    offline: int = 0

    @property
    def ok(self) -> bool:
        return not (self.under_replicated or self.offline)


def topic_health(topic: TopicDescription) -> TopicHealth:
    """Offline: no leader; under-replicated: fewer in-sync replicas than replicas."""
    return TopicHealth(
        under_replicated=sum(1 for p in topic.partitions if len(p.isr) < len(p.replicas)),
        offline=sum(1 for p in topic.partitions if p.leader < 0),
    )


def format_duration_ms(value: str | int | None) -> str:
    """A config's milliseconds for people: ``604800000`` → ``7 d``, ``-1`` → ``forever``."""
    if value is None or value == "":
        return "-"
    try:
        ms = int(value)
    except ValueError:
        return str(value)
    if ms < 0:
        return "forever"
    for unit, size in _UNITS:
        if ms >= size:
            amount = f"{ms / size:.1f}".removesuffix(".0")
            return f"{amount} {unit}"
    return f"{ms} ms"


def _count(text: str, what: str, low: int, high: int, errors: FormErrors, key: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        errors[key] = f"{what} must be a whole number"
        return 0
    if not low <= value <= high:
        errors[key] = f"{what} must be between {low:,} and {high:,}"
    return value


def _config_lines(text: str, errors: FormErrors) -> dict[str, str]:
    configs: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            errors["configs"] = f"line {number}: write one name=value a line"
            return {}
        configs[name.strip()] = value.strip()
    return configs


def new_topic(form: Mapping[str, str], *, live_brokers: int) -> NewTopic | FormErrors:
    """The checked topic of a create form, or a message per bad field."""
    errors: FormErrors = {}
    name = form.get("name", "").strip()
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        errors["name"] = exc.message[:1].upper() + exc.message[1:]
    partitions = _count(
        form.get("partitions", ""), "Partitions", 1, MAX_PARTITIONS, errors, "partitions"
    )
    most = live_brokers or INT_MAX  # no broker count known: the API is the judge
    replication = _count(
        form.get("replication_factor", ""),
        "Replication factor",
        1,
        most,
        errors,
        "replication_factor",
    )
    if "replication_factor" in errors and live_brokers:
        errors["replication_factor"] += f" (there are {live_brokers} live brokers)"
    configs = _config_lines(form.get("configs", ""), errors)
    for config, key in _CONFIG_FIELDS.items():
        value = form.get(key, "").strip()
        if value:
            configs[config] = value
    for config, value in configs.items():
        definition = CATALOGUE.get(config)
        key = _CONFIG_FIELDS.get(config, "configs")
        if definition is None:
            errors[key] = f"Unknown topic config {config!r}"
            continue
        try:
            configs[config] = definition.normalise(value)
        except InvalidConfigError as exc:
            errors[key] = exc.message
    if "replication_factor" not in errors and "configs" not in errors:
        try:
            validate_min_insync_replicas(configs, replication)
        except InvalidConfigError as exc:
            errors["configs"] = exc.message
    if errors:
        return errors
    return NewTopic(name, partitions, replication, configs)


def config_edit(
    form: Mapping[str, str], overrides: Mapping[str, str]
) -> tuple[dict[str, str], list[str], FormErrors]:
    """The overrides to set and to delete from an edit form that holds one field per config
    (empty: the default), or a message per bad field (keyed by config name)."""
    to_set: dict[str, str] = {}
    to_delete: list[str] = []
    errors: FormErrors = {}
    for name, definition in CATALOGUE.items():
        if name not in form:
            continue
        value = form[name].strip()
        if not value:
            if name in overrides:
                to_delete.append(name)
            continue
        try:
            normalised = definition.normalise(value)
        except InvalidConfigError as exc:
            errors[name] = exc.message
            continue
        if overrides.get(name) != normalised:
            to_set[name] = normalised
    return to_set, to_delete, errors


def field_of(error: YakError) -> str | None:
    """The create form's field an API refusal concerns (None: not the form's fault)."""
    if isinstance(error, (InvalidTopicError, TopicAlreadyExistsError)):
        return "name"
    if isinstance(error, InvalidPartitionsError):
        return "partitions"
    if isinstance(error, InvalidReplicationFactorError):
        return "replication_factor"
    if isinstance(error, InvalidConfigError):
        return _CONFIG_FIELDS.get(str(error.details.get("config", "")), "configs")
    return None
