"""Topic administration on the active controller: create, delete, alter configs, add partitions.

Each write validates first (Kafka's error names: ``INVALID_TOPIC_EXCEPTION``,
``INVALID_PARTITIONS``, ``INVALID_REPLICATION_FACTOR``, ``INVALID_CONFIG``), then makes exactly
one etcd transaction on the topic record, fenced by the controller epoch: create-if-absent for
a new topic (race-safe: ``TOPIC_ALREADY_EXISTS``), compare-and-swap on the record's
``mod_revision`` for changes. A partition reassignment (``decisions/reassignment.py``) is the
one write to a partition state: a compare-and-swap on its ``mod_revision``, also fenced. Nothing
else is written here: the reconciler (same process) creates partition states, elects leaders,
completes reassignments and removes deleted topics, so an operation interrupted by a failover
is finished by the next controller. A write then waits (at most ``wait_s``) until the cache
shows the reconciler's work, so the answer describes the result.

Reads come from the metadata cache. Single event loop; methods may run concurrently (the
transactions serialise conflicting writes).
"""

from __future__ import annotations

import base64
import contextlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from yak.api.admin import MAX_PARTITIONS
from yak.clock import Clock
from yak.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    KafkaTimeoutError,
    NotControllerError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import PartitionState, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot
from yak.metadata.store import Compare, GetOp, GetResponse, MetadataStore, PutOp
from yak.names import validate_topic_name
from yak.topic_config import CATALOGUE, validate_min_insync_replicas, validate_topic_configs
from yak_coordinator.decisions.reassignment import (
    cancel_reassignment,
    start_reassignment,
    validate_target,
)
from yak_coordinator.decisions.share_group_rules import (
    check_user_may_change,
    check_user_topic_name,
)
from yak_coordinator.election import Election

__all__ = ["TopicAdmin", "TopicView"]

_CAS_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class TopicView:
    """A topic record and the partition states the cache holds for it."""

    record: TopicRecord
    partitions: tuple[PartitionState, ...]


def _new_topic_id() -> str:
    """Kafka's topic id format: a random UUID in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _check_partitions(count: int) -> None:
    if not 1 <= count <= MAX_PARTITIONS:
        raise InvalidPartitionsError(
            f"number of partitions must be between 1 and {MAX_PARTITIONS}, got {count}"
        )


def _placeable(snapshot: ClusterSnapshot) -> int:
    """How many live brokers may get new replicas (not being decommissioned)."""
    return sum(1 for b in snapshot.brokers if b not in snapshot.draining)


def _check_replication_factor(factor: int, live_brokers: int) -> None:
    if factor < 1:
        raise InvalidReplicationFactorError(f"replication factor must be at least 1, got {factor}")
    if factor > live_brokers:
        raise InvalidReplicationFactorError(
            f"replication factor {factor} is larger than the number of live brokers "
            f"({live_brokers})"
        )


class TopicAdmin:
    """The admin operations on topics; writes need this coordinator to be the controller."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        cache: MetadataCache,
        election: Election,
        clock: Clock,
        *,
        default_replication_factor: int = 1,
        wait_s: float = 10.0,
    ) -> None:
        self._store = store
        self._keyspace = keyspace
        self._cache = cache
        self._election = election
        self._clock = clock
        self._default_rf = default_replication_factor
        self._wait_s = wait_s

    # -- reads ------------------------------------------------------------------------------------

    @property
    def snapshot(self) -> ClusterSnapshot:
        return self._cache.snapshot

    def list_topics(self) -> list[TopicRecord]:
        topics = self._cache.snapshot.topics
        return [topics[name] for name in sorted(topics)]

    def describe_topic(self, name: str) -> TopicView:
        return self._view(self._cache.snapshot, validate_topic_name(name))

    # -- writes -----------------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int | None,
        configs: Mapping[str, str],
        *,
        internal: bool = False,
    ) -> TopicView:
        """Validate and record a new topic; wait until its partitions have leaders assigned.

        Names under the reserved ``__yak_`` prefix are refused (``INVALID_TOPIC_EXCEPTION``)
        unless ``internal``: the coordinator's own internal topics, created the same way."""
        if internal:
            validate_topic_name(name)
        else:
            check_user_topic_name(name)
        _check_partitions(partitions)
        factor = self._default_rf if replication_factor is None else replication_factor
        _check_replication_factor(factor, _placeable(self._cache.snapshot))
        normalised = validate_topic_configs(configs)
        validate_min_insync_replicas(normalised, factor)
        record = TopicRecord(
            name=name,
            topic_id=_new_topic_id(),
            partitions=partitions,
            replication_factor=factor,
            configs=normalised,
            created_at_ms=self._clock.time_ms(),
        )
        key = self._keyspace.topic(name)
        if not await self._write(key, [Compare.absent(key)], record):
            raise TopicAlreadyExistsError(f"topic {name!r} already exists", topic=name)
        return await self._wait_partitions(name, partitions)

    async def delete_topic(self, name: str) -> bool:
        """Mark the topic for deletion; True once the controller has removed it."""
        check_user_may_change(name, "deleted")
        await self._update(name, lambda record: record.model_copy(update={"deleting": True}))
        with contextlib.suppress(TimeoutError):
            await self._cache.wait_for(lambda s: name not in s.topics, self._wait_s)
            return True
        return False

    async def alter_configs(
        self, name: str, set_configs: Mapping[str, str], delete_configs: Sequence[str]
    ) -> TopicView:
        """Set and remove config overrides of a topic (the result is validated as a whole)."""
        check_user_may_change(name, "altered")
        updates = validate_topic_configs(set_configs)
        for config in delete_configs:
            if config not in CATALOGUE:
                raise InvalidConfigError(f"unknown topic config {config!r}", config=config)

        def change(record: TopicRecord) -> TopicRecord:
            merged = {k: v for k, v in record.configs.items() if k not in delete_configs}
            merged.update(updates)
            validate_min_insync_replicas(merged, record.replication_factor)
            return record.model_copy(update={"configs": merged})

        await self._update(name, change)
        return self._view(self._cache.snapshot, name)

    async def create_partitions(self, name: str, count: int) -> TopicView:
        """Raise the partition count of a topic to ``count``; decreases are refused."""
        check_user_may_change(name, "given more partitions")
        _check_partitions(count)

        def change(record: TopicRecord) -> TopicRecord:
            if count <= record.partitions:
                raise InvalidPartitionsError(
                    f"topic {name!r} has {record.partitions} partitions; the count can only "
                    f"grow (asked for {count})",
                    topic=name,
                )
            _check_replication_factor(record.replication_factor, _placeable(self._cache.snapshot))
            return record.model_copy(update={"partitions": count})

        await self._update(name, change)
        return await self._wait_partitions(name, count)

    def reassignments(self) -> list[PartitionState]:
        snapshot = self._cache.snapshot
        return [state for _, state in sorted(snapshot.partitions.items()) if state.reassigning]

    async def reassign_partition(
        self, name: str, partition: int, replicas: Sequence[int] | None
    ) -> PartitionState:
        """Start moving a partition to ``replicas``, or cancel its move (None).

        Kafka's AlterPartitionReassignments; the steps are in ``reassignment``'s module doc.
        The partition state is written with a compare-and-swap on its ``mod_revision``, fenced
        by the controller epoch; ``reconcile`` completes the move once the target replicas are
        in sync. Cancelling a partition that is not moving writes nothing and returns its state.
        """
        missing = UnknownTopicOrPartitionError(
            f"partition {name}-{partition} does not exist", topic=name, partition=partition
        )
        if partition < 0:
            raise missing
        key = self._keyspace.partition(validate_topic_name(name), partition)
        for _ in range(_CAS_ATTEMPTS):
            self._election.require_term()
            kv = await self._store.get(key)
            snapshot = self._cache.snapshot
            record = snapshot.topics.get(name)
            if kv is None or record is None or record.deleting:
                raise missing
            state = PartitionState.decode(kv.value)
            if replicas is None:
                moved = cancel_reassignment(state)
                if moved is None:
                    return state
            else:
                target = validate_target(
                    replicas, snapshot.brokers, record.configs, draining=snapshot.draining
                )
                moved = start_reassignment(state, target)
            if await self._put_if(
                key, Compare.mod_revision(key, kv.mod_revision), value=moved.encode()
            ):
                return moved
        raise KafkaTimeoutError(f"partition {name}-{partition} kept changing; retry", topic=name)

    # -- internals --------------------------------------------------------------------------------

    def _view(self, snapshot: ClusterSnapshot, name: str) -> TopicView:
        record = snapshot.topics.get(name)
        if record is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist", topic=name)
        return TopicView(record, tuple(snapshot.partitions_of(name)))

    async def _update(self, name: str, change: Callable[[TopicRecord], TopicRecord]) -> None:
        """Read-modify-write of a topic record, compare-and-swap on its mod_revision."""
        key = self._keyspace.topic(validate_topic_name(name))
        for _ in range(_CAS_ATTEMPTS):
            self._election.require_term()
            kv = await self._store.get(key)
            if kv is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist", topic=name)
            record = TopicRecord.decode(kv.value)
            if record.deleting:
                raise UnknownTopicOrPartitionError(f"topic {name!r} is being deleted", topic=name)
            if await self._write(key, [Compare.mod_revision(key, kv.mod_revision)], change(record)):
                return
        raise KafkaTimeoutError(f"topic {name!r} kept changing concurrently; retry", topic=name)

    async def _write(self, key: str, compares: list[Compare], record: TopicRecord) -> bool:
        """Put ``record`` if the fence and ``compares`` hold; whether it was written."""
        return await self._put_if(key, *compares, value=record.encode())

    async def _put_if(self, key: str, *compares: Compare, value: bytes) -> bool:
        """Put ``value`` at ``key`` if the fence and ``compares`` hold; whether it was written.

        Raises ``NotControllerError`` (and ends the term) when the fence failed.
        """
        term = self._election.require_term()
        result = await self._store.txn(
            [term.fence, *compares],
            [PutOp(key, value)],
            [GetOp(self._keyspace.controller)],
        )
        if result.succeeded:
            await self._cache.wait_for_revision(result.revision, self._wait_s)
            return True
        controller = result.responses[0]
        assert isinstance(controller, GetResponse)
        if not controller.kvs or not term.fence.holds(controller.kvs[0]):
            term.end("another coordinator holds the controller key")
            raise NotControllerError("this coordinator is no longer the active controller")
        return False

    async def _wait_partitions(self, name: str, count: int) -> TopicView:
        def ready(snapshot: ClusterSnapshot) -> bool:
            return len(snapshot.partitions_of(name)) >= count or name not in snapshot.topics

        with contextlib.suppress(TimeoutError):
            await self._cache.wait_for(ready, self._wait_s)
        return self._view(self._cache.snapshot, name)
