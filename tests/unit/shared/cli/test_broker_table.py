"""``yak cluster status`` / ``yak brokers list``: every broker's status is filled, and a down
broker says when it was last seen."""

from __future__ import annotations

from rich.console import Console

from yak.api.admin import BrokerInfo, BrokerStatus
from yak.cli.cluster import broker_status, broker_table, last_seen

NOW = 1_700_000_000_000


def info(broker_id: int, status: BrokerStatus, **fields: object) -> BrokerInfo:
    values: dict[str, object] = {
        "broker_id": broker_id,
        "host": "127.0.0.1",
        "port": 9000 + broker_id,
        "status": status,
        "shutting_down": status is BrokerStatus.SHUTTING_DOWN,
        "last_seen_ms": NOW,
        **fields,
    }
    return BrokerInfo.model_validate(values)


def test_every_status_is_named() -> None:
    assert broker_status(info(0, BrokerStatus.UP)) == "up"
    assert broker_status(info(0, BrokerStatus.SHUTTING_DOWN)) == "shutting down"
    assert broker_status(info(0, BrokerStatus.DOWN)) == "down"
    drained = info(0, BrokerStatus.UP, decommissioning=True)
    assert broker_status(drained) == "up, decommissioning"


def test_last_seen_is_now_for_a_live_broker_and_an_age_for_a_down_one() -> None:
    assert last_seen(info(0, BrokerStatus.UP), NOW + 5_000) == "now"
    down = info(1, BrokerStatus.DOWN, last_seen_ms=NOW)
    assert last_seen(down, NOW + 42_000) == "42s ago (2023-11-14T22:13:20Z)"
    assert last_seen(down, NOW + 125_000).startswith("2m 5s ago")
    assert last_seen(down, NOW + 3 * 3_600_000 + 60_000).startswith("3h 1m ago")
    assert last_seen(down, NOW + 50 * 3_600_000).startswith("2d 2h ago")
    assert last_seen(down, NOW - 1_000).startswith("0s ago")  # clocks a little apart
    assert last_seen(info(1, BrokerStatus.DOWN, last_seen_ms=None), NOW) == "not recorded yet"


def test_the_table_lists_live_and_down_brokers() -> None:
    brokers = [
        info(0, BrokerStatus.UP, rack="r0"),
        info(1, BrokerStatus.SHUTTING_DOWN),
        info(2, BrokerStatus.DOWN, last_seen_ms=NOW - 90_000),
    ]
    console = Console(width=200, record=True)
    console.print(broker_table(brokers, NOW))
    text = console.export_text()
    assert "3 brokers, 2 up" in text
    lines = {line.split()[1]: line for line in text.splitlines() if line.count("│") > 3}
    assert "up" in lines["0"]
    assert "r0" in lines["0"]
    assert "shutting down" in lines["1"]
    assert "down" in lines["2"]
    assert "1m 30s ago" in lines["2"]
