"""``BrokerInfo.listing``: the one way both admin APIs list brokers, registered or recorded."""

from __future__ import annotations

from yak.api.admin import BrokerInfo, BrokerStatus
from yak.metadata.cache import ClusterSnapshot
from yak.metadata.describe import broker_listing
from yak.metadata.models import (
    BrokerDecommission,
    BrokerLoad,
    BrokerRecord,
    BrokerRegistration,
)

NOW = 1_700_000_100_000


def _broker(broker_id: int, **fields: object) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id,
        host=f"b{broker_id}",
        port=9000 + broker_id,
        started_at_ms=1,
        **fields,  # type: ignore[arg-type]
    )


def _record(broker_id: int, **fields: object) -> BrokerRecord:
    values: dict[str, object] = {
        "broker_id": broker_id,
        "host": f"old{broker_id}",
        "port": 8000 + broker_id,
        "first_registered_ms": 10,
        "started_at_ms": 20,
        "registered": False,
        "last_seen_ms": 30,
        **fields,
    }
    return BrokerRecord.model_validate(values)


def test_registered_brokers_are_listed_by_id_with_their_state() -> None:
    snapshot = ClusterSnapshot(
        revision=3,
        brokers={2: _broker(2, rack="r2"), 0: _broker(0, shutting_down=True), 1: _broker(1)},
        decommissions={1: BrokerDecommission(broker_id=1, requested_at_ms=5)},
    )
    listed = broker_listing(snapshot, NOW)
    assert [b.broker_id for b in listed] == [0, 1, 2]
    assert [(b.status, b.shutting_down, b.decommissioning) for b in listed] == [
        (BrokerStatus.SHUTTING_DOWN, True, False),
        (BrokerStatus.UP, False, True),
        (BrokerStatus.UP, False, False),
    ]
    assert listed[2].rack == "r2"
    assert (listed[1].host, listed[1].port) == ("b1", 9001)
    # Seen now; without a record (not written yet) first registered = this registration.
    assert {(b.last_seen_ms, b.first_registered_ms, b.started_at_ms) for b in listed} == {
        (NOW, 1, 1)
    }


def test_a_broker_that_left_is_down_with_its_last_seen_time() -> None:
    snapshot = ClusterSnapshot(
        revision=5,
        brokers={1: _broker(1)},
        broker_records={
            1: _record(1, registered=True, last_seen_ms=2),
            3: _record(3, rack="r3"),
        },
    )
    up, down = broker_listing(snapshot, NOW)
    # The registration wins over its record: address and status are the live ones.
    assert (up.status, up.host, up.last_seen_ms, up.first_registered_ms) == (
        BrokerStatus.UP,
        "b1",
        NOW,
        10,
    )
    assert down == BrokerInfo(
        broker_id=3,
        host="old3",
        port=8003,
        rack="r3",
        status=BrokerStatus.DOWN,
        last_seen_ms=30,
        first_registered_ms=10,
        started_at_ms=20,
    )


def test_a_broker_whose_leaving_is_not_recorded_yet_is_down_without_a_last_seen_time() -> None:
    # The registration is gone, the controller has not closed the record yet: the record's
    # time is when it was written (perhaps days ago), not when the broker left.
    snapshot = ClusterSnapshot(revision=2, broker_records={5: _record(5, registered=True)})
    (listed,) = broker_listing(snapshot, NOW)
    assert (listed.status, listed.last_seen_ms) == (BrokerStatus.DOWN, None)


def test_a_drained_broker_without_registration_or_record_is_not_listed() -> None:
    snapshot = ClusterSnapshot(
        revision=1, decommissions={4: BrokerDecommission(broker_id=4, requested_at_ms=1)}
    )
    assert broker_listing(snapshot, NOW) == []


def test_a_down_broker_being_drained_says_so() -> None:
    snapshot = ClusterSnapshot(
        revision=1,
        decommissions={4: BrokerDecommission(broker_id=4, requested_at_ms=1)},
        broker_records={4: _record(4)},
    )
    (listed,) = broker_listing(snapshot, NOW)
    assert (listed.status, listed.decommissioning) == (BrokerStatus.DOWN, True)


def test_a_registered_brokers_load_sample_is_listed_and_judged_stale_or_not() -> None:
    def sample(age_ms: int) -> BrokerLoad:
        return BrokerLoad(
            cpu=0.75,
            memory_bytes=123,
            disk_used_ratio=0.5,
            records_per_second=2_000.0,
            sampled_at_ms=NOW - age_ms,
            publish_interval_ms=1_000,
        )

    snapshot = ClusterSnapshot(
        revision=4,
        brokers={0: _broker(0, load=sample(3_000)), 1: _broker(1, load=sample(3_001))},
        broker_records={2: _record(2), 3: _record(3)},
    )
    fresh, stale, down, _ = broker_listing(snapshot, NOW)
    assert fresh.load is not None
    assert (fresh.load.cpu, fresh.load.records_per_second, fresh.load.stale) == (
        0.75,
        2_000.0,
        False,
    )
    assert fresh.load.sampled_at_ms == NOW - 3_000
    assert stale.load is not None
    assert stale.load.stale
    assert down.load is None  # a down broker has no sample
    wire = BrokerInfo.model_validate_json(fresh.model_dump_json())
    assert wire.load == fresh.load
    older = BrokerInfo.model_validate({"broker_id": 5, "host": "h", "port": 1})
    assert older.load is None  # an older server's answer
