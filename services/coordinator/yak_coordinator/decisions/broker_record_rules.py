"""Broker records: what the cluster remembers of every broker it has known (pure decisions).

``brokers/<id>`` is on the broker's lease, so it vanishes with the broker; ``broker-records/<id>``
(``BrokerRecord``) stays until the broker is forgotten (``ClusterAdmin.forget_broker``). The
active controller keeps the records in step with the registrations, deciding with
``decide_records`` after every broker event and at the start of each term:

- a registration the record does not describe (no record, another ``incarnation`` or start
  time, another address, or a record marked not registered): the record is (re)written from
  it, ``registered`` and ``last_seen_ms`` = now; ``first_registered_ms`` is kept;
- a record marked registered whose registration is gone: it is marked not registered, with
  ``last_seen_ms`` = when a coordinator saw the registration vanish (its ``BrokerSightings``),
  or, if none saw it (no coordinator watched etcd at that moment), the last moment one saw it
  registered — never the moment of this decision, which would make a broker dead for a day
  look as if it had just left;
- a registration this coordinator saw vanish that is newer than the record (it came and went
  while no controller was active): the record is written from it, not registered;
- anything else: no write. A registered broker costs no write however long it runs, and a
  record already marked not registered is never rewritten (a standby taking over does not
  move its last-seen time).

``BrokerSightings`` is every coordinator's memory (active or standby, from its metadata cache's
events) of each broker's last registration: when it saw it and when it saw it vanish. That is
what lets a standby that takes over close a record the failed controller had no time to close
with the true moment, not the moment of the takeover. It is in memory only: a coordinator
started after a broker vanished knows nothing of that moment, and the record keeps its last
known sighting.

Pure: no I/O, no clock (times are arguments), no asyncio.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from yak.metadata.models import BrokerRecord, BrokerRegistration

__all__ = [
    "BrokerSightings",
    "RecordChange",
    "Sighting",
    "decide_record",
    "decide_records",
    "describes",
    "record_of",
]


@dataclass(frozen=True, slots=True)
class Sighting:
    """The last registration a coordinator saw for one broker id, and when."""

    registration: BrokerRegistration
    #: The last moment the registration was seen in etcd (its event, or a load that held it).
    seen_ms: int
    #: Whether it is in etcd as far as the coordinator knows.
    present: bool = True
    #: When the coordinator saw it vanish (None while present, or when it vanished unseen:
    #: while the coordinator's watch was broken).
    vanished_ms: int | None = None


class BrokerSightings:
    """A coordinator's memory of every broker registration its metadata cache showed.

    Fed with the cache's broker events (``registered``, ``vanished``), reloads (``loaded``) and
    record deletions (``forgotten``); read by ``decide_records``. Single event loop.
    """

    def __init__(self) -> None:
        self._by_id: dict[int, Sighting] = {}

    @property
    def sightings(self) -> Mapping[int, Sighting]:
        return self._by_id

    def loaded(
        self,
        registrations: Mapping[int, BrokerRegistration],
        records: Mapping[int, BrokerRecord],
        now_ms: int,
    ) -> None:
        """The cache (re)loaded: ``registrations`` are present now; one this coordinator saw
        before and is gone vanished unseen (events may have been missed); a sighting of a
        broker that is neither registered nor recorded is dropped (it was forgotten)."""
        for broker_id, sighting in list(self._by_id.items()):
            if broker_id in registrations:
                continue
            if broker_id not in records:
                del self._by_id[broker_id]
            elif sighting.present:
                self._by_id[broker_id] = Sighting(sighting.registration, sighting.seen_ms, False)
        for broker_id, registration in registrations.items():
            self._by_id[broker_id] = Sighting(registration, now_ms)

    def registered(self, registration: BrokerRegistration, now_ms: int) -> None:
        """``brokers/<id>`` was written (a registration, or an update of it)."""
        self._by_id[registration.broker_id] = Sighting(registration, now_ms)

    def vanished(self, broker_id: int, now_ms: int) -> None:
        """``brokers/<id>`` was deleted (deregistered, or its lease expired)."""
        sighting = self._by_id.get(broker_id)
        if sighting is not None and sighting.present:
            self._by_id[broker_id] = Sighting(sighting.registration, now_ms, False, now_ms)

    def forgotten(self, broker_id: int) -> None:
        """``broker-records/<id>`` was deleted: forget a sighting of a broker that is gone."""
        sighting = self._by_id.get(broker_id)
        if sighting is not None and not sighting.present:
            del self._by_id[broker_id]


@dataclass(frozen=True, slots=True)
class RecordChange:
    """Write ``after`` to ``broker-records/<id>``, which holds ``before`` (None: absent)."""

    broker_id: int
    before: BrokerRecord | None
    after: BrokerRecord
    reason: str


def describes(record: BrokerRecord, registration: BrokerRegistration) -> bool:
    """Whether ``record`` is of this very registration (same process, same address)."""
    return (
        record.incarnation == registration.incarnation
        and record.log_dir_id == registration.log_dir_id
        and record.started_at_ms == registration.started_at_ms
        and record.host == registration.host
        and record.port == registration.port
        and record.rack == registration.rack
        and record.scheme == registration.scheme
    )


def record_of(
    registration: BrokerRegistration,
    previous: BrokerRecord | None,
    *,
    registered: bool,
    last_seen_ms: int,
) -> BrokerRecord:
    """The record of ``registration``, keeping what ``previous`` knew of earlier ones (its
    first registration, and fields this version does not know)."""
    fields: dict[str, object] = {
        "host": registration.host,
        "port": registration.port,
        "rack": registration.rack,
        "scheme": registration.scheme,
        "incarnation": registration.incarnation,
        "log_dir_id": registration.log_dir_id,
        "started_at_ms": registration.started_at_ms,
        "registered": registered,
        "last_seen_ms": last_seen_ms,
    }
    base = (
        previous.model_dump()
        if previous is not None
        else {
            "broker_id": registration.broker_id,
            "first_registered_ms": registration.started_at_ms,
        }
    )
    return BrokerRecord.model_validate({**base, **fields})


def decide_record(
    record: BrokerRecord | None,
    registration: BrokerRegistration | None,
    sighting: Sighting | None,
    now_ms: int,
) -> tuple[BrokerRecord, str] | None:
    """The record one broker id should have now, and why; None when ``record`` is right."""
    if registration is not None:
        if record is not None and record.registered and describes(record, registration):
            return None
        why = "registered" if record is None else "registered again"
        return record_of(registration, record, registered=True, last_seen_ms=now_ms), why
    if (
        sighting is not None
        and not sighting.present
        and (record is None or _newer(sighting.registration, record))
    ):
        last_seen = sighting.vanished_ms if sighting.vanished_ms is not None else sighting.seen_ms
        after = record_of(sighting.registration, record, registered=False, last_seen_ms=last_seen)
        return after, "registered and left while no controller was active"
    if record is None or not record.registered:
        return None
    last_seen = record.last_seen_ms
    if sighting is not None and describes(record, sighting.registration):
        if sighting.vanished_ms is not None:
            last_seen = sighting.vanished_ms
        else:
            last_seen = max(last_seen, sighting.seen_ms)
    return record.model_copy(update={"registered": False, "last_seen_ms": last_seen}), "left"


def _newer(registration: BrokerRegistration, record: BrokerRecord) -> bool:
    """Whether ``registration`` is a later one than the record describes."""
    return not describes(record, registration) and (
        registration.started_at_ms > record.started_at_ms
    )


def decide_records(
    records: Mapping[int, BrokerRecord],
    registrations: Mapping[int, BrokerRegistration],
    sightings: Mapping[int, Sighting],
    now_ms: int,
) -> list[RecordChange]:
    """The record writes that bring ``records`` in step with ``registrations`` (for every
    broker id known to any of the three), by id."""
    changes = []
    for broker_id in sorted({*records, *registrations, *sightings}):
        before = records.get(broker_id)
        decided = decide_record(
            before, registrations.get(broker_id), sightings.get(broker_id), now_ms
        )
        if decided is not None:
            after, reason = decided
            changes.append(RecordChange(broker_id, before, after, reason))
    return changes
