"""The broker record driver: keeps ``broker-records/`` in step with ``brokers/`` while this
coordinator is the active controller (its decisions: ``decisions/broker_record_rules``'s
``decide_records``).

Every coordinator, active or standby, feeds its ``BrokerSightings`` from its metadata cache
for as long as it runs (``follow``): a broker registration written or deleted, a record
deleted, a reload. During a term, ``run`` decides after each broker or broker-record event (and
once at the start of the term, which is how a standby that takes over closes what the previous
controller left open): a write per broker event, none while nothing changes.

A round's writes are one transaction that carries the term's fence plus a compare-and-swap per
record: absent, or at the ``mod_revision`` whose value equals the record the decision was based
on (read in the same round; a malformed value counts as absent, as the cache counts it). A
failed compare writes nothing; the cache then delivers the newer record (an event, so another
round) and the round decides again. A failed fence ends the term.
An etcd failure is logged and the round retried after ``retry_s``. One task per term; the
caller cancels it when the term ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from yak.clock import Clock
from yak.errors import MetadataStoreError
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import KeyKind, Keyspace, ParsedKey
from yak.metadata.models import BrokerRecord
from yak.metadata.store import (
    Compare,
    GetOp,
    GetResponse,
    KeyValue,
    MetadataStore,
    Op,
    PutOp,
)
from yak_coordinator.decisions.broker_record_rules import (
    BrokerSightings,
    RecordChange,
    decide_records,
)
from yak_coordinator.election import Term, fenced_txn

__all__ = ["BrokerRecorder"]

log = logging.getLogger(__name__)

_KINDS = (KeyKind.BROKER, KeyKind.BROKER_RECORD)


class BrokerRecorder:
    """Writes broker records during a term; remembers broker sightings all the time."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        cache: MetadataCache,
        clock: Clock,
        *,
        retry_s: float = 1.0,
    ) -> None:
        self._store = store
        self._keyspace = keyspace
        self._cache = cache
        self._clock = clock
        self._retry_s = retry_s
        self.sightings = BrokerSightings()
        #: Records written (for tests and tools).
        self.written = 0

    def follow(self) -> Callable[[], None]:
        """Start remembering sightings from the (started) cache; returns the unsubscribe."""
        snapshot = self._cache.snapshot
        now = self._clock.time_ms()
        self.sightings.loaded(snapshot.brokers, snapshot.broker_records, now)
        return self._cache.subscribe(self._seen)

    def _seen(self, key: ParsedKey | None) -> None:
        if key is not None and key.kind not in _KINDS:
            return
        snapshot, now = self._cache.snapshot, self._clock.time_ms()
        if key is None:
            self.sightings.loaded(snapshot.brokers, snapshot.broker_records, now)
            return
        assert key.broker_id is not None
        if key.kind is KeyKind.BROKER:
            registration = snapshot.brokers.get(key.broker_id)
            if registration is None:
                self.sightings.vanished(key.broker_id, now)
            else:
                self.sightings.registered(registration, now)
        elif key.broker_id not in snapshot.broker_records:
            self.sightings.forgotten(key.broker_id)

    async def run(self, term: Term) -> None:
        """Keep the records in step until cancelled or until the term ends."""
        changed = asyncio.Event()

        def on_change(key: ParsedKey | None) -> None:
            if key is None or key.kind in _KINDS:
                changed.set()

        unsubscribe = self._cache.subscribe(on_change)
        changed.set()
        try:
            while not term.ended:
                await changed.wait()
                changed.clear()
                try:
                    await self._round(term)
                except MetadataStoreError as exc:
                    log.warning("writing broker records failed (%s); retrying", exc)
                    changed.set()
                    await self._clock.sleep(self._retry_s)
        finally:
            unsubscribe()

    async def _round(self, term: Term) -> None:
        snapshot = self._cache.snapshot
        changes = decide_records(
            snapshot.broker_records,
            snapshot.brokers,
            self.sightings.sightings,
            self._clock.time_ms(),
        )
        if not changes:
            return
        keys = [self._keyspace.broker_record(c.broker_id) for c in changes]
        read = await self._store.txn([], [GetOp(key) for key in keys])
        compares: list[Compare] = []
        puts: list[Op] = []
        written: list[RecordChange] = []
        for key, change, response in zip(keys, changes, read.responses, strict=True):
            assert isinstance(response, GetResponse)
            current = response.kvs[0] if response.kvs else None
            if not _holds(current, change.before):
                continue  # stale: the cache will deliver the newer record, and decide again
            compares.append(
                Compare.absent(key)
                if current is None
                else Compare.mod_revision(key, current.mod_revision)
            )
            puts.append(PutOp(key, change.after.encode()))
            written.append(change)
        if not puts:
            return
        if not await self._fenced(compares, puts, term):
            return
        self.written += len(written)
        for change in written:
            after = change.after
            log.info(
                "broker %d %s: %s:%d, incarnation %s, data folder %s%s, last seen %d",
                change.broker_id,
                change.reason,
                after.host,
                after.port,
                after.incarnation or "-",
                after.log_dir_id or "-",
                _new_folder(change),
                after.last_seen_ms,
            )

    async def _fenced(self, compares: Sequence[Compare], ops: Sequence[Op], term: Term) -> bool:
        """One transaction guarded by the term's fence: whether it ran (when the fence failed,
        the term ends)."""
        return await fenced_txn(self._store, self._keyspace, term, compares, ops) is not None


def _new_folder(change: RecordChange) -> str:
    """A note for the log when the broker came back with another data folder id."""
    before = change.before.log_dir_id if change.before is not None else ""
    after = change.after.log_dir_id
    return " (new: its log was lost)" if before and after and before != after else ""


def _holds(current: KeyValue | None, expected: BrokerRecord | None) -> bool:
    """Whether etcd holds the record the decision was based on (a malformed value counts as
    absent, as the cache counts it: the decision then overwrites it)."""
    if current is None:
        return expected is None
    try:
        stored: BrokerRecord | None = BrokerRecord.decode(current.value)
    except ValueError:  # pydantic's ValidationError is a ValueError
        stored = None
    return stored == expected
