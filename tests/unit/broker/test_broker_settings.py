"""The broker's settings: the address it registers for other processes."""

from __future__ import annotations

import pytest

from yak_broker.settings import BrokerSettings


def test_the_bound_host_is_registered_by_default() -> None:
    assert BrokerSettings(host="10.0.0.5").public_host == "10.0.0.5"


def test_a_wildcard_bind_registers_loopback_unless_advertised() -> None:
    assert BrokerSettings(host="0.0.0.0").public_host == "127.0.0.1"
    settings = BrokerSettings.from_env({"YAK_HOST": "0.0.0.0", "YAK_ADVERTISED_HOST": "broker-1"})
    assert settings.host == "0.0.0.0"
    assert settings.public_host == "broker-1"


def test_the_load_publish_interval_is_bounded() -> None:
    assert BrokerSettings().load_publish_interval_ms == 5_000
    env = {"YAK_LOAD_PUBLISH_INTERVAL_MS": "1000"}
    assert BrokerSettings.from_env(env).load_publish_interval_ms == 1_000
    for outside in (999, 60_001):
        with pytest.raises(ValueError, match=r"load publish interval must be 1000\.\.60000 ms"):
            BrokerSettings(load_publish_interval_ms=outside)


def test_the_initial_rebalance_delay_is_kafkas_unless_set() -> None:
    assert BrokerSettings().group_initial_rebalance_delay_ms == 3_000
    env = {"YAK_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}
    assert BrokerSettings.from_env(env).group_initial_rebalance_delay_ms == 0
    with pytest.raises(ValueError, match="initial rebalance delay must be >= 0 ms, got -1"):
        BrokerSettings(group_initial_rebalance_delay_ms=-1)
