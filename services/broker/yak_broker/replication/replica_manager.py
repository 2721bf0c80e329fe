"""The partitions this broker hosts and leads, and their logs' lifecycle from the metadata.

``ReplicaManager.apply(snapshot)`` carries out ``plan_replicas``: deletes the local logs the plan
names (topic gone or deleting, topic id changed, reassigned away), then creates or refreshes
every replica the metadata assigns to this broker — updating the log config when the topic's
configs change. New replicas' logs are created in batches of ``_CREATE_BATCH`` off the event
loop (``LogManager.create_logs``), each folder appearing with its topic id
(``partition_metadata``) and, for a replica led here, its leader epoch already in place; a log
that fails to be created is reported for its partition, which is tried again at the next
metadata change. That full pass runs at start and after the metadata cache reloaded
(``on_reload``: events may have been missed). Otherwise the work is proportional to the change
(issue 19): ``on_change`` records which partitions and topics the metadata events touched, and
``run`` applies ``plan_changes`` for just those, batching whatever arrived meanwhile (an event
wakes it; no polling). A failed pass is retried in full at the next change.

Leadership is read from the *current* snapshot on every request (``leader``), so a new leader
epoch applies at once; the hosted replica must also carry the topic's current id, so a
re-created topic is never served from the old folder even before ``apply`` wiped it. Until
``apply`` has installed a leadership the metadata names (a new topic's log not created yet, a
new epoch not stamped yet), requests are refused with ``ReplicaNotReadyError``, a
``NOT_LEADER_OR_FOLLOWER`` that a consumer's long poll waits out instead (``fetcher``): the
waiting fetches are woken when the replica is installed (``ReplicaRoles._host``).

Roles (leader, follower, none, lost) and what a change of role does: ``replica_roles``
(``ReplicaRoles``, which ``ReplicaManager`` extends).

Followers' fetches carry their data folder id: the leader adds a follower to the ISR only
when that id is the one the follower's registration shows (``on_follower_fetch``).

Single event loop: requests and ``apply`` interleave only at awaits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from yak.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from yak.metadata.keyspace import KeyKind, ParsedKey
from yak.metadata.models import PartitionState
from yak.metadata.snapshot import ClusterSnapshot
from yak.types import TopicPartition
from yak_broker.metrics import BrokerTopicStats, PartitionView
from yak_broker.replication.delayed_produce import HighWatermarkWaiters
from yak_broker.replication.fetch_session_cache import FetchSessionCache
from yak_broker.replication.fetch_waiter import FetchWaiters
from yak_broker.replication.partition_metadata import (
    PARTITION_METADATA_FILE,
    encode_topic_id,
    read_topic_id,
)
from yak_broker.replication.replica_fetcher import ReplicaFetcherManager
from yak_broker.replication.replica_roles import (
    DAMAGED_LOG_DIR,
    AlterIsrWriter,
    Replica,
    ReplicaRoles,
)
from yak_broker.replication.state.fetch_metadata import SessionClock
from yak_broker.replication.state.isr_checks import IsrChecks
from yak_broker.replication.state.leader_partition import LeaderPartition
from yak_broker.replication.state.messages import AlterIsr
from yak_broker.replication.state.replica_plan import (
    DesiredReplica,
    ReplicaPlan,
    plan_changes,
    plan_replicas,
)
from yak_broker.storage.log import Log
from yak_broker.storage.log_dir_failure import LogDirFailureChannel
from yak_broker.storage.log_manager import LogManager, LogRequest

__all__ = ["AlterIsrWriter", "Replica", "ReplicaManager", "ReplicaNotReadyError"]

_log = logging.getLogger(__name__)
#: Replicas refreshed between two yields of the event loop while a plan is carried out.
_CHUNK = 64
#: New replicas whose logs are created in one ``LogManager.create_logs`` call.
_CREATE_BATCH = 256
#: Replicas ticked between two yields of the event loop.
_TICK_CHUNK = 1_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ReplicaNotReadyError(NotLeaderOrFollowerError):
    """The metadata names this broker the partition's leader, but the metadata pass has not
    installed that leadership yet (the log not created, the epoch not stamped): retriable, and
    over soon — a consumer's long poll waits for it rather than answering it. ``log``: the
    replica's log when it is the topic's current one (its offsets stand meanwhile), None when
    the log is yet to be created (a new, empty one)."""

    def __init__(self, message: str, log: Log | None = None, **details: Any) -> None:
        super().__init__(message, **details)
        self.log = log


class ReplicaManager(ReplicaRoles):
    """Hosts this broker's replicas; see the module doc."""

    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        snapshot: Callable[[], ClusterSnapshot],
        waiters: FetchWaiters[TopicPartition],
        *,
        replica_lag_time_max_ms: int = 30_000,
        fetch_wait_max_ms: int = 500,
        fetch_backoff_ms: int = 1_000,
        now_ms: Callable[[], int] = _now_ms,
        stats: BrokerTopicStats | None = None,
    ) -> None:
        self.broker_id = broker_id
        #: Traffic and ISR-change counters (``metrics``).
        self.stats = stats if stats is not None else BrokerTopicStats()
        self._logs = logs
        self._snapshot = snapshot
        #: Consumer fetches, woken when a high watermark moves.
        self.waiters = waiters
        #: Sessionless follower fetches, woken by every append on a partition led here.
        self.replica_waiters: FetchWaiters[TopicPartition] = FetchWaiters()
        #: The followers' incremental fetch sessions (KIP-227), woken like the waiters.
        self.fetch_sessions = FetchSessionCache()
        #: acks=all produces, completed when the high watermark passes them.
        self.hw_waiters: HighWatermarkWaiters[TopicPartition] = HighWatermarkWaiters()
        self.now_ms = now_ms
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        #: The data folder's storage failures (``storage.log_dir_failure``): offline, appends
        #: are refused and the followers stop fetching until the probe finds it usable again.
        self.log_dir_failures = LogDirFailureChannel()
        self.fetchers = ReplicaFetcherManager(
            broker_id,
            snapshot,
            now_ms,
            failures=self.log_dir_failures,
            max_wait_ms=fetch_wait_max_ms,
            backoff_ms=fetch_backoff_ms,
            on_progress=self._on_follower_progress,
            on_fetched=self.stats.on_replica_fetched,
        )
        self.alter_isr_writer: AlterIsrWriter | None = None
        self._log_dir_id = ""
        self._replicas: dict[TopicPartition, Replica] = {}
        self._local_ids: dict[TopicPartition, str | None] = {}
        self._changed = asyncio.Event()
        self._dirty_partitions: set[tuple[str, int]] = set()
        self._dirty_topics: set[str] = set()
        self._full = False
        #: One plan carried out at a time: creating logs awaits, and the next plan must see
        #: what the previous one created.
        self._applying = asyncio.Lock()
        self._proposals: set[asyncio.Task[None]] = set()
        #: Replicas whose log holds a damaged batch (bit rot) from this offset on: truncated
        #: there when they next start following (``report_damage``, ``ReplicaRoles._follow``).
        self._damaged: dict[TopicPartition, int] = {}
        #: Called after each plan carried out (replicas created, deleted, reconfigured).
        self.on_applied: Callable[[], None] | None = None
        #: ``wait_handed_over`` callers, woken (to look again) by follower fetches, metadata
        #: events and applied plans.
        self._handover_waiters: set[asyncio.Future[None]] = set()

    @property
    def replicas(self) -> Mapping[TopicPartition, Replica]:
        return MappingProxyType(self._replicas)

    @property
    def log_dir_id(self) -> str:
        """This broker's data folder id (``meta.properties``); "" until the broker sets it."""
        return self._log_dir_id

    @log_dir_id.setter
    def log_dir_id(self, value: str) -> None:
        self._log_dir_id = value
        self.fetchers.log_dir_id = value

    def load_local(self) -> None:
        """Learn the topic ids of the logs the log manager loaded from disk."""
        for tp, committer in self._logs.logs.items():
            self._local_ids[tp] = read_topic_id(committer.log.directory)

    def partition_views(self) -> Iterator[PartitionView]:
        """Each hosted replica as the metrics collector sees it (read at scrape time)."""
        for replica in list(self._replicas.values()):
            log, state = replica.log, replica.state
            yield PartitionView(
                topic=replica.tp.topic,
                partition=replica.tp.partition,
                size=log.size,
                log_end_offset=log.log_end_offset,
                high_watermark=log.high_watermark,
                is_leader=replica.leader is not None,
                isr=len(state.isr),
                replicas=len(state.original_replicas),
                min_isr=replica.min_insync_replicas,
            )

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
        if state.log_dir_lost(self.broker_id, self._log_dir_id):
            raise _not_leader(tp, state, snapshot, "lost its log on this broker (new data folder)")
        if replica is None or replica.topic_id != record.topic_id:
            # The metadata names us leader but ``apply`` has not caught up yet: retriable.
            raise _not_ready(tp, state, snapshot)
        return replica, state

    def leader_partition(self, tp: TopicPartition) -> tuple[Replica, LeaderPartition]:
        """Like ``leader``, with the partition's leader state machine."""
        replica, state = self.leader(tp)
        machine = replica.leader
        if machine is None or machine.leader_epoch != state.leader_epoch:
            raise _not_ready(tp, state, self._snapshot(), replica.log)
        return replica, machine

    def on_leader_append(self, replica: Replica, local_end: int | None = None) -> None:
        """A local append on a partition led here: wake followers, maybe move the HW.

        ``local_end``: in ``flush.mode=sync``, the end of the fsynced part of the log.
        """
        self._wake_followers(replica.tp)
        if replica.leader is not None:
            self._carry_out(replica, replica.leader.on_append(self.now_ms(), local_end))

    def on_follower_fetch(
        self,
        replica: Replica,
        replica_id: int,
        fetch_offset: int,
        session: SessionClock | None = None,
        *,
        log_dir_id: str = "",
    ) -> None:
        """A follower asks from ``fetch_offset`` (its log end offset): record its progress
        (``session``: the incremental fetch session the fetch came in; ``log_dir_id``: the
        data folder it fetches from). It may join the ISR only if it is registered with
        that folder and the folder is not marked offline (KIP-903: a process not registered
        yet, the fetch of one whose log is gone or whose disk failed, never does)."""
        if replica.leader is not None:
            registration = self._snapshot().brokers.get(replica_id)
            eligible = (
                registration is not None
                and (registration.log_dir_id == log_dir_id or not registration.log_dir_id)
                and log_dir_id not in registration.offline_log_dirs
            )
            outputs = replica.leader.on_follower_fetch(
                replica_id,
                fetch_offset,
                self.now_ms(),
                session,
                log_dir_id=log_dir_id,
                eligible=eligible,
            )
            self._carry_out(replica, outputs)
            if self._handover_waiters:
                self._wake_handovers()

    def report_damage(self, tp: TopicPartition, offset: int) -> None:
        """A read met a damaged batch holding ``offset`` in ``tp``'s log (bit rot, see
        ``storage.damaged_batch``): repair the replica from an in-sync copy. Leading, it first
        gives the leadership up: an ISR proposal that records its own ISR entry under another
        data folder id (``DAMAGED_LOG_DIR``), so the controller counts its log as lost for
        this partition — as after an empty-disk restart — and elects another in-sync replica;
        the replica then truncates to before the damaged batch when it starts following
        (``_follow``) and fetches the rest again, rejoining the ISR with its real folder id once
        caught up. With no other in-sync replica the log is kept: the batch is never served,
        and there is no intact copy to repair it from."""
        replica = self._replicas.get(tp)
        if replica is None:
            return
        known = self._damaged.get(tp)
        self._damaged[tp] = offset if known is None else min(known, offset)
        machine, state = replica.leader, replica.state
        marked = state.isr_log_dirs.get(self.broker_id, "").startswith(DAMAGED_LOG_DIR)
        if machine is None or marked:
            return  # not leading (truncated when it starts following), or given up already
        if not [b for b in state.isr if b != self.broker_id]:
            if known is not None:
                return  # said once
            _log.error(
                "%s: damaged batch at offset %d and no other in-sync replica to repair it from",
                tp.dir_name,
                offset,
            )
            return
        _log.log(
            logging.INFO if known is not None else logging.ERROR,  # a retried proposal
            "%s: damaged batch at offset %d (bit rot): giving up leadership to repair it from "
            "an in-sync replica",
            tp.dir_name,
            offset,
        )
        proposal = AlterIsr(
            tp.topic,
            tp.partition,
            self.broker_id,
            machine.leader_epoch,
            state.partition_epoch,
            state.isr,
            ((self.broker_id, DAMAGED_LOG_DIR + self._log_dir_id),),
        )
        self._propose(replica, proposal)

    def on_follower_forgotten(self, tp: TopicPartition, replica_id: int) -> None:
        """A follower's fetch session dropped ``tp`` (see ``LeaderPartition``)."""
        replica = self._replicas.get(tp)
        if replica is not None and replica.leader is not None:
            replica.leader.on_follower_forgotten(replica_id)

    def handed_over(self, tp: TopicPartition, leader_epoch: int) -> bool:
        """Whether every other live member of ``tp``'s ISR has fetched from this broker in
        ``leader_epoch`` (True as well when this broker no longer leads in that epoch: the
        caller's own leadership check refuses then). A broker learns it lost a leadership from
        its metadata watch, and closes what it served as leader in that callback, before it
        fetches from the next leader: once all of them have, none still answers as leader."""
        snapshot = self._snapshot()
        state = snapshot.partitions.get((tp.topic, tp.partition))
        if state is None or state.leader != self.broker_id or state.leader_epoch != leader_epoch:
            return True
        replica = self._replicas.get(tp)
        machine = replica.leader if replica is not None else None
        if machine is None or machine.leader_epoch != leader_epoch:
            return False  # the leadership is not installed yet: woken after ``apply``
        return all(
            machine.followed_by(member)
            for member in state.isr
            if member != self.broker_id and member in snapshot.brokers
        )

    async def wait_handed_over(self, tp: TopicPartition, leader_epoch: int) -> bool:
        """Until ``handed_over``; False if ``replica_lag_time_max_ms`` passed first (a member
        that does not fetch leaves the ISR within it anyway). The share manager's wait before
        it loads a share-partition's saved state (docs/decisions.md, "Share groups: the
        handover between leaders"). Woken by events, never polling."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.replica_lag_time_max_ms / 1000
        while not self.handed_over(tp, leader_epoch):
            remaining = deadline - loop.time()
            if remaining <= 0:
                _log.warning(
                    "%s: the ISR did not all follow this leader within %d ms; serving anyway",
                    tp.dir_name,
                    self.replica_lag_time_max_ms,
                )
                return False
            waiter: asyncio.Future[None] = loop.create_future()
            self._handover_waiters.add(waiter)
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter, remaining)
            finally:
                self._handover_waiters.discard(waiter)
        return True

    def _wake_handovers(self) -> None:
        for waiter in self._handover_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._handover_waiters.clear()

    def log_end_offset(self, tp: TopicPartition) -> int:
        """The log end offset of the replica of ``tp`` hosted here (-1: none)."""
        replica = self._replicas.get(tp)
        return replica.log.log_end_offset if replica is not None else -1

    def _on_follower_progress(self, tp: TopicPartition) -> None:
        """The fetch session applied an answer for ``tp`` (nothing to carry out: followers
        serve no consumers)."""

    async def run_ticks(self) -> None:
        """Tick the leader machines (ISR shrink by lag) twice per lag window, until cancelled:
        the ones ``IsrChecks`` says are due (an idle partition costs no check)."""
        interval_s = max(self.replica_lag_time_max_ms / 2000, 0.05)
        checks = IsrChecks(self.fetch_sessions, self.replica_lag_time_max_ms)
        while True:
            await asyncio.sleep(interval_s)  # a timer by nature: the lag is measured in time
            now = self.now_ms()
            every = checks.check_all(now)
            for index, replica in enumerate(list(self._replicas.values()), 1):
                leader = replica.leader
                if leader is not None and (every or not leader.quiet):
                    self._carry_out(replica, leader.tick(now))
                if index % _TICK_CHUNK == 0:  # 20,000 replicas: not all in one hold of the loop
                    await asyncio.sleep(0)

    async def stop(self) -> None:
        """Stop fetching and fail the waiting acks=all producers (the broker is stopping)."""
        self.hw_waiters.fail_all(NotLeaderOrFollowerError("the broker is shutting down"))
        self.fetch_sessions.close_all()
        await self.fetchers.stop()
        for task in list(self._proposals):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- metadata --------------------------------------------------------------------------

    def on_metadata_change(self, parsed: ParsedKey) -> None:
        """``MetadataCache`` callback: note a topic/partition change and wake ``run``."""
        if self._handover_waiters:
            self._wake_handovers()  # a registration or leadership changed: look again
        if parsed.kind is KeyKind.PARTITION and parsed.topic is not None:
            self._dirty_partitions.add((parsed.topic, parsed.partition or 0))
        elif parsed.kind is KeyKind.TOPIC and parsed.topic is not None:
            self._dirty_topics.add(parsed.topic)
        else:
            return
        self._changed.set()

    def on_reload(self, _snapshot: ClusterSnapshot) -> None:
        """``MetadataCache`` callback after a reload: the next pass is a full one."""
        self._full = True
        self._changed.set()

    async def run(self) -> None:
        """Apply what changed after each change, until cancelled."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            partitions, self._dirty_partitions = self._dirty_partitions, set()
            topics, self._dirty_topics = self._dirty_topics, set()
            full, self._full = self._full, False
            try:
                if full:
                    await self.apply(self._snapshot())
                else:
                    await self.apply_changes(self._snapshot(), partitions, topics)
            except Exception:
                _log.exception("applying metadata failed; a full pass at the next change")
                self._full = True

    async def apply(self, snapshot: ClusterSnapshot) -> None:
        """Bring the hosted replicas in line with ``snapshot`` (or a newer one)."""
        async with self._applying:
            snapshot = self._newest(snapshot)
            await self._carry_out_plan(plan_replicas(snapshot, self.broker_id, self._local_ids))

    async def apply_changes(
        self,
        snapshot: ClusterSnapshot,
        partitions: Iterable[tuple[str, int]],
        topics: Iterable[str],
    ) -> None:
        """Bring in line only the replicas of ``partitions`` and of ``topics``."""
        async with self._applying:
            snapshot = self._newest(snapshot)
            plan = plan_changes(snapshot, self.broker_id, self._local_ids, partitions, topics)
            await self._carry_out_plan(plan)

    def _newest(self, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        """``snapshot``, or the current one if it is newer (a pass waited for another)."""
        current = self._snapshot()
        return current if current.revision > snapshot.revision else snapshot

    async def _carry_out_plan(self, plan: ReplicaPlan) -> None:
        for tp, reason in plan.delete:
            _log.info("deleting the local log of %s: %s", tp.dir_name, reason)
            self._drop(tp)
            self._local_ids.pop(tp, None)
            await self._logs.delete(tp)
        wanted = set()
        for start in range(0, len(plan.host), _CREATE_BATCH):
            batch = plan.host[start : start + _CREATE_BATCH]
            failed = await self._create_logs([d for d in batch if d.tp not in self._local_ids])
            failed |= await self._stamp_epochs([d for d in batch if d.tp not in failed])
            for index, desired in enumerate(batch, 1):
                wanted.add(desired.tp)
                stamped = desired.tp not in failed and self._host(desired)
                if stamped or index % _CHUNK == 0:
                    # Thousands of replicas cost CPU (and a stamp left to ``_host`` fsyncs):
                    # let the loop serve requests and keep the lease alive.
                    await asyncio.sleep(0)
        served = set(self._replicas) if plan.considered is None else plan.considered
        for tp in served - wanted:  # e.g. the partition key vanished: stop serving
            if tp in self._replicas:
                self._drop(tp)
        self.fetchers.metadata_changed()
        if self._handover_waiters:
            self._wake_handovers()
        if self.on_applied is not None:
            self.on_applied()

    async def _create_logs(self, new: list[DesiredReplica]) -> set[TopicPartition]:
        """Create the logs of ``new`` in one batch; the partitions that failed (each logged and
        marked to be tried again at the next metadata change)."""
        if not new:
            return set()
        requests = [
            LogRequest(
                d.tp,
                d.config,
                ((PARTITION_METADATA_FILE, encode_topic_id(d.topic_id)),),
                d.state.leader_epoch if self._leads(d.state) else None,
            )
            for d in new
        ]
        results = await self._logs.create_logs(requests)
        failed = set()
        for desired in new:
            outcome = results[desired.tp]
            if isinstance(outcome, Exception):
                _log.error(
                    "creating the log of %s failed (tried again at the next metadata change): %s",
                    desired.tp.dir_name,
                    outcome,
                )
                failed.add(desired.tp)
                self._dirty_partitions.add((desired.tp.topic, desired.tp.partition))
            else:
                self._local_ids[desired.tp] = desired.topic_id
        _log.info(
            "created the logs of %d replicas (%d failed)", len(new) - len(failed), len(failed)
        )
        return failed

    async def _stamp_epochs(self, batch: list[DesiredReplica]) -> set[TopicPartition]:
        """Stamp the new leader epochs of ``batch``'s partitions led here in their logs, the
        files written in parallel off the loop (a failover or a restart hands a broker
        thousands of leaderships at once: one fsync'd write each, on the loop, held it for tens
        of seconds). Each such replica stops following (and leading an older epoch) first, so
        its log stays still until ``_host`` makes it leader. The partitions whose write failed
        (each logged, and tried again at the next metadata change)."""
        stamped: list[tuple[TopicPartition, Log]] = []
        for desired in batch:
            state, tp = desired.state, desired.tp
            committer = self._logs.logs.get(tp)
            if not self._leads(state) or committer is None:
                continue
            replica = self._replicas.get(tp)
            machine = replica.leader if replica is not None else None
            if machine is not None and machine.leader_epoch == state.leader_epoch:
                continue
            log = committer.log
            latest = log.latest_epoch
            if latest is not None and latest >= state.leader_epoch:
                if log.leader_epochs.unpersisted:  # an earlier write failed: again
                    stamped.append((tp, log))
                continue
            if replica is not None:
                self._retire_follower(replica)
                self._retire_leader(replica)
            log.assign_epoch(state.leader_epoch, log.log_end_offset, persist=False)
            stamped.append((tp, log))
        failed = await self._logs.persist_epochs(stamped)
        for tp, error in failed.items():
            _log.error(
                "writing the leader epoch of %s failed (tried again at the next metadata "
                "change): %s",
                tp.dir_name,
                error,
            )
            self._dirty_partitions.add((tp.topic, tp.partition))
        return set(failed)


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


def _not_ready(
    tp: TopicPartition, state: PartitionState, snapshot: ClusterSnapshot, log: Log | None = None
) -> ReplicaNotReadyError:
    refused = _not_leader(tp, state, snapshot, "is not ready on this broker yet")
    return ReplicaNotReadyError(refused.message, log, **refused.details)
