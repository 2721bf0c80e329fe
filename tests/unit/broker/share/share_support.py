"""Fakes for the share drivers' tests: an in-memory log of real RecordBatch bytes, a cluster
snapshot with one topic and one share group, a dead-letter sink that records its copies, and
a ``ShareWorld`` that wires a ``ShareManager`` over them (fake clock, memory state store)."""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import cast

from prometheus_client import CollectorRegistry

from yak.clock import FakeClock
from yak.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from yak.metadata.models import PartitionState, ShareGroupRecord, ShareOffsetReset, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot
from yak.protocol import kafka_share as ks
from yak.record import Record, RecordInput, decode_batches, encode_batch
from yak.types import TopicPartition
from yak_broker.replication.fetch_waiter import FetchWaiter, FetchWaiters
from yak_broker.share.share_manager import Handover, ShareManager
from yak_broker.share.share_metrics import ShareMetrics
from yak_broker.share.share_reader import ShareLog
from yak_broker.share.share_requests import serve_share_acknowledge, serve_share_fetch
from yak_broker.share.state_store import MemoryShareStateStore, SharePartitionKey
from yak_broker.storage.log_info import FetchDataInfo

TOPIC = "jobs"
GROUP = "workers"
TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
DLQ = "jobs-dlq"
LOCK_MS = 1_000


class MemoryLog:
    """A partition log in memory: whole batches, a log start offset and a high watermark."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self._bases: list[int] = []
        self._lasts: list[int] = []
        self.log_start_offset = 0
        self.high_watermark = 0
        self.end = 0

    def append(self, records: Sequence[RecordInput], *, control: bool = False) -> int:
        """Append one batch at the end; the high watermark follows. Returns its base offset."""
        base = self.end
        batch = encode_batch(list(records), base_offset=base, now_ms=1_000, is_control=control)
        self.batches.append(batch)
        self._bases.append(base)
        self._lasts.append(base + len(records) - 1)
        self.end = self.high_watermark = base + len(records)
        return base

    def values(self, *values: str, headers: tuple[tuple[str, bytes | None], ...] = ()) -> int:
        return self.append([RecordInput(None, v.encode(), headers) for v in values])

    def read(self, offset: int, max_bytes: int) -> FetchDataInfo:
        """Whole batches from the one holding ``offset`` (or the next), below the HW."""
        i = bisect.bisect_right(self._lasts, offset - 1)  # the first batch ending at/after it
        out = bytearray()
        next_offset = offset
        for base, last, batch in zip(
            self._bases[i:], self._lasts[i:], self.batches[i:], strict=True
        ):
            if base >= self.high_watermark or (out and len(out) + len(batch) > max_bytes):
                break
            out += batch
            next_offset = last + 1
        hw, start = self.high_watermark, self.log_start_offset
        return FetchDataInfo(memoryview(bytes(out)), next_offset, hw, start, self.end)


def records_of(answer: ks.ShareFetchedPartition) -> list[Record]:
    """The records an answer carries (whole batches, acquired or not)."""
    return [r for b in decode_batches(bytes(answer.records)) for r in b.records]


def acquired_offsets(answer: ks.ShareFetchedPartition) -> list[tuple[int, int]]:
    """(offset, delivery count) of every acquired record."""
    return [
        (offset, a.delivery_count)
        for a in answer.acquired
        for offset in range(a.first_offset, a.last_offset + 1)
    ]


class _ParkedWaiter:
    """A ``FetchWaiter`` that says when its owner parks on it."""

    def __init__(self, inner: FetchWaiter, parked: asyncio.Event) -> None:
        self._inner = inner
        self._parked = parked

    def arm(self) -> None:
        self._inner.arm()

    async def wait(self, timeout_s: float) -> bool:
        self._parked.set()
        return await self._inner.wait(timeout_s)


class ParkingWaiters(FetchWaiters[TopicPartition]):
    """Fetch waiters whose ``parked`` event is set when a long poll parks (tests wait for it
    instead of guessing how many loop turns the poll takes)."""

    def __init__(self) -> None:
        super().__init__()
        self.parked = asyncio.Event()

    @contextmanager
    def watching(self, keys: Iterable[TopicPartition]) -> Iterator[FetchWaiter]:
        with super().watching(keys) as waiter:
            yield cast(FetchWaiter, _ParkedWaiter(waiter, self.parked))

    async def until_parked(self) -> None:
        await asyncio.wait_for(self.parked.wait(), 5)
        self.parked.clear()


class GatedStore(MemoryShareStateStore):
    """A memory store whose saves wait for ``gate`` (open by default); ``batches`` records
    each save's snapshots, ``saving`` is set when a save has begun."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()
        self.saving = asyncio.Event()
        self.batches: list[dict[SharePartitionKey, bytes | None]] = []

    async def save(self, snapshots: Mapping[SharePartitionKey, bytes | None]) -> None:
        self.batches.append(dict(snapshots))
        self.saving.set()
        await self.gate.wait()
        await super().save(snapshots)


class RecordingSink:
    """A ``DeadLetterSink`` keeping what it was given; ``produced`` is set on each call."""

    def __init__(self) -> None:
        self.copies: list[tuple[str, int, RecordInput]] = []
        self.produced = asyncio.Event()
        self.fail: Exception | None = None

    async def produce(
        self, topic: str, source_partition: int, records: Sequence[RecordInput]
    ) -> None:
        if self.fail is not None:
            raise self.fail
        self.copies.extend((topic, source_partition, r) for r in records)
        self.produced.set()


def cluster(
    *,
    leader: int = 0,
    leader_epoch: int = 0,
    group: ShareGroupRecord | None = None,
    revision: int = 1,
) -> ClusterSnapshot:
    topic = TopicRecord(
        name=TOPIC, topic_id=TOPIC_ID.hex, partitions=2, replication_factor=1, created_at_ms=0
    )
    states = {
        (TOPIC, p): PartitionState(
            topic=TOPIC,
            partition=p,
            leader=leader,
            leader_epoch=leader_epoch,
            replicas=(0,),
            isr=(0,),
        )
        for p in (0, 1)
    }
    groups = {GROUP: group} if group is not None else {}
    return ClusterSnapshot(
        revision=revision, topics={TOPIC: topic}, partitions=states, share_groups=groups
    )


def group_record(**changes: object) -> ShareGroupRecord:
    base = ShareGroupRecord(
        name=GROUP,
        created_at_ms=0,
        dead_letter_topic=DLQ,
        max_delivery_attempts=3,
        lock_duration_ms=LOCK_MS,
        offset_reset=ShareOffsetReset.EARLIEST,
    )
    return base.model_copy(update=changes)


@dataclasses.dataclass
class ShareWorld:
    """A share manager on fakes; ``fetch``/``ack`` send requests as the internal plane would."""

    store: MemoryShareStateStore = dataclasses.field(default_factory=MemoryShareStateStore)
    clock: FakeClock = dataclasses.field(default_factory=FakeClock)
    sink: RecordingSink = dataclasses.field(default_factory=RecordingSink)
    logs: dict[int, MemoryLog] = dataclasses.field(
        default_factory=lambda: {0: MemoryLog(), 1: MemoryLog()}
    )
    snapshot: ClusterSnapshot = dataclasses.field(
        default_factory=lambda: cluster(group=group_record())
    )
    waiters: ParkingWaiters = dataclasses.field(default_factory=ParkingWaiters)
    registry: CollectorRegistry = dataclasses.field(default_factory=CollectorRegistry)
    #: The manager's wait for the previous leader to follow (None: none).
    handover: Handover | None = None
    manager: ShareManager | None = None

    def start(self) -> ShareManager:
        self.manager = ShareManager(
            lambda: self.snapshot,
            self.leader_log,
            self.store,
            self.waiters,
            clock=self.clock,
            metrics=ShareMetrics(self.registry),
            dead_letters=self.sink,
            handover=self.handover,
        )
        return self.manager

    def leader_log(self, tp: TopicPartition) -> tuple[ShareLog, int]:
        state = self.snapshot.partitions.get((tp.topic, tp.partition))
        if state is None:
            raise UnknownTopicOrPartitionError(f"unknown {tp}")
        if state.leader != 0:
            raise NotLeaderOrFollowerError(
                "led elsewhere", leader=state.leader, leader_epoch=state.leader_epoch
            )
        return self.logs[tp.partition], state.leader_epoch

    def append(self, partition: int, *values: str) -> int:
        base = self.logs[partition].values(*values)
        self.waiters.notify(TopicPartition(TOPIC, partition))
        return base

    async def fetch(
        self,
        member: str = "m1",
        *,
        partitions: Sequence[int] = (0,),
        acks: Sequence[ks.AckBatch] = (),
        max_records: int = 100,
        max_wait_ms: int = 0,
        filter: str | None = None,
        group: str = GROUP,
        topic_id: uuid.UUID = TOPIC_ID,
    ) -> ks.ShareFetchResponse:
        assert self.manager is not None
        request = ks.ShareFetchRequest(
            group,
            member,
            tuple(ks.SharePartitionAcks(topic_id, p, tuple(acks)) for p in partitions),
            max_wait_ms=max_wait_ms,
            max_records=max_records,
            filter=filter,
        )
        return await serve_share_fetch(self.manager, request, max_wait_limit_ms=30_000)

    async def ack(
        self, member: str, *batches: tuple[int, int, ks.AckType], partition: int = 0
    ) -> ks.AckResult:
        assert self.manager is not None
        acks = tuple(ks.AckBatch(first, last, (int(kind),)) for first, last, kind in batches)
        request = ks.ShareAcknowledgeRequest(
            GROUP, member, (ks.SharePartitionAcks(TOPIC_ID, partition, acks),)
        )
        (result,) = await serve_share_acknowledge(self.manager, request)
        return result
