"""``TopicShareStateStore``: share-partition snapshots in the internal compacted topic
``__yak_share_state`` (the ``ShareStateStore`` the broker uses; docs/decisions.md, "Share
groups: where their state lives").

**The topic** is created by the share-group admin API before the first share group: 16
partitions, replication factor min(3, brokers), ``cleanup.policy=compact``,
``min.insync.replicas=2`` when RF is 3. Without it every call raises
``UnknownTopicOrPartitionError`` naming it.

**Records.** One record per share-partition snapshot, in RecordBatch v2 (``yak.record``), no
compression, no headers, create-time timestamps:

    key    SharePartitionKey.encode(): UTF-8 ``group \\0 topic \\0 partition \\0
           incarnation`` (decimal; the incarnation is the group's created_at_ms, so a group
           deleted and created again never shares a key with its predecessor: state_store)
    value  the snapshot (``yak_broker.share.state.snapshot``: magic ``YS``, version, CRC-32
           at the end), or null — a tombstone: the key was deleted (its share group was)

A key's state partition is Kafka's murmur2 of the key modulo the partition count, so every
snapshot of a key is in one partition, in write order, and compaction keeps its latest.

**save** groups the snapshots by state partition: one batch per partition (split when it would
pass ``max_batch_bytes``), produced with acks=all to each leader concurrently; it returns once
every one is acknowledged, else raises the first failure's typed error (then nothing may be
assumed durable; what was written is harmless: the next save of those keys supersedes it).
``NOT_LEADER_OR_FOLLOWER``, no leader, or a leader that cannot be reached: wait for the
metadata to name another leader or epoch (not a sleep; at most ``retry_backoff_ms`` after a
refusal, as the refusing broker may be the one whose metadata lags), then retry —
``max_retries`` times.

**load** catches up the key's state partition, then answers from memory
(``StatePartitionView``: the latest value per key and the offset read to). Catching up reads,
through the leader like a consumer, from where the last read stopped (the log start the first
time) to the high watermark the first fetch reports, so loading many share-partitions after a
leader change reads each state partition once; a later load reads only what was written since.
Loads that arrive while a catch-up runs share the next one.
*A new leader's high watermark may lag*: an acks=all write acknowledged by the previous leader
is in the new leader's log (it was in the ISR) but maybe not yet below its high watermark.
Every such write is below the start offset of the new leader epoch, so the first catch-up in
an epoch asks the leader where the previous epoch ended (OffsetsForLeaderEpoch) and reads at
least that far, long-polling until the high watermark gets there.

**keys(group)** catches up every state partition (concurrently, each as a load would), then
lists the keys of the group that hold a snapshot: the deletion sweep's question, rare.

**Crash**: nothing here is durable but the topic; a restarted broker reads it again.
Concurrency: one event loop; the committer never has two saves of one key in flight, and
runs one save per state partition (``lane``) at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import NamedTuple

from yak.errors import (
    FencedLeaderEpochError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NetworkError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from yak.metadata.models import BrokerRegistration
from yak.metadata.snapshot import ClusterSnapshot
from yak.protocol.broker_models import OffsetForLeaderEpoch
from yak.protocol.broker_wire import ACKS_ALL, FetchPartition, FetchRequest, ProducePartition
from yak.record import decode_batches
from yak_broker.share.state_store import SHARE_STATE_TOPIC, SharePartitionKey
from yak_broker.share.state_topic_clients import StateTopicClient, StateTopicClients
from yak_broker.share.state_topic_view import StatePartitionView, state_batch, state_partition

__all__ = ["TopicShareStateStore", "WaitForMetadata"]

#: Waits until the predicate holds for the cluster metadata, or raises TimeoutError after the
#: timeout in seconds (``MetadataCache.wait_for``).
WaitForMetadata = Callable[[Callable[[ClusterSnapshot], bool], float], Awaitable[ClusterSnapshot]]

_Values = Mapping[SharePartitionKey, bytes | None]
#: Failures that mean "ask the metadata who leads now, then try again".
_MOVED = (
    NotLeaderOrFollowerError,
    LeaderNotAvailableError,
    FencedLeaderEpochError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
    NetworkError,
    KafkaTimeoutError,
)
#: Refusals by the broker the metadata names as leader: it may not have applied its new
#: leadership yet (its metadata lags ours), so the retry waits for a change at most a backoff.
_BEHIND = (NotLeaderOrFollowerError, UnknownLeaderEpochError, UnknownTopicOrPartitionError)


class _Leader(NamedTuple):
    broker: BrokerRegistration
    epoch: int


class TopicShareStateStore:
    """The ``ShareStateStore`` over ``__yak_share_state``; see the module docstring."""

    def __init__(
        self,
        snapshot: Callable[[], ClusterSnapshot],
        wait_for_metadata: WaitForMetadata,
        clients: StateTopicClients,
        *,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        topic: str = SHARE_STATE_TOPIC,
        timeout_ms: int = 30_000,
        max_retries: int = 5,
        retry_backoff_ms: int = 250,
        max_batch_bytes: int = 512 * 1024,
        fetch_max_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self.topic = topic
        self._snapshot = snapshot
        self._wait_for_metadata = wait_for_metadata
        self._clients = clients
        self._now_ms = now_ms
        self._timeout_ms = timeout_ms
        self._max_retries = max_retries
        self._retry_backoff_ms = retry_backoff_ms
        self._max_batch_bytes = max_batch_bytes
        self._fetch_max_bytes = fetch_max_bytes
        self._views: dict[int, StatePartitionView] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def start(self) -> None:
        """Nothing to open: clients connect on first use (kept for the broker's start order)."""

    async def stop(self) -> None:
        """Close the clients; calls in flight fail with the closed connections."""
        await self._clients.aclose()

    def view(self, partition: int) -> StatePartitionView:
        """What was read of state partition ``partition`` (created empty on first use)."""
        return self._views.setdefault(partition, StatePartitionView())

    # --- ShareStateStore ------------------------------------------------------------------

    async def load(self, key: SharePartitionKey) -> bytes | None:
        partition = state_partition(key, self._partition_count())
        await self._catch_up(partition)
        return self.view(partition).get(key)

    async def save(self, snapshots: Mapping[SharePartitionKey, bytes | None]) -> None:
        await self._write(snapshots)

    async def delete(self, *keys: SharePartitionKey) -> None:
        await self._write(dict.fromkeys(keys))

    def lane(self, key: SharePartitionKey) -> int:
        """The key's state partition (0 while the topic is missing: every save fails)."""
        record = self._snapshot().topics.get(self.topic)
        return state_partition(key, record.partitions) if record is not None else 0

    async def keys(self, group: str) -> list[SharePartitionKey]:
        count = self._partition_count()
        await asyncio.gather(*(self._catch_up(p) for p in range(count)))
        return [k for p in range(count) for k in self.view(p).live_keys() if k.group == group]

    # --- writes ---------------------------------------------------------------------------

    async def _write(self, values: _Values) -> None:
        if not values:
            return
        count = self._partition_count()
        grouped: dict[int, dict[SharePartitionKey, bytes | None]] = {}
        for key, value in values.items():
            grouped.setdefault(state_partition(key, count), {})[key] = value
        outcomes = await asyncio.gather(
            *(self._write_partition(p, v) for p, v in grouped.items()), return_exceptions=True
        )
        written: list[tuple[int, list[tuple[_Values, int]]]] = []
        for partition, outcome in zip(grouped, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                raise outcome  # the views stay as they were: nothing is assumed durable
            written.append((partition, outcome))
        for partition, acked in written:
            for chunk, base_offset in acked:
                self.view(partition).note_written(chunk, base_offset)

    async def _write_partition(self, partition: int, values: _Values) -> list[tuple[_Values, int]]:
        """Produce ``values`` to one state partition, in chunks; each chunk's base offset."""
        acked = []
        for chunk in self._chunks(values):
            batch = state_batch(chunk.items(), self._now_ms())
            request = [ProducePartition(self.topic, partition, batch)]
            for attempt in range(self._max_retries + 1):
                leader = await self._leader(partition)
                try:
                    (result,) = await self._client(leader).produce(
                        request, acks=ACKS_ALL, timeout_ms=self._timeout_ms
                    )
                    if result.error is not None:
                        raise result.error.exception()
                    break
                except _MOVED as error:
                    if attempt == self._max_retries:
                        raise
                    await self._leader_moved(partition, leader, error)
            acked.append((chunk, result.base_offset))
        return acked

    def _chunks(self, values: _Values) -> list[_Values]:
        chunks: list[dict[SharePartitionKey, bytes | None]] = [{}]
        size = 0
        for key, value in values.items():
            cost = len(key.encode()) + len(value or b"") + 32
            if chunks[-1] and size + cost > self._max_batch_bytes:
                chunks.append({})
                size = 0
            chunks[-1][key] = value
            size += cost
        return list(chunks)

    # --- reads ----------------------------------------------------------------------------

    async def _catch_up(self, partition: int) -> None:
        """Read ``partition`` to its current end (see the module doc); a load that arrived
        while another catch-up ran waits for the next one, and shares it."""
        view = self.view(partition)
        arrived = view.rounds_started
        async with self._locks.setdefault(partition, asyncio.Lock()):
            if view.last_completed_round > arrived:
                return  # a round that started after this load arrived has just completed
            view.rounds_started += 1
            this_round = view.rounds_started
            try:
                async with asyncio.timeout(self._timeout_ms / 1000):
                    await self._read_with_retries(partition, view)
            except TimeoutError as exc:
                raise KafkaTimeoutError(
                    f"{self.topic}-{partition}: not read to its end within {self._timeout_ms} ms",
                    topic=self.topic,
                    partition=partition,
                ) from exc
            view.last_completed_round = this_round

    async def _read_with_retries(self, partition: int, view: StatePartitionView) -> None:
        for attempt in range(self._max_retries + 1):
            leader = await self._leader(partition)
            try:
                await self._read(partition, view, leader)
                return
            except _MOVED as error:
                if attempt == self._max_retries:
                    raise
                await self._leader_moved(partition, leader, error)

    async def _read(self, partition: int, view: StatePartitionView, leader: _Leader) -> None:
        """Read to the high watermark of the first fetch, and at least to where the leader's
        epoch began (long-polling until the high watermark passes it)."""
        client = self._client(leader)
        floor = await self._epoch_start(client, partition, view, leader)
        target: int | None = None
        high_watermark = -1
        while True:
            position = view.position if view.position is not None else 0
            if target is not None and position >= target:
                break
            waiting = target is not None and position >= high_watermark
            fetched = await self._fetch(client, partition, leader, position, waiting)
            if fetched is None:  # OFFSET_OUT_OF_RANGE: the view moved, read from there
                continue
            records, high_watermark = fetched
            if target is None:
                target = max(floor, high_watermark)
            batches = list(decode_batches(records, from_offset=position))
            for batch in batches:
                if not batch.header.is_control:
                    view.apply(batch.records)
            if batches:
                last = batches[-1].header
                view.advance(last.base_offset + last.last_offset_delta + 1)
            else:  # nothing below the high watermark from here (compacted away), or idle
                view.advance(max(position, high_watermark))
        view.checked_epoch = leader.epoch

    async def _epoch_start(
        self, client: StateTopicClient, partition: int, view: StatePartitionView, leader: _Leader
    ) -> int:
        """Where the leader's epoch began; 0 once this epoch was read past it."""
        if view.checked_epoch == leader.epoch or leader.epoch == 0:
            return 0
        question = OffsetForLeaderEpoch(
            topic=self.topic,
            partition=partition,
            current_leader_epoch=leader.epoch,
            leader_epoch=leader.epoch - 1,
        )
        (answer,) = await client.offsets_for_leader_epoch([question])
        if answer.error is not None:
            raise answer.error.exception()
        return max(answer.end_offset, 0)

    async def _fetch(
        self,
        client: StateTopicClient,
        partition: int,
        leader: _Leader,
        position: int,
        waiting: bool,
    ) -> tuple[memoryview, int] | None:
        """One fetch at ``position`` (a long poll when ``waiting`` for the high watermark):
        the records and the high watermark, or None after an out-of-range reset."""
        wanted = FetchPartition(
            self.topic, partition, position, self._fetch_max_bytes, leader.epoch
        )
        request = FetchRequest(
            (wanted,), max_wait_ms=500 if waiting else 0, max_bytes=self._fetch_max_bytes
        )
        (fetched,) = await client.fetch(request)
        if fetched.error is None:
            return memoryview(fetched.records), fetched.high_watermark
        error = fetched.error.exception()
        if not isinstance(error, OffsetOutOfRangeError):
            raise error
        view = self.view(partition)
        if position < fetched.log_start_offset:
            view.advance(fetched.log_start_offset)  # deleted below: nothing to read there
        else:
            view.reset()  # past the end: this log is not the one read before
        return None

    # --- leaders --------------------------------------------------------------------------

    def _partition_count(self) -> int:
        record = self._snapshot().topics.get(self.topic)
        if record is None or record.deleting:
            raise UnknownTopicOrPartitionError(
                f"the share-state topic {self.topic} does not exist: it is created with the "
                "first share group (the share-group admin API)",
                topic=self.topic,
            )
        return record.partitions

    def _current_leader(self, snapshot: ClusterSnapshot, partition: int) -> _Leader | None:
        state = snapshot.partitions.get((self.topic, partition))
        if state is None or not state.has_leader:
            return None
        broker = snapshot.brokers.get(state.leader)
        return _Leader(broker, state.leader_epoch) if broker is not None else None

    async def _leader(self, partition: int) -> _Leader:
        """The partition's leader now, waiting (bounded) for one when there is none."""
        self._partition_count()
        leader = self._current_leader(self._snapshot(), partition)
        if leader is not None:
            return leader
        try:
            snapshot = await self._wait_for_metadata(
                lambda s: self._current_leader(s, partition) is not None, self._timeout_ms / 1000
            )
        except TimeoutError as exc:
            raise LeaderNotAvailableError(
                f"{self.topic}-{partition} has no live leader", topic=self.topic
            ) from exc
        found = self._current_leader(snapshot, partition)
        assert found is not None  # the predicate held
        return found

    async def _leader_moved(self, partition: int, failed: _Leader, error: Exception) -> None:
        """Wait until the metadata names another leader, epoch or address than ``failed``: a
        dead leader's lease has to expire first; a refusal (``_BEHIND``) waits a backoff at
        most, in case the refusing broker is the one behind."""
        wait_ms = self._retry_backoff_ms if isinstance(error, _BEHIND) else self._timeout_ms
        # On a timeout the retry asks the same leader once more, then its error stands.
        with contextlib.suppress(TimeoutError):
            await self._wait_for_metadata(
                lambda s: self._current_leader(s, partition) != failed, wait_ms / 1000
            )

    def _client(self, leader: _Leader) -> StateTopicClient:
        return self._clients.client(leader.broker)
