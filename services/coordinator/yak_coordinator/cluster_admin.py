"""Cluster operations on the active controller: preferred leader election, broker decommission,
forgetting a broker.

- ``elect_leaders`` (Kafka's ElectLeaders, type PREFERRED): the decision per partition is
  ``partition_plan.elect_preferred_leader`` on the partition state read from etcd; the writes are
  one transaction per chunk of partitions, each key compared on its ``mod_revision`` and the
  whole fenced by the controller's term (a deposed controller writes nothing and answers
  ``NOT_CONTROLLER``). A lost compare (a leader changed the ISR meanwhile) reads and decides
  again, up to ``_CAS_ATTEMPTS`` times. Elections written count in
  ``yak_coordinator_leader_elections_total{kind="preferred"}``.
- ``decommission`` / ``recommission`` write or delete ``decommissions/<id>``, fenced likewise;
  the reconciler does the draining (``decisions/decommission.py``). Decommissioning is refused for a
  broker that is neither registered nor a replica of anything (``BROKER_NOT_AVAILABLE``) and
  when the brokers left could not hold some partition of it
  (``INVALID_REPLICATION_FACTOR``). Both are idempotent.
- ``forget_broker`` (Kafka's UnregisterBroker, for a broker gone for good) deletes
  ``broker-records/<id>`` and any ``decommissions/<id>`` in one fenced transaction that also
  requires ``brokers/<id>`` absent. Refused while the broker is registered
  (409 ``BROKER_STILL_REGISTERED``) or while a partition lists it as a replica
  (409 ``BROKER_HAS_REPLICAS``: decommission or reassign first); an id the cluster has no
  record of is 404 ``BROKER_ID_NOT_REGISTERED``.

Reads come from the metadata cache. Single event loop; decommission, recommission and forget
requests are serialised (each checks the brokers left after the others).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from yak.api.admin import BrokerForgotten, DecommissionStatus, ElectionResult
from yak.clock import Clock
from yak.errors import (
    BrokerHasReplicasError,
    BrokerIdNotRegisteredError,
    BrokerNotAvailableError,
    BrokerStillRegisteredError,
    InvalidReplicationFactorError,
    KafkaTimeoutError,
    NotControllerError,
)
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import BrokerDecommission, PartitionState
from yak.metadata.snapshot import ClusterSnapshot
from yak.metadata.store import (
    Compare,
    DeleteOp,
    GetOp,
    GetResponse,
    MetadataStore,
    Op,
    PutOp,
    TxnResult,
)
from yak_coordinator.decisions.decommission import drain_progress, eligible_brokers
from yak_coordinator.decisions.partition_plan import elect_preferred_leader, stopping_brokers
from yak_coordinator.election import Election, Term, fenced_txn
from yak_coordinator.metrics import ControllerStats

__all__ = ["ClusterAdmin"]

_CAS_ATTEMPTS = 5
_CHUNK = 100  # etcd allows 128 operations per transaction by default
_UNKNOWN = "UNKNOWN_TOPIC_OR_PARTITION"


class ClusterAdmin:
    """Preferred leader election, broker decommission and forgetting a broker; writes need
    the controller term."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        cache: MetadataCache,
        election: Election,
        clock: Clock,
        *,
        wait_s: float = 10.0,
        stats: ControllerStats | None = None,
    ) -> None:
        self._store = store
        self._keyspace = keyspace
        self._cache = cache
        self._election = election
        self._clock = clock
        self._wait_s = wait_s
        self._stats = stats if stats is not None else ControllerStats()
        # Decommissions are checked against the others (enough brokers must remain): one at a
        # time on this controller, each seeing the previous one's write in the cache.
        self._drain_lock = asyncio.Lock()

    # -- preferred leader election ------------------------------------------------------------

    async def elect_leaders(
        self, partitions: Sequence[tuple[str, int]] | None
    ) -> list[ElectionResult]:
        """Move leadership to the preferred replica of ``partitions`` (None: all of them)."""
        snapshot = self._cache.snapshot
        live_topics = {n for n, r in snapshot.topics.items() if not r.deleting}
        if partitions is None:
            wanted = sorted(tp for tp in snapshot.partitions if tp[0] in live_topics)
        else:
            wanted = sorted(set(partitions))
        results: dict[tuple[str, int], ElectionResult] = {}
        known = []
        for topic, partition in wanted:
            if topic in live_topics and (topic, partition) in snapshot.partitions:
                known.append((topic, partition))
            else:
                results[(topic, partition)] = ElectionResult(
                    topic=topic, partition=partition, leader=-1, error=_UNKNOWN
                )
        for start in range(0, len(known), _CHUNK):
            results.update(await self._elect_chunk(known[start : start + _CHUNK]))
        return [results[tp] for tp in wanted]

    async def _elect_chunk(
        self, chunk: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], ElectionResult]:
        keys = [self._keyspace.partition(t, p) for t, p in chunk]
        for _ in range(_CAS_ATTEMPTS):
            term = self._election.require_term()
            snapshot = self._cache.snapshot
            live, stopping = frozenset(snapshot.brokers), stopping_brokers(snapshot)
            log_dirs = {b: r.log_dir_id for b, r in snapshot.brokers.items()}
            read = await self._store.txn([], [GetOp(key) for key in keys])
            results: dict[tuple[str, int], ElectionResult] = {}
            compares: list[Compare] = []
            puts: list[Op] = []
            elected: list[tuple[PartitionState, PartitionState]] = []
            for (topic, partition), key, response in zip(chunk, keys, read.responses, strict=True):
                assert isinstance(response, GetResponse)
                if not response.kvs:
                    results[(topic, partition)] = ElectionResult(
                        topic=topic, partition=partition, leader=-1, error=_UNKNOWN
                    )
                    continue
                kv = response.kvs[0]
                state = PartitionState.decode(kv.value)
                decided = elect_preferred_leader(state, live, stopping, log_dirs)
                if isinstance(decided, str):
                    results[(topic, partition)] = ElectionResult(
                        topic=topic, partition=partition, leader=state.leader, error=decided
                    )
                    continue
                compares.append(Compare.mod_revision(key, kv.mod_revision))
                puts.append(PutOp(key, decided.encode()))
                elected.append((state, decided))
                results[(topic, partition)] = ElectionResult(
                    topic=topic, partition=partition, leader=decided.leader
                )
            if not puts:
                return results
            written = await self._fenced(compares, puts, term)
            if written is not None:
                for before, after in elected:
                    self._stats.on_partition_written(before, after, "preferred leader election")
                await self._cache.wait_for_revision(written.revision, self._wait_s)
                return results
        raise KafkaTimeoutError("partition states kept changing during the election; retry")

    # -- decommission ---------------------------------------------------------------------------

    def decommissions(self) -> list[DecommissionStatus]:
        """Every broker being drained, with its progress."""
        snapshot = self._cache.snapshot
        return [_status(snapshot, b) for b in sorted(snapshot.decommissions)]

    async def decommission(self, broker_id: int) -> DecommissionStatus:
        """Mark ``broker_id`` draining (see ``decisions/decommission.py``); idempotent."""
        async with self._drain_lock:
            snapshot = self._cache.snapshot
            if broker_id not in snapshot.decommissions:
                _check_can_drain(snapshot, broker_id)
                key = self._keyspace.decommission(broker_id)
                now = self._clock.time_ms()
                mark = BrokerDecommission(broker_id=broker_id, requested_at_ms=now)
                await self._write([Compare.absent(key)], [PutOp(key, mark.encode())])
        return _status(self._cache.snapshot, broker_id)

    async def recommission(self, broker_id: int) -> DecommissionStatus:
        """Stop draining ``broker_id`` (nothing moves back); idempotent."""
        key = self._keyspace.decommission(broker_id)
        async with self._drain_lock:
            if broker_id in self._cache.snapshot.decommissions:
                await self._write([], [DeleteOp(key)])
        status = _status(self._cache.snapshot, broker_id)
        return status.model_copy(update={"decommissioning": False, "requested_at_ms": None})

    # -- forgetting a broker ------------------------------------------------------------------

    async def forget_broker(self, broker_id: int) -> BrokerForgotten:
        """Delete what the cluster remembers of a broker that is gone for good."""
        async with self._drain_lock:
            snapshot = self._cache.snapshot
            _check_can_forget(snapshot, broker_id)
            record = snapshot.broker_records.get(broker_id)
            registration = self._keyspace.broker(broker_id)
            deletes: list[Op] = [
                DeleteOp(self._keyspace.broker_record(broker_id)),
                DeleteOp(self._keyspace.decommission(broker_id)),
            ]
            term = self._election.require_term()
            written = await self._fenced([Compare.absent(registration)], deletes, term)
            if written is None:
                raise BrokerStillRegisteredError(
                    f"broker {broker_id} registered again; stop it before forgetting it",
                    broker_id=broker_id,
                )
            await self._cache.wait_for_revision(written.revision, self._wait_s)
        last_seen = None if record is None else record.last_seen_ms
        return BrokerForgotten(broker_id=broker_id, last_seen_ms=last_seen)

    # -- internals ------------------------------------------------------------------------------

    async def _write(self, compares: list[Compare], ops: list[Op]) -> None:
        """One fenced transaction, then wait until the cache shows it (a lost compare means
        a concurrent request did the same: nothing to do)."""
        written = await self._fenced(compares, ops, self._election.require_term())
        if written is not None:
            await self._cache.wait_for_revision(written.revision, self._wait_s)

    async def _fenced(self, compares: list[Compare], ops: list[Op], term: Term) -> TxnResult | None:
        """Run ``ops`` if the term's fence and ``compares`` hold; None if a compare failed.

        Raises ``NotControllerError`` (and ends the term) when the fence failed."""
        result = await fenced_txn(self._store, self._keyspace, term, compares, ops)
        if result is None and term.ended:
            raise NotControllerError("this coordinator is no longer the active controller")
        return result


def _check_can_drain(snapshot: ClusterSnapshot, broker_id: int) -> None:
    hosted = [s for s in snapshot.partitions.values() if broker_id in s.replicas]
    if broker_id not in snapshot.brokers and not hosted:
        raise BrokerNotAvailableError(
            f"broker {broker_id} is not registered and holds no replica", broker_id=broker_id
        )
    remaining = {b for b in eligible_brokers(snapshot) if b != broker_id}
    for state in hosted:
        record = snapshot.topics.get(state.topic)
        if record is None or record.deleting:
            continue
        if len(state.target_replicas) > len(remaining):
            raise InvalidReplicationFactorError(
                f"cannot drain broker {broker_id}: {state.topic}-{state.partition} has "
                f"{len(state.target_replicas)} replicas and only {len(remaining)} other "
                f"brokers can take replicas ({sorted(remaining)})",
                broker_id=broker_id,
                topic=state.topic,
            )


def _check_can_forget(snapshot: ClusterSnapshot, broker_id: int) -> None:
    if broker_id in snapshot.brokers:
        raise BrokerStillRegisteredError(
            f"broker {broker_id} is registered (running); stop it before forgetting it",
            broker_id=broker_id,
        )
    hosted = sorted(
        f"{s.topic}-{s.partition}" for s in snapshot.partitions.values() if broker_id in s.replicas
    )
    if hosted:
        shown = ", ".join(hosted[:5]) + (f" and {len(hosted) - 5} more" if len(hosted) > 5 else "")
        raise BrokerHasReplicasError(
            f"broker {broker_id} is still a replica of {len(hosted)} partitions ({shown}); "
            f"move them off it first (yak brokers decommission {broker_id}, or a reassignment)",
            broker_id=broker_id,
            partitions=len(hosted),
        )
    if broker_id not in snapshot.broker_records and broker_id not in snapshot.decommissions:
        raise BrokerIdNotRegisteredError(
            f"the cluster has no record of broker {broker_id}", broker_id=broker_id
        )


def _status(snapshot: ClusterSnapshot, broker_id: int) -> DecommissionStatus:
    progress = drain_progress(snapshot, broker_id)
    mark = snapshot.decommissions.get(broker_id)
    return DecommissionStatus(
        broker_id=broker_id,
        decommissioning=mark is not None,
        alive=progress.alive,
        requested_at_ms=None if mark is None else mark.requested_at_ms,
        leaders=progress.leaders,
        replicas=progress.replicas,
        moving=progress.moving,
        blocked=list(progress.blocked),
        done=progress.done,
    )
