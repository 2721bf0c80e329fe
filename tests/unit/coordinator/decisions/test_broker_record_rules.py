"""Broker records as a pure function of records, registrations and sightings: a write per
broker event, none per look, and a last-seen time no takeover moves."""

from __future__ import annotations

from yak.metadata.models import BrokerRecord, BrokerRegistration
from yak_coordinator.decisions.broker_record_rules import (
    BrokerSightings,
    RecordChange,
    Sighting,
    decide_record,
    decide_records,
)

T0 = 1_700_000_000_000


def reg(
    broker_id: int = 1, started: int = T0, incarnation: str = "a", **kw: object
) -> BrokerRegistration:
    values: dict[str, object] = {
        "broker_id": broker_id,
        "host": "127.0.0.1",
        "port": 9000 + broker_id,
        "started_at_ms": started,
        "incarnation": incarnation,
        **kw,
    }
    return BrokerRegistration.model_validate(values)


def closed(record: BrokerRecord, last_seen_ms: int) -> BrokerRecord:
    return record.model_copy(update={"registered": False, "last_seen_ms": last_seen_ms})


def only(changes: list[RecordChange]) -> BrokerRecord:
    (change,) = changes
    return change.after


def test_a_new_registration_is_recorded_once() -> None:
    registration = reg(rack="r1")
    record = only(decide_records({}, {1: registration}, {}, T0 + 5))
    assert record == BrokerRecord(
        broker_id=1,
        host="127.0.0.1",
        port=9001,
        rack="r1",
        first_registered_ms=T0,
        incarnation="a",
        started_at_ms=T0,
        registered=True,
        last_seen_ms=T0 + 5,
    )
    # As long as it stays registered, nothing more is written, however late it is asked.
    assert decide_records({1: record}, {1: registration}, {}, T0 + 86_400_000) == []
    # A controlled shutdown updates the registration but not what the record describes.
    stopping = registration.model_copy(update={"shutting_down": True})
    assert decide_records({1: record}, {1: stopping}, {}, T0 + 10) == []


def test_a_registration_that_vanishes_is_closed_at_the_moment_it_was_seen_to_vanish() -> None:
    registration = reg()
    record = only(decide_records({}, {1: registration}, {}, T0 + 5))
    sightings = BrokerSightings()
    sightings.registered(registration, T0 + 5)
    sightings.vanished(1, T0 + 60_000)
    # The controller decides a little later (or a standby much later): the sighting's time.
    after = only(decide_records({1: record}, {}, sightings.sightings, T0 + 90_000))
    assert after == closed(record, T0 + 60_000)
    # Closed for good: no later decision moves it.
    assert decide_records({1: after}, {}, sightings.sightings, T0 + 10**9) == []
    assert decide_records({1: after}, {}, {}, T0 + 10**9) == []


def test_a_restart_keeps_the_first_registration_and_fields_from_newer_versions() -> None:
    first = only(decide_records({}, {1: reg()}, {}, T0 + 1))
    # A newer version's field (issue 21 item 2 will add the like of it) survives a rewrite.
    newer = BrokerRecord.model_validate({**first.model_dump(), "directory_id": "d-1"})
    gone = closed(newer, T0 + 100)
    again = reg(started=T0 + 500, incarnation="b", host="10.0.0.2")
    record = only(decide_records({1: gone}, {1: again}, {}, T0 + 600))
    assert (record.first_registered_ms, record.started_at_ms, record.incarnation) == (
        T0,
        T0 + 500,
        "b",
    )
    assert (record.host, record.registered, record.last_seen_ms) == ("10.0.0.2", True, T0 + 600)
    assert record.model_dump()["directory_id"] == "d-1"
    assert b'"directory_id":"d-1"' in record.encode()
    # A restarted process seen before its old record was closed: rewritten, registered.
    assert only(decide_records({1: newer}, {1: again}, {}, T0 + 600)).incarnation == "b"


def test_a_standby_that_did_not_see_the_vanishing_keeps_the_last_known_sighting() -> None:
    record = only(decide_records({}, {1: reg()}, {}, T0 + 5))
    # Started after the broker vanished: no sighting at all. Not "now", but what is known.
    assert only(decide_records({1: record}, {}, {}, T0 + 10**7)) == closed(record, T0 + 5)
    # Saw it registered at T0 + 900 (a load), then lost its watch and reloaded without it.
    sightings = BrokerSightings()
    sightings.loaded({1: reg()}, {1: record}, T0 + 900)
    sightings.loaded({}, {1: record}, T0 + 5_000)
    assert sightings.sightings[1] == Sighting(reg(), T0 + 900, present=False)
    decided = decide_record(record, None, sightings.sightings[1], T0 + 10**7)
    assert decided == (closed(record, T0 + 900), "left")


def test_a_broker_that_came_and_went_between_controllers_is_recorded() -> None:
    old = closed(only(decide_records({}, {1: reg()}, {}, T0 + 5)), T0 + 50)
    newer = reg(started=T0 + 1_000, incarnation="b")
    sightings = BrokerSightings()
    sightings.registered(newer, T0 + 1_001)
    sightings.registered(reg(broker_id=2), T0 + 1_002)
    sightings.vanished(1, T0 + 2_000)
    sightings.vanished(2, T0 + 2_001)
    changes = decide_records({1: old}, {}, sightings.sightings, T0 + 9_000)
    assert [(c.broker_id, c.before) for c in changes] == [(1, old), (2, None)]
    one, two = (c.after for c in changes)
    assert (one.incarnation, one.registered, one.last_seen_ms, one.first_registered_ms) == (
        "b",
        False,
        T0 + 2_000,
        T0,
    )
    assert (two.registered, two.last_seen_ms, two.first_registered_ms) == (False, T0 + 2_001, T0)
    # A sighting older than the record (the record describes a later process) changes nothing.
    later = closed(
        only(decide_records({}, {1: reg(started=T0 + 5_000, incarnation="c")}, {}, 1)), 7
    )
    assert decide_records({1: later}, {}, {1: sightings.sightings[1]}, T0 + 9_000) == []


def test_forgotten_brokers_are_not_brought_back_by_old_sightings() -> None:
    sightings = BrokerSightings()
    sightings.registered(reg(), T0)
    sightings.vanished(1, T0 + 10)
    sightings.forgotten(1)
    assert decide_records({}, {}, sightings.sightings, T0 + 20) == []
    # Forgotten while this coordinator's watch was broken: the reload drops the sighting too.
    sightings.registered(reg(broker_id=2), T0)
    sightings.vanished(2, T0 + 10)
    sightings.loaded({}, {}, T0 + 30)
    assert sightings.sightings == {}
    # A registered broker's sighting is not dropped by a record deletion.
    sightings.registered(reg(broker_id=3), T0)
    sightings.forgotten(3)
    assert sightings.sightings[3].present


def test_a_vanishing_not_seen_registered_is_ignored() -> None:
    sightings = BrokerSightings()
    sightings.vanished(4, T0)
    assert sightings.sightings == {}
