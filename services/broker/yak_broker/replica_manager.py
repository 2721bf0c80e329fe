"""The partitions this broker hosts and leads, and their logs' lifecycle from the metadata.

``ReplicaManager.apply(snapshot)`` carries out ``plan_replicas``: deletes the local logs the plan
names (topic gone or deleting, topic id changed, reassigned away), then creates or refreshes
every replica the metadata assigns to this broker — writing the topic id into the folder
(``partition_metadata``) *before* the log is created, and updating the log config when the
topic's configs change. ``run`` applies the latest snapshot whenever the metadata cache reports
a topic or partition change (an event set by the cache's ``on_change``; no polling).

Leadership is read from the *current* snapshot on every request (``leader``), so a new leader
epoch applies at once; the hosted replica must also carry the topic's current id, so a
re-created topic is never served from the old folder even before ``apply`` wiped it.

High watermark, until replication exists (a later issue): the leader is the only replica that
receives data, so it sets the high watermark to its log end offset after every append and when
it becomes leader; followers keep their logs untouched and fetch nothing.

Single event loop: requests and ``apply`` interleave only at awaits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from yak.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from yak.metadata.cache import ClusterSnapshot
from yak.metadata.keyspace import KeyKind, ParsedKey
from yak.metadata.models import PartitionState
from yak_broker.fetch_waiter import FetchWaiters
from yak_broker.partition_metadata import read_topic_id, write_topic_id
from yak_broker.replica_plan import DesiredReplica, plan_replicas
from yak_broker.storage.group_commit import GroupCommitter
from yak_broker.storage.log import Log
from yak_broker.storage.log_manager import LogManager, TopicPartition

__all__ = ["Replica", "ReplicaManager"]

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class Replica:
    """A partition replica hosted here: its log and what the metadata last said about it."""

    tp: TopicPartition
    topic_id: str
    committer: GroupCommitter
    state: PartitionState
    min_insync_replicas: int = 1

    @property
    def log(self) -> Log:
        return self.committer.log


class ReplicaManager:
    """Hosts this broker's replicas; see the module doc."""

    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        snapshot: Callable[[], ClusterSnapshot],
        waiters: FetchWaiters[TopicPartition],
    ) -> None:
        self.broker_id = broker_id
        self._logs = logs
        self._snapshot = snapshot
        self.waiters = waiters
        self._replicas: dict[TopicPartition, Replica] = {}
        self._local_ids: dict[TopicPartition, str | None] = {}
        self._changed = asyncio.Event()

    @property
    def replicas(self) -> Mapping[TopicPartition, Replica]:
        return MappingProxyType(self._replicas)

    def load_local(self) -> None:
        """Learn the topic ids of the logs the log manager loaded from disk."""
        for tp, committer in self._logs.logs.items():
            self._local_ids[tp] = read_topic_id(committer.log.directory)

    # --- requests --------------------------------------------------------------------------

    def leader(self, tp: TopicPartition) -> tuple[Replica, PartitionState]:
        """The replica of ``tp`` if this broker leads it now, with its current state.

        Raises UnknownTopicOrPartitionError or NotLeaderOrFollowerError (details: leader,
        leader_epoch, and leader_url when the leader is registered).
        """
        snapshot = self._snapshot()
        record = snapshot.topics.get(tp.topic)
        state = snapshot.partitions.get((tp.topic, tp.partition))
        if record is None or record.deleting or state is None:
            raise UnknownTopicOrPartitionError(
                f"unknown topic or partition {tp.dir_name}", topic=tp.topic, partition=tp.partition
            )
        replica = self._replicas.get(tp)
        if state.leader != self.broker_id:
            raise _not_leader(tp, state, snapshot)
        if replica is None or replica.topic_id != record.topic_id:
            # The metadata names us leader but ``apply`` has not caught up yet: retriable.
            raise _not_leader(tp, state, snapshot, "is not ready on this broker yet")
        return replica, state

    def advance_high_watermark(self, replica: Replica, offset: int) -> None:
        """Make offsets below ``offset`` visible to consumers and wake their fetches.

        The sole replica's appends are committed at once (or at their fsync, in sync mode);
        the high watermark never moves back nor past the log end offset.
        """
        log = replica.log
        if offset > log.high_watermark:
            log.update_high_watermark(offset)
            self.waiters.notify(replica.tp)

    # --- metadata --------------------------------------------------------------------------

    def on_metadata_change(self, _snapshot: ClusterSnapshot, parsed: ParsedKey) -> None:
        """``MetadataCache`` callback: schedule an ``apply`` for topic/partition changes."""
        if parsed.kind in (KeyKind.TOPIC, KeyKind.PARTITION):
            self._changed.set()

    async def run(self) -> None:
        """Apply the latest snapshot after each change, until cancelled."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                await self.apply(self._snapshot())
            except Exception:
                _log.exception("applying metadata failed; retrying on the next change")

    async def apply(self, snapshot: ClusterSnapshot) -> None:
        """Bring the hosted replicas in line with ``snapshot``."""
        plan = plan_replicas(snapshot, self.broker_id, self._local_ids)
        for tp, reason in plan.delete:
            _log.info("deleting the local log of %s: %s", tp.dir_name, reason)
            self._replicas.pop(tp, None)
            self._local_ids.pop(tp, None)
            await self._logs.delete(tp)
            self.waiters.notify(tp)
        wanted = set()
        for desired in plan.host:
            wanted.add(desired.tp)
            self._host(desired)
        for tp in set(self._replicas) - wanted:  # e.g. the partition key vanished: stop serving
            del self._replicas[tp]
            self.waiters.notify(tp)

    def _host(self, desired: DesiredReplica) -> None:
        tp = desired.tp
        if tp not in self._local_ids:
            write_topic_id(self._logs.data_dir / tp.dir_name, desired.topic_id)
            self._local_ids[tp] = desired.topic_id
            _log.info("created the log of %s (topic id %s)", tp.dir_name, desired.topic_id)
        elif self._local_ids[tp] is None:
            write_topic_id(self._logs.data_dir / tp.dir_name, desired.topic_id)
            self._local_ids[tp] = desired.topic_id
        committer = self._logs.get_or_create(tp, desired.config)
        replica = self._replicas.get(tp)
        if replica is None:
            replica = Replica(
                tp, desired.topic_id, committer, desired.state, desired.min_insync_replicas
            )
            self._replicas[tp] = replica
        previous = replica.state
        replica.state = desired.state
        replica.min_insync_replicas = desired.min_insync_replicas
        if desired.state.leader == self.broker_id:
            # The sole replica: whatever it holds is committed (it survived a restart, or was
            # acknowledged while it led before).
            self.advance_high_watermark(replica, replica.log.log_end_offset)
        if (previous.leader, previous.leader_epoch) != (
            desired.state.leader,
            desired.state.leader_epoch,
        ):
            self.waiters.notify(tp)  # waiting fetches re-check leadership


def _not_leader(
    tp: TopicPartition,
    state: PartitionState,
    snapshot: ClusterSnapshot,
    why: str = "is led by another broker",
) -> NotLeaderOrFollowerError:
    details: dict[str, object] = {
        "topic": tp.topic,
        "partition": tp.partition,
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
    }
    leader = snapshot.brokers.get(state.leader)
    if leader is not None:
        details["leader_url"] = leader.url
    return NotLeaderOrFollowerError(
        f"partition {tp.dir_name} {why} (leader {state.leader}, epoch {state.leader_epoch})",
        **details,
    )
