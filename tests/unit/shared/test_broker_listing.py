"""``BrokerInfo.listing``: the one way both admin APIs list brokers."""

from __future__ import annotations

from yak.api.admin import BrokerInfo
from yak.metadata.cache import ClusterSnapshot
from yak.metadata.models import BrokerDecommission, BrokerRegistration


def _broker(broker_id: int, **fields: object) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id,
        host=f"b{broker_id}",
        port=9000 + broker_id,
        started_at_ms=1,
        **fields,  # type: ignore[arg-type]
    )


def test_brokers_are_listed_by_id_with_their_state() -> None:
    snapshot = ClusterSnapshot(
        revision=3,
        brokers={2: _broker(2, rack="r2"), 0: _broker(0, shutting_down=True), 1: _broker(1)},
        decommissions={1: BrokerDecommission(broker_id=1, requested_at_ms=5)},
    )
    listed = BrokerInfo.listing(snapshot)
    assert [b.broker_id for b in listed] == [0, 1, 2]
    assert [(b.shutting_down, b.decommissioning) for b in listed] == [
        (True, False),
        (False, True),
        (False, False),
    ]
    assert listed[2].rack == "r2"
    assert (listed[1].host, listed[1].port) == ("b1", 9001)


def test_a_drained_broker_that_is_down_is_not_listed() -> None:
    snapshot = ClusterSnapshot(
        revision=1, decommissions={4: BrokerDecommission(broker_id=4, requested_at_ms=1)}
    )
    assert BrokerInfo.listing(snapshot) == []
