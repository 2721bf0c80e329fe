"""The topic config catalogue: names, defaults, ranges, normalisation; in step with LogConfig."""

from __future__ import annotations

import pytest

from yak.errors import InvalidConfigError
from yak.topic_config import (
    CATALOGUE,
    effective_config,
    is_enabled,
    validate_min_insync_replicas,
    validate_topic_configs,
)
from yak_broker.storage.log_config import LogConfig


def test_storage_configs_match_the_brokers_log_config() -> None:
    defaults = LogConfig().to_dict()
    for name, value in defaults.items():
        assert name in CATALOGUE, name
        assert CATALOGUE[name].default == value, name


def test_every_default_is_valid() -> None:
    defaults = {name: definition.default for name, definition in CATALOGUE.items()}
    assert validate_topic_configs(defaults) == defaults


@pytest.mark.parametrize(
    ("configs", "expected"),
    [
        ({"retention.ms": " 1000 "}, {"retention.ms": "1000"}),
        ({"retention.ms": "-1"}, {"retention.ms": "-1"}),
        ({"cleanup.policy": "Delete, compact"}, {"cleanup.policy": "compact,delete"}),
        ({"unclean.leader.election.enable": "TRUE"}, {"unclean.leader.election.enable": "true"}),
        ({"message.timestamp.type": "logappendtime"}, {"message.timestamp.type": "LogAppendTime"}),
        ({"flush.mode": "SYNC"}, {"flush.mode": "sync"}),
        ({"min.cleanable.dirty.ratio": "1"}, {"min.cleanable.dirty.ratio": "1.0"}),
        ({"compression.type": "zstd"}, {"compression.type": "zstd"}),
    ],
)
def test_values_are_normalised(configs: dict[str, str], expected: dict[str, str]) -> None:
    assert validate_topic_configs(configs) == expected


@pytest.mark.parametrize(
    ("configs", "fragment"),
    [
        ({"retention.msec": "1"}, "unknown topic config 'retention.msec'"),
        ({"retention.ms": "-2"}, "must be >= -1"),
        ({"retention.ms": "soon"}, "not an integer"),
        ({"segment.bytes": "13"}, "must be >= 14"),
        ({"segment.bytes": str(2**31)}, "must be <= 2147483647"),
        ({"min.insync.replicas": "0"}, "must be >= 1"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "must be <= 1"),
        ({"cleanup.policy": "forever"}, "subset of compact, delete"),
        ({"cleanup.policy": ""}, "subset of"),
        ({"unclean.leader.election.enable": "yes"}, "true or false"),
        ({"message.timestamp.type": "Now"}, "CreateTime, LogAppendTime"),
        ({"flush.mode": "maybe"}, "async, sync"),
    ],
)
def test_bad_configs_name_the_key(configs: dict[str, str], fragment: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        validate_topic_configs(configs)
    assert fragment in caught.value.message
    assert caught.value.details["config"] == next(iter(configs))


def test_min_insync_replicas_cannot_exceed_replication_factor() -> None:
    validate_min_insync_replicas({}, 1)
    validate_min_insync_replicas({"min.insync.replicas": "3"}, 3)
    with pytest.raises(InvalidConfigError):
        validate_min_insync_replicas({"min.insync.replicas": "3"}, 2)


def test_effective_config_and_flags() -> None:
    merged = effective_config({"retention.ms": "5"})
    assert merged["retention.ms"] == "5"
    assert merged["segment.bytes"] == "1073741824"
    assert not is_enabled({}, "unclean.leader.election.enable")
    assert is_enabled({"unclean.leader.election.enable": "true"}, "unclean.leader.election.enable")
