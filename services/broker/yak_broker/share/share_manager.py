"""``ShareManager``: the share-partitions this broker leads, one driver each, created on their
first request and dropped when this broker stops leading the partition or the group goes.

A driver is made (once, however many requests ask at the same time) from the partition's
leader epoch, the group's ``ShareGroupRecord`` settings and the state store — once the
replicas that may have led the partition before this epoch follow this broker (``handover``:
the previous leader, if alive, answers nothing after that; docs/decisions.md) —: the last saved
snapshot restored (``SharePartition.restore``; a snapshot of a later leader epoch is refused:
this broker is stale), or a new share-partition at the group's ``offset_reset`` (earliest:
the log start; latest: the high watermark), whose starting point is saved before it serves.
A load awaits, and the leadership may end meanwhile (a metadata event then finds no driver to
close): after its reads the load checks that this broker still leads in the epoch it was made
for, and registers the driver with no await in between — a driver is never made for a
leadership already gone (docs/decisions.md, "Share groups: the handover between leaders").

Dropping: on every metadata event (``on_metadata_change``), the drivers of the partition,
topic or share group it names are checked against the snapshot — not led here any more,
another leader epoch, the group or the topic deleted or changed (settings, delays: re-read
by a fresh driver, which restores the saved state) — and closed; their long polls are woken
and answer ``NOT_LEADER_OR_FOLLOWER`` or ``GROUP_ID_NOT_FOUND`` (``share_requests``). A request
that finds a driver of an older epoch replaces it too.

A group's **incarnation** (its ``created_at_ms``) is part of every key (``share_key``): a
request names the live record's, so a group deleted and created again loads none of its
predecessor's snapshots. A share-group event that ends an incarnation — the record marked
``deleting``, gone, or replaced by another incarnation — also starts the deletion sweep
(``state_sweep``): the group's stale keys of partitions led here get tombstones.

Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Collection, Iterator

from yak.clock import Clock
from yak.errors import GroupIdNotFoundError, NotLeaderOrFollowerError, YakError
from yak.metadata.keyspace import KeyKind, ParsedKey
from yak.metadata.models import ShareGroupRecord, ShareOffsetReset
from yak.metadata.snapshot import ClusterSnapshot
from yak.types import TopicPartition
from yak_broker.replication.fetch_waiter import FetchWaiters
from yak_broker.share.dead_letters import DeadLetterSink
from yak_broker.share.delay_source import DelaySourceFactory
from yak_broker.share.group_state import ShareGroupLive, group_live_state
from yak_broker.share.share_metrics import ShareMetrics
from yak_broker.share.share_partition_driver import SharePartitionDriver
from yak_broker.share.share_reader import ShareLog
from yak_broker.share.snapshot_committer import SnapshotCommitter
from yak_broker.share.state.records import ShareSettings, ShareStats
from yak_broker.share.state.share_partition import SharePartition
from yak_broker.share.state.snapshot import decode_snapshot
from yak_broker.share.state_store import SharePartitionKey, ShareStateStore
from yak_broker.share.state_sweep import StateSweeper
from yak_broker.share.topic_ids import TopicIds

__all__ = ["Handover", "LeaderLookup", "ShareManager"]

#: The log of a partition this broker leads now, with its leader epoch; raises
#: ``NotLeaderOrFollowerError`` / ``UnknownTopicOrPartitionError`` otherwise.
LeaderLookup = Callable[[TopicPartition], tuple[ShareLog, int]]
#: Until the replicas that may have led the partition before this leader epoch follow it
#: (``ReplicaManager.wait_handed_over``): none of them still answers as its leader.
Handover = Callable[[TopicPartition, int], Awaitable[object]]


class ShareManager:
    """The share-partition drivers of one broker; see the module doc."""

    def __init__(
        self,
        snapshot: Callable[[], ClusterSnapshot],
        leader_log: LeaderLookup,
        store: ShareStateStore,
        waiters: FetchWaiters[TopicPartition],
        *,
        clock: Clock,
        metrics: ShareMetrics,
        dead_letters: DeadLetterSink | None = None,
        delay_source: DelaySourceFactory | None = None,
        max_in_flight: int = 2_000,
        handover: Handover | None = None,
    ) -> None:
        self.snapshot = snapshot
        self._handover = handover
        self.leader_log = leader_log
        self.waiters = waiters
        self.clock = clock
        self.topic_ids = TopicIds(snapshot)
        self._store = store
        self._committer = SnapshotCommitter(store, metrics.save_seconds.observe)
        self._metrics = metrics
        self._dead_letters = dead_letters
        #: Where a share-partition of a topic with delays finds its due records (the
        #: broker's delay indexer); None: no delays anywhere.
        self.delay_source = delay_source
        self._max_in_flight = max_in_flight
        self._drivers: dict[SharePartitionKey, SharePartitionDriver] = {}
        self._loading: dict[SharePartitionKey, asyncio.Task[SharePartitionDriver]] = {}
        #: The incarnation last seen per group (a put of another one ends the old).
        self._incarnations: dict[str, int] = {}
        self.sweeper = StateSweeper(
            store,
            self._committer,
            live_incarnation=self._live_incarnation,
            leads=self._leads,
            clock=clock,
        )
        self.closed = False

    @property
    def saves(self) -> int:
        """Group-committed saves of snapshots so far."""
        return self._committer.saves

    def group(self, name: str) -> ShareGroupRecord:
        record = self.snapshot().share_groups.get(name)
        if record is None or record.deleting:
            raise GroupIdNotFoundError(f"share group {name} does not exist", group=name)
        return record

    def share_key(self, group: str, topic: str, partition: int) -> SharePartitionKey:
        """The key of a share-partition of the group's live incarnation (or
        ``GroupIdNotFoundError``)."""
        incarnation = self.group(group).created_at_ms
        self._incarnations.setdefault(group, incarnation)
        return SharePartitionKey(group, topic, partition, incarnation)

    async def driver(self, key: SharePartitionKey) -> SharePartitionDriver:
        """The driver of ``key``, led here now (made or replaced as the module doc says)."""
        group = self.group(key.group)
        if group.created_at_ms != key.incarnation:
            raise GroupIdNotFoundError(
                f"share group {key.group} was deleted and created again", group=key.group
            )
        log, epoch = self.leader_log(TopicPartition(key.topic, key.partition))
        driver = self._drivers.get(key)
        if driver is not None and not driver.closed and driver.leader_epoch == epoch:
            return driver
        if driver is not None:
            self._drop(key)
        loading = self._loading.get(key)
        if loading is None or loading.done():  # done: its callback has not run yet
            loading = asyncio.create_task(self._load(key, group, log, epoch), name="share-load")
            self._loading[key] = loading
            loading.add_done_callback(lambda task: self._forget_load(key, task))
        tp = TopicPartition(key.topic, key.partition)
        try:
            driver = await asyncio.shield(loading)
        except NotLeaderOrFollowerError:
            _, now = self.leader_log(tp)  # raises when led elsewhere now
            if now == epoch:
                raise
            return await self.driver(key)  # led here again, in a later epoch
        # The leadership may have moved while this waited: ask again, never trust ``epoch``.
        _, now = self.leader_log(tp)
        if driver.leader_epoch != now:  # loaded for an epoch gone meanwhile
            return await self.driver(key)
        return driver

    def _forget_load(
        self, key: SharePartitionKey, task: asyncio.Task[SharePartitionDriver]
    ) -> None:
        if self._loading.get(key) is task:
            del self._loading[key]

    async def _load(
        self, key: SharePartitionKey, group: ShareGroupRecord, log: ShareLog, epoch: int
    ) -> SharePartitionDriver:
        settings = ShareSettings(
            lock_duration_ms=group.lock_duration_ms,
            max_delivery_attempts=group.max_delivery_attempts,
            max_in_flight=self._max_in_flight,
        )
        if self._handover is not None:
            # The previous leader answers nothing it saved after this load read the store.
            await self._handover(TopicPartition(key.topic, key.partition), epoch)
        raw = await self._store.load(key)
        self._check_leads(key, epoch)
        if raw is not None:
            machine = SharePartition.restore(decode_snapshot(raw), settings, leader_epoch=epoch)
        else:
            earliest = group.offset_reset == ShareOffsetReset.EARLIEST
            start = log.log_start_offset if earliest else log.high_watermark
            machine = SharePartition(settings, start_offset=start, leader_epoch=epoch)
        tp = TopicPartition(key.topic, key.partition)
        delays = None
        if self.delay_source is not None:
            delays = self.delay_source(key.topic, key.partition)
        driver = SharePartitionDriver(
            key,
            machine,
            log,
            committer=self._committer,
            clock=self.clock,
            counters=self._metrics.counters(key.group, key.topic),
            notify=lambda: self.waiters.notify(tp),
            delays=delays,
            dead_letter_topic=group.dead_letter_topic,
            dead_letters=self._dead_letters,
        )
        if self.closed or self._live_incarnation(key.group) != key.incarnation:
            driver.close()  # the manager closed, or the group ended, while this loaded
            return driver
        # Registered with no await since the leadership check: the next metadata event that
        # ends this leadership finds it in ``_drivers`` and closes it, also during the save.
        self._drivers[key] = driver
        if raw is None:
            await driver.persist_now()  # NOT_LEADER if it was closed meanwhile
        return driver

    def _check_leads(self, key: SharePartitionKey, epoch: int) -> None:
        """Raise ``NotLeaderOrFollowerError`` unless this broker still leads the partition
        in ``epoch``. A load awaits (the handover, the store, the first save); a metadata
        event meanwhile found no driver to close, so a driver made for a leadership already
        gone would serve — and save snapshots — beside the next leader's."""
        tp = TopicPartition(key.topic, key.partition)
        _, now = self.leader_log(tp)
        if now != epoch:
            raise NotLeaderOrFollowerError(
                f"{tp.dir_name}: the leader epoch moved from {epoch} to {now} while "
                f"share-partition {key.group} loaded",
                topic=key.topic,
                partition=key.partition,
            )

    def _drop(self, key: SharePartitionKey) -> None:
        driver = self._drivers.pop(key, None)
        if driver is not None:
            driver.close()
            self.waiters.notify(TopicPartition(key.topic, key.partition))

    # --- metadata ------------------------------------------------------------------------

    def on_metadata_change(self, parsed: ParsedKey) -> None:
        """``MetadataCache`` callback: drop the drivers the event may have ended."""
        kind = parsed.kind
        if kind is KeyKind.SHARE_GROUP:
            keys = [k for k in self._drivers if k.group == parsed.group]
            if parsed.group is not None:
                self._check_incarnation(parsed.group)
        elif kind is KeyKind.TOPIC:
            keys = [k for k in self._drivers if k.topic == parsed.topic]
        elif kind is KeyKind.PARTITION:
            keys = [
                k
                for k in self._drivers
                if k.topic == parsed.topic and k.partition == (parsed.partition or 0)
            ]
        else:
            return
        for key in keys:
            if not self._still_served(key, refresh=kind is not KeyKind.PARTITION):
                self._drop(key)

    def _check_incarnation(self, group: str) -> None:
        """Sweep ``group`` if the event ended an incarnation (see the module doc)."""
        live = self._live_incarnation(group)
        seen = self._incarnations.pop(group, None)
        if live is not None:
            self._incarnations[group] = live
        if live is None or (seen is not None and seen != live):
            self.sweeper.sweep(group)

    def _live_incarnation(self, group: str) -> int | None:
        """The group's ``created_at_ms``; None when it is gone or being deleted."""
        record = self.snapshot().share_groups.get(group)
        return None if record is None or record.deleting else record.created_at_ms

    def _leads(self, key: SharePartitionKey) -> bool:
        try:
            self.leader_log(TopicPartition(key.topic, key.partition))
        except YakError:
            return False
        return True

    def _still_served(self, key: SharePartitionKey, *, refresh: bool) -> bool:
        driver = self._drivers[key]
        if refresh:
            return False  # new settings or configs: a fresh driver restores the saved state
        try:
            _log, epoch = self.leader_log(TopicPartition(key.topic, key.partition))
        except Exception:
            return False
        return epoch == driver.leader_epoch

    # --- introspection and shutdown ------------------------------------------------------

    def stats(self) -> Iterator[tuple[str, ShareStats]]:
        """Each share-partition's counts, by group (the metrics collector's)."""
        for key, driver in list(self._drivers.items()):
            yield key.group, driver.machine.stats()

    def drivers(self) -> dict[SharePartitionKey, SharePartitionDriver]:
        return dict(self._drivers)

    def live_state(self, group: str, topics: Collection[str] = ()) -> ShareGroupLive:
        """``group``'s share-partitions led here (loaded ones, and the led partitions of
        ``topics`` as not loaded) and its counters; loads nothing (``group_state``)."""
        self.group(group)
        return group_live_state(
            group, topics, self._drivers, self.snapshot(), self.leader_log, self._metrics
        )

    async def close(self) -> None:
        """Close every driver (their long polls answer NOT_LEADER) and stop saving."""
        self.closed = True
        await self.sweeper.close()
        for key in list(self._drivers):
            self._drop(key)
        for task in list(self._loading.values()):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        await self._committer.close()
