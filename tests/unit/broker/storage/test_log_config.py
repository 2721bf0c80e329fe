"""Tests for yak_broker.storage.log_config: Kafka names, defaults and validation."""

from __future__ import annotations

import pytest

from yak.errors import InvalidConfigError
from yak_broker.storage.log_config import LONG_MAX, CleanupPolicy, FlushMode, LogConfig


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1024**3
    assert config.segment_ms == 7 * 24 * 3600 * 1000
    assert config.index_interval_bytes == 4096
    assert config.segment_index_bytes == 10 * 1024 * 1024
    assert config.retention_bytes == -1
    assert config.flush_messages == LONG_MAX
    assert config.flush_ms == LONG_MAX
    assert config.max_message_bytes == 1024 * 1024 + 12
    assert config.cleanup_policy is CleanupPolicy.DELETE
    assert config.flush_mode is FlushMode.ASYNC
    assert config.delete
    assert not config.compact
    assert not config.sync


def test_from_dict_parses_kafka_names() -> None:
    config = LogConfig.from_dict(
        {
            "segment.bytes": "1048576",
            "retention.ms": "-1",
            "cleanup.policy": "delete, compact",
            "flush.mode": "SYNC",
            "min.cleanable.dirty.ratio": "0.25",
        }
    )
    assert config.segment_bytes == 1048576
    assert config.retention_ms == -1
    assert config.cleanup_policy is CleanupPolicy.COMPACT_DELETE
    assert config.compact
    assert config.delete
    assert config.sync
    assert config.min_cleanable_dirty_ratio == 0.25


def test_round_trip_through_strings() -> None:
    config = LogConfig(segment_bytes=4096, flush_mode=FlushMode.SYNC)
    assert LogConfig.from_dict(config.to_dict()) == config


def test_from_dict_applies_over_a_base() -> None:
    base = LogConfig(retention_bytes=100)
    assert LogConfig.from_dict({"segment.ms": "5"}, base) == LogConfig(
        retention_bytes=100, segment_ms=5
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("no.such.config", "1"),
        ("segment.bytes", "ten"),
        ("segment.bytes", "0"),
        ("index.interval.bytes", "-1"),
        ("retention.bytes", "-2"),
        ("flush.messages", "0"),
        ("cleanup.policy", "shred"),
        ("flush.mode", "sometimes"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("max.message.bytes", str(2**31)),
    ],
)
def test_bad_configs_raise_invalid_config(name: str, value: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        LogConfig.from_dict({name: value})
    assert name in str(info.value)
