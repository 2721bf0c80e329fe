"""The catalogue of every topic config Yak supports: Kafka's names, defaults and value ranges.

Topic configs travel as ``{name: string}`` maps (admin API, etcd ``TopicRecord.configs``); only
overrides are stored, a missing key means the default below. ``validate_topic_configs`` is the
one check the admin API applies before anything is written: an unknown name or a value out of
range raises ``InvalidConfigError`` naming the key, and accepted values come back normalised
(stripped, booleans and enums lower-cased as Kafka spells them, ``cleanup.policy`` sorted).

The storage settings mirror the broker's ``LogConfig`` (same names, defaults and ranges; a unit
test keeps them in step). Besides Kafka's settings Yak adds ``flush.mode`` (``async`` | ``sync``,
see the broker's log_config module) and the delayed-delivery pair ``delayed.delivery.enable`` /
``delayed.delivery.max.ms`` (see ``yak.delays``). Pure and immutable; safe to share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from yak.errors import InvalidConfigError

__all__ = [
    "CATALOGUE",
    "DELAYED_DELIVERY_ENABLE",
    "DELAYED_DELIVERY_MAX_MS",
    "MIN_INSYNC_REPLICAS",
    "UNCLEAN_LEADER_ELECTION",
    "ConfigDef",
    "ConfigType",
    "effective_config",
    "is_enabled",
    "validate_min_insync_replicas",
    "validate_topic_configs",
]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_DAY_MS = 86_400_000

MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
DELAYED_DELIVERY_ENABLE = "delayed.delivery.enable"
DELAYED_DELIVERY_MAX_MS = "delayed.delivery.max.ms"


class ConfigType(StrEnum):
    """How a config value is parsed."""

    INT = "int"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    ENUM = "enum"
    LIST = "list"


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One topic config: its type, default (as a string), range or choices, and what it does."""

    name: str
    type: ConfigType
    default: str
    doc: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()

    def normalise(self, raw: str) -> str:
        """The canonical form of ``raw``; raises InvalidConfigError when it is not allowed."""
        text = str(raw).strip()
        parse = _PARSERS[self.type]
        try:
            return parse(self, text)
        except ValueError as exc:
            raise InvalidConfigError(
                f"invalid value {raw!r} for config {self.name}: {exc}", config=self.name
            ) from exc


def _check_range(definition: ConfigDef, value: float) -> None:
    if definition.low is not None and value < definition.low:
        raise ValueError(f"must be >= {_show(definition.low)}")
    if definition.high is not None and value > definition.high:
        raise ValueError(f"must be <= {_show(definition.high)}")


def _show(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _parse_int(definition: ConfigDef, text: str) -> str:
    try:
        value = int(text)
    except ValueError:
        raise ValueError("not an integer") from None
    _check_range(definition, value)
    return str(value)


def _parse_double(definition: ConfigDef, text: str) -> str:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("not a number") from None
    _check_range(definition, value)
    return str(value)


def _parse_boolean(_definition: ConfigDef, text: str) -> str:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered


def _parse_enum(definition: ConfigDef, text: str) -> str:
    for choice in definition.choices:
        if text.lower() == choice.lower():
            return choice
    raise ValueError(f"expected one of {', '.join(definition.choices)}")


def _parse_list(definition: ConfigDef, text: str) -> str:
    parts = sorted({part.strip().lower() for part in text.split(",") if part.strip()})
    unknown = [part for part in parts if part not in definition.choices]
    if not parts or unknown:
        raise ValueError(f"expected a comma-separated subset of {', '.join(definition.choices)}")
    return ",".join(parts)


_PARSERS: dict[ConfigType, Callable[[ConfigDef, str], str]] = {
    ConfigType.INT: _parse_int,
    ConfigType.DOUBLE: _parse_double,
    ConfigType.BOOLEAN: _parse_boolean,
    ConfigType.ENUM: _parse_enum,
    ConfigType.LIST: _parse_list,
}


def _int(name: str, default: int, doc: str, low: int, high: int = LONG_MAX) -> ConfigDef:
    return ConfigDef(name, ConfigType.INT, str(default), doc, low=low, high=high)


_DEFINITIONS = (
    # -- storage (the broker's LogConfig) ----------------------------------------------------
    _int("segment.bytes", 1_073_741_824, "Roll a new segment at this size.", 14, INT_MAX),
    _int("segment.ms", 7 * _DAY_MS, "Roll a new segment after this age.", 1),
    _int("segment.jitter.ms", 0, "Random jitter subtracted from segment.ms.", 0),
    _int("segment.index.bytes", 10 * 1024 * 1024, "Maximum size of an index file.", 12, INT_MAX),
    _int("index.interval.bytes", 4096, "Bytes between two offset-index entries.", 0, INT_MAX),
    _int("retention.ms", 7 * _DAY_MS, "Delete segments older than this (-1: never).", -1),
    _int("retention.bytes", -1, "Delete old segments above this size (-1: no limit).", -1),
    ConfigDef(
        "cleanup.policy",
        ConfigType.LIST,
        "delete",
        "delete old segments, compact by key, or both.",
        choices=("compact", "delete"),
    ),
    _int("delete.retention.ms", _DAY_MS, "How long compaction keeps tombstones.", 0),
    _int("min.compaction.lag.ms", 0, "Records younger than this are not compacted.", 0),
    _int("max.compaction.lag.ms", LONG_MAX, "Compact records at the latest after this.", 1),
    ConfigDef(
        "min.cleanable.dirty.ratio",
        ConfigType.DOUBLE,
        "0.5",
        "Compact when this share of the log is dirty.",
        low=0.0,
        high=1.0,
    ),
    _int("file.delete.delay.ms", 60_000, "Delay before deleting a file from disk.", 0),
    _int("flush.messages", LONG_MAX, "fsync after this many messages.", 1),
    _int("flush.ms", LONG_MAX, "fsync after this many milliseconds.", 0),
    ConfigDef(
        "flush.mode",
        ConfigType.ENUM,
        "async",
        "Yak: 'sync' acknowledges appends only after an fsync covering them.",
        choices=("async", "sync"),
    ),
    _int("max.message.bytes", 1024 * 1024 + 12, "Largest record batch accepted.", 0, INT_MAX),
    _int("producer.id.expiration.ms", _DAY_MS, "Forget idle producer ids after this.", 1),
    # -- replication and validation ------------------------------------------------------------
    _int(MIN_INSYNC_REPLICAS, 1, "acks=all needs at least this many in-sync replicas.", 1),
    ConfigDef(
        UNCLEAN_LEADER_ELECTION,
        ConfigType.BOOLEAN,
        "false",
        "Elect an out-of-sync replica when no in-sync one is alive (may lose data).",
    ),
    ConfigDef(
        "message.timestamp.type",
        ConfigType.ENUM,
        "CreateTime",
        "Keep the producer's timestamp or stamp the broker's append time.",
        choices=("CreateTime", "LogAppendTime"),
    ),
    ConfigDef(
        "compression.type",
        ConfigType.ENUM,
        "producer",
        "Codec of stored batches; 'producer' keeps the producer's.",
        choices=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    ),
    # -- delayed and scheduled delivery (Yak; docs/decisions.md) ------------------------------
    ConfigDef(
        DELAYED_DELIVERY_ENABLE,
        ConfigType.BOOLEAN,
        "false",
        "Yak: accept records with a yak-deliver-at header (else 400 DELAYS_NOT_ENABLED).",
    ),
    _int(
        DELAYED_DELIVERY_MAX_MS,
        30 * _DAY_MS,
        "Yak: the longest delay a record may ask for.",
        1,
        365 * _DAY_MS,
    ),
)

#: Every supported topic config by name.
CATALOGUE: Mapping[str, ConfigDef] = {definition.name: definition for definition in _DEFINITIONS}


def validate_topic_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """Check every override; return them normalised, or raise InvalidConfigError."""
    normalised: dict[str, str] = {}
    for name, raw in configs.items():
        definition = CATALOGUE.get(name)
        if definition is None:
            raise InvalidConfigError(f"unknown topic config {name!r}", config=name)
        normalised[name] = definition.normalise(raw)
    return normalised


def validate_min_insync_replicas(configs: Mapping[str, str], replication_factor: int) -> None:
    """``min.insync.replicas`` above the replication factor could never be met: refuse it."""
    value = int(configs.get(MIN_INSYNC_REPLICAS, CATALOGUE[MIN_INSYNC_REPLICAS].default))
    if value > replication_factor:
        raise InvalidConfigError(
            f"{MIN_INSYNC_REPLICAS}={value} is larger than the replication factor "
            f"{replication_factor}",
            config=MIN_INSYNC_REPLICAS,
        )


def effective_config(configs: Mapping[str, str]) -> dict[str, str]:
    """Every config with its value for a topic: the overrides over the defaults."""
    merged = {name: definition.default for name, definition in CATALOGUE.items()}
    merged.update(configs)
    return merged


def is_enabled(configs: Mapping[str, str], name: str) -> bool:
    """A boolean config's value for a topic (its override, else its default)."""
    return configs.get(name, CATALOGUE[name].default).strip().lower() == "true"
