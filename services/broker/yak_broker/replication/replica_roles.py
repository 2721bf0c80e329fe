"""The roles of the replicas this broker hosts: leader, follower, none or lost, and the
transitions between them (docs/replication.md).

Apart from ``replica_manager`` because it is what a role change does to one replica, whoever
decides it: ``ReplicaManager`` (which inherits ``ReplicaRoles``, so its request path calls these
methods as its own, with no indirection) decides when, from the metadata pass and the requests.

Roles (docs/replication.md). For each hosted replica the metadata names a role:

- **leader** (``state.leader`` is this broker): a ``LeaderPartition`` machine, created when the
  broker becomes leader of a new leader epoch and fed every later state of that epoch. The new
  epoch is stamped into the log's epoch cache first, for a whole batch of partitions at once
  (``ReplicaManager._stamp_epochs``: the epoch files are written on the log manager's I/O
  threads, so a failover or a restart that hands this broker thousands of leaderships does not
  hold the loop for one fsync'd write each); a partition whose write failed does not lead until
  a later pass wrote it. It is told of each local append and each follower
  fetch, and ticked every ``replica.lag.time.max.ms / 2``; its outputs are carried out here:
  a moved high watermark wakes consumer fetches and acks=all producers (``hw_waiters``), an
  ISR proposal is written to etcd by compare-and-swap (``isr_writer``);
- **follower** (listed in ``replicas``, another broker leads): a ``FollowerPartition`` in the
  fetch session with that leader (``ReplicaFetcherManager``), re-created on every new leader
  epoch so that it first finds the divergence point and truncates;
- **none** (no leader): the log is kept and nothing fetches.
- **damaged** (a read met bit rot in a sealed segment: ``ReplicaManager.report_damage``): a
  leader gives its leadership up first, recording its own ISR entry under
  ``DAMAGED_LOG_DIR`` + its folder id, so that it is **lost** below for the controller; when
  it next starts following it truncates to before the damaged batch and fetches the rest
  again, and the leader records its real folder id when it rejoins the ISR.
- **lost** (the state names this broker leader, but its ISR entry records another data folder
  than this broker's ``log_dir_id``: the log it was in sync with was lost, e.g. the broker
  restarted on an empty disk before the controller noticed): it neither leads nor follows,
  and requests for the partition are answered ``NOT_LEADER_OR_FOLLOWER`` until the controller
  elects another leader — leading the empty log would make the followers truncate to it
  (docs/replication.md, "Empty-disk restarts").

Losing leadership fails the partition's waiting acks=all producers with
``NOT_LEADER_OR_FOLLOWER``; the batches may still commit under the new leader (or be
truncated): the producer retries and idempotence dedupes.

Single event loop, as the replica manager's: a transition interleaves with requests only at
the awaits of the metadata pass around it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from yak.errors import NotLeaderOrFollowerError
from yak.metadata.models import NO_LEADER, PartitionState
from yak.types import TopicPartition
from yak_broker.metrics import BrokerTopicStats
from yak_broker.replication.delayed_produce import HighWatermarkWaiters
from yak_broker.replication.fetch_session_cache import FetchSessionCache
from yak_broker.replication.fetch_waiter import FetchWaiters
from yak_broker.replication.partition_metadata import write_topic_id
from yak_broker.replication.replica_fetcher import ReplicaFetcherManager
from yak_broker.replication.state.follower_partition import FollowerPartition
from yak_broker.replication.state.leader_partition import LeaderPartition
from yak_broker.replication.state.messages import AlterIsr, HighWatermarkAdvanced, LeaderOutput
from yak_broker.replication.state.replica_plan import DesiredReplica
from yak_broker.storage.group_commit import GroupCommitter
from yak_broker.storage.log import Log
from yak_broker.storage.log_manager import LogManager

__all__ = ["DAMAGED_LOG_DIR", "AlterIsrWriter", "Replica", "ReplicaRoles"]

#: The replica manager's logger: these lines have always been its own (docs/chaos.md).
_log = logging.getLogger("yak_broker.replication.replica_manager")

#: Prefix of the data folder id a leader records for itself in the ISR when its log holds a
#: damaged batch (``ReplicaManager.report_damage``): the controller then counts that log as
#: lost for the partition and elects another in-sync replica.
DAMAGED_LOG_DIR = "damaged:"

#: Writes an ISR proposal to the metadata store; the committed state, or None if it lost.
AlterIsrWriter = Callable[[AlterIsr], Awaitable[PartitionState | None]]


@dataclass(slots=True)
class Replica:
    """A partition replica hosted here: its log and what the metadata last said about it."""

    tp: TopicPartition
    topic_id: str
    committer: GroupCommitter
    state: PartitionState
    min_insync_replicas: int = 1
    leader: LeaderPartition | None = None
    follower: FollowerPartition | None = None

    @property
    def log(self) -> Log:
        return self.committer.log


class ReplicaRoles:
    """The role transitions of ``ReplicaManager``'s replicas (see the module doc); the state
    below is the manager's, set by its ``__init__``."""

    broker_id: int
    stats: BrokerTopicStats
    waiters: FetchWaiters[TopicPartition]
    replica_waiters: FetchWaiters[TopicPartition]
    fetch_sessions: FetchSessionCache
    hw_waiters: HighWatermarkWaiters[TopicPartition]
    now_ms: Callable[[], int]
    replica_lag_time_max_ms: int
    fetchers: ReplicaFetcherManager
    alter_isr_writer: AlterIsrWriter | None
    _logs: LogManager
    _log_dir_id: str
    _replicas: dict[TopicPartition, Replica]
    _local_ids: dict[TopicPartition, str | None]
    _proposals: set[asyncio.Task[None]]
    _damaged: dict[TopicPartition, int]

    def _wake_followers(self, tp: TopicPartition) -> None:
        self.replica_waiters.notify(tp)
        self.fetch_sessions.notify((tp.topic, tp.partition))

    def _carry_out(self, replica: Replica, outputs: Iterable[LeaderOutput]) -> None:
        for output in outputs:
            if isinstance(output, HighWatermarkAdvanced):
                self.waiters.notify(replica.tp)
                # Followers learn it at their session's next answer (not woken for it).
                self.fetch_sessions.mark((replica.tp.topic, replica.tp.partition))
                self.hw_waiters.advance(replica.tp, output.high_watermark)
            elif isinstance(output, AlterIsr):
                self._propose(replica, output)

    def _propose(self, replica: Replica, proposal: AlterIsr) -> None:
        writer = self.alter_isr_writer
        machine = replica.leader
        if writer is None or machine is None:
            return

        async def write() -> None:
            try:
                committed = await writer(proposal)
            except Exception:
                _log.exception("ISR change of %s failed", replica.tp.dir_name)
                committed = None
            if replica.leader is not machine:
                return  # leadership changed meanwhile: the new state says everything
            if committed is None:
                machine.on_proposal_failed()
            else:
                self.stats.on_isr_change(replica.state.isr, committed.isr)
                replica.state = committed
                self._carry_out(replica, machine.on_state(committed, self.now_ms()))

        task = asyncio.create_task(write(), name=f"alter-isr-{replica.tp.dir_name}")
        self._proposals.add(task)
        task.add_done_callback(self._proposals.discard)

    def _drop(self, tp: TopicPartition) -> None:
        replica = self._replicas.pop(tp, None)
        if replica is not None:
            self._retire_leader(replica)
            self._retire_follower(replica)
        self.waiters.notify(tp)
        self._wake_followers(tp)

    def _host(self, desired: DesiredReplica) -> bool:
        """Host ``desired``; whether it stamped a new leader epoch into the log (fsyncs)."""
        tp = desired.tp
        if self._local_ids.get(tp, desired.topic_id) is None:  # a folder from before the ids
            write_topic_id(self._logs.data_dir / tp.dir_name, desired.topic_id)
            self._local_ids[tp] = desired.topic_id
        committer = self._logs.get_or_create(tp, desired.config)
        replica = self._replicas.get(tp)
        hosted = replica is not None
        if replica is None:
            replica = Replica(
                tp, desired.topic_id, committer, desired.state, desired.min_insync_replicas
            )
            self._replicas[tp] = replica
        previous = replica.state
        state = desired.state
        if (previous.leader, previous.leader_epoch) == (state.leader, state.leader_epoch) and (
            state.leader == self.broker_id
        ):  # e.g. the controller took a dead broker out of the ISR of a partition led here
            self.stats.on_isr_change(previous.isr, state.isr)
            if previous.isr != state.isr:
                # A follower's session may hold the partition as clean (caught up, in the
                # ISR): read it again, so a follower dropped from the ISR gets back in.
                self.fetch_sessions.mark((tp.topic, tp.partition))
        replica.state = state
        replica.min_insync_replicas = desired.min_insync_replicas
        stamped = False
        if state.leader == self.broker_id and not self._leads(state):
            if replica.leader is not None or not hosted or previous != state:
                _log.warning(
                    "not leading %s in epoch %d: the ISR holds this broker's log of data "
                    "folder %s, lost (this folder is %s); waiting for another leader",
                    tp.dir_name,
                    state.leader_epoch,
                    state.isr_log_dirs.get(self.broker_id),
                    self._log_dir_id,
                )
            self._retire_follower(replica)
            self._retire_leader(replica)
        elif state.leader == self.broker_id:
            self._retire_follower(replica)
            stamped = self._lead(replica, state)
        else:
            self._retire_leader(replica)
            self._follow(replica, state)
        moved = (previous.leader, previous.leader_epoch) != (state.leader, state.leader_epoch)
        if moved or not hosted:  # waiting fetches re-check leadership (a consumer's may be
            self.waiters.notify(tp)  # waiting for this replica to be ready: ``fetcher``)
        if moved:
            self._wake_followers(tp)
        return stamped

    def _leads(self, state: PartitionState) -> bool:
        """Whether this broker leads ``state``: named leader, with the log the ISR holds."""
        return state.leader == self.broker_id and not state.log_dir_lost(
            self.broker_id, self._log_dir_id
        )

    def _lead(self, replica: Replica, state: PartitionState) -> bool:
        """Lead ``replica`` in ``state``'s epoch; whether a new epoch was stamped in its log."""
        machine = replica.leader
        if machine is not None and machine.leader_epoch == state.leader_epoch:
            self._carry_out(replica, machine.on_state(state, self.now_ms()))
            return False
        self._retire_leader(replica)
        latest = replica.log.latest_epoch
        stamps = latest is None or latest < state.leader_epoch  # as LeaderPartition decides
        _log.info(
            "leading %s in epoch %d (ISR %s, log end %d)",
            replica.tp.dir_name,
            state.leader_epoch,
            list(state.isr),
            replica.log.log_end_offset,
        )
        machine = LeaderPartition(
            self.broker_id,
            state,
            replica.log,
            now_ms=self.now_ms(),
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            log_dir_id=self._log_dir_id,
        )
        replica.leader = machine
        self._carry_out(replica, machine.on_state(state, self.now_ms()))
        return stamps

    def _retire_leader(self, replica: Replica) -> None:
        if replica.leader is None:
            return
        replica.leader = None
        self.hw_waiters.fail(
            replica.tp,
            NotLeaderOrFollowerError(
                f"broker {self.broker_id} no longer leads {replica.tp.dir_name}; the batch may "
                "or may not be committed by the new leader: retry (idempotence dedupes)",
                topic=replica.tp.topic,
                partition=replica.tp.partition,
            ),
        )

    def _follow(self, replica: Replica, state: PartitionState) -> None:
        machine = replica.follower
        if state.leader == NO_LEADER:
            self._retire_follower(replica)
            return
        if (
            machine is not None
            and machine.leader_id == state.leader
            and machine.leader_epoch == state.leader_epoch
        ):
            return
        self._retire_follower(replica)
        damaged = self._damaged.pop(replica.tp, None)
        if damaged is not None:  # bit rot: what follows the damaged batch is fetched again
            replica.log.truncate_to(damaged)
            _log.warning(
                "%s truncated to %d, before its damaged batch, to fetch it again",
                replica.tp.dir_name,
                replica.log.log_end_offset,
            )
        _log.info(
            "following %s from broker %d in epoch %d (log end %d)",
            replica.tp.dir_name,
            state.leader,
            state.leader_epoch,
            replica.log.log_end_offset,
        )
        machine = FollowerPartition(self.broker_id, state, replica.log)
        replica.follower = machine
        self.fetchers.follow(replica.tp, state.leader, machine)

    def _retire_follower(self, replica: Replica) -> None:
        if replica.follower is not None:
            replica.follower = None
            self.fetchers.unfollow(replica.tp)
