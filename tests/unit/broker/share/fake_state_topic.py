"""An in-memory ``__yak_share_state`` for the state store's tests: its partitions' logs, who
leads them, the metadata the store sees, and clients that answer like leaders.

``leaders`` is the truth the clients act on; ``publish()`` makes the metadata say it (a test can
move a leader and keep the metadata stale until the store has been refused). ``hold_high_
watermark(p, hw)`` keeps a partition's high watermark behind its end (a new leader whose
followers have not fetched yet); ``release(p)`` lets it catch up and wakes long polls.
``fail_next[p]`` makes the next produce to partition p fail with that error. ``produces`` and
``fetches`` record what was asked.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from yak.errors import NotLeaderOrFollowerError, OffsetOutOfRangeError, YakError
from yak.metadata.models import BrokerRegistration, PartitionState, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot
from yak.protocol.broker_models import EpochEndOffset, ErrorBody, OffsetForLeaderEpoch
from yak.protocol.broker_wire import (
    FetchedPartition,
    FetchRequest,
    PartitionError,
    ProducePartition,
    ProduceResult,
)
from yak.record import Record, RecordInput, decode_batch, encode_batch
from yak_broker.share.state_store import SHARE_STATE_TOPIC

TOPIC = SHARE_STATE_TOPIC


@dataclass
class FakeLog:
    records: list[Record] = field(default_factory=list)
    log_start: int = 0
    held_high_watermark: int | None = None
    #: leader epoch -> the offset it started at
    epoch_starts: dict[int, int] = field(default_factory=lambda: {0: 0})

    @property
    def end(self) -> int:
        return self.records[-1].offset + 1 if self.records else self.log_start

    @property
    def high_watermark(self) -> int:
        held = self.held_high_watermark
        return self.end if held is None else min(held, self.end)


class FakeStateTopic:
    """The topic, its leaders and the store's metadata; see the module docstring."""

    def __init__(self, partitions: int = 16, brokers: Sequence[int] = (0, 1, 2)) -> None:
        self.partitions = partitions
        self.brokers = tuple(brokers)
        self.logs = {p: FakeLog() for p in range(partitions)}
        self.leaders = {p: (self.brokers[p % len(self.brokers)], 0) for p in range(partitions)}
        self.topic_exists = True
        self.fail_next: dict[int, YakError] = {}
        self.produces: list[tuple[int, int, int]] = []  # broker, partition, records
        self.fetches: list[tuple[int, int]] = []  # partition, offset
        self.refused = asyncio.Event()  # a client answered NOT_LEADER_OR_FOLLOWER
        self.long_polling = asyncio.Event()  # a fetch waits for the high watermark
        self.closed = False
        self._changed = asyncio.Event()
        self._hw_moved = asyncio.Event()
        self.snapshot_value = ClusterSnapshot(revision=0)
        self.publish()

    # --- the metadata -----------------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        return self.snapshot_value

    def publish(self) -> None:
        topics = {}
        if self.topic_exists:
            topics[TOPIC] = TopicRecord(
                name=TOPIC,
                topic_id="00000000-0000-0000-0000-000000000001",
                partitions=self.partitions,
                replication_factor=3,
                created_at_ms=0,
            )
        states = {
            (TOPIC, p): PartitionState(
                topic=TOPIC,
                partition=p,
                leader=leader,
                leader_epoch=epoch,
                replicas=self.brokers,
                isr=self.brokers,
            )
            for p, (leader, epoch) in self.leaders.items()
        }
        registrations = {
            b: BrokerRegistration(
                broker_id=b, host="127.0.0.1", port=9000 + b, started_at_ms=0, data_port=9100 + b
            )
            for b in self.brokers
        }
        self.snapshot_value = ClusterSnapshot(
            revision=self.snapshot_value.revision + 1,
            brokers=MappingProxyType(registrations),
            topics=MappingProxyType(topics),
            partitions=MappingProxyType(states),
        )
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(
        self, predicate: Callable[[ClusterSnapshot], bool], timeout_s: float
    ) -> ClusterSnapshot:
        async with asyncio.timeout(timeout_s):
            while not predicate(self.snapshot_value):
                await self._changed.wait()
        return self.snapshot_value

    def move_leader(self, partition: int, broker: int, *, publish: bool = True) -> None:
        """A new leader epoch on ``broker``, starting at the log's end."""
        _, epoch = self.leaders[partition]
        self.leaders[partition] = (broker, epoch + 1)
        self.logs[partition].epoch_starts[epoch + 1] = self.logs[partition].end
        if publish:
            self.publish()

    def hold_high_watermark(self, partition: int, high_watermark: int) -> None:
        self.logs[partition].held_high_watermark = high_watermark

    def release(self, partition: int) -> None:
        self.logs[partition].held_high_watermark = None
        self._hw_moved.set()
        self._hw_moved = asyncio.Event()

    # --- StateTopicClients ------------------------------------------------------------------

    def client(self, leader: BrokerRegistration) -> FakeLeaderClient:
        return FakeLeaderClient(self, leader.broker_id)

    async def aclose(self) -> None:
        self.closed = True

    def values(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        return [(r.key, r.value) for r in self.logs[partition].records]

    async def wait_high_watermark(self, timeout_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._hw_moved.wait(), timeout_s)


class FakeLeaderClient:
    """Broker ``broker_id`` answering as the leader it is (or is not) in ``topic.leaders``."""

    def __init__(self, topic: FakeStateTopic, broker_id: int) -> None:
        self._topic = topic
        self.broker_id = broker_id

    def _not_leader(self, partition: int, epoch: int = -1) -> YakError | None:
        leader, current = self._topic.leaders[partition]
        if leader != self.broker_id or epoch not in (-1, current):
            self._topic.refused.set()
            return NotLeaderOrFollowerError(f"broker {self.broker_id} does not lead {partition}")
        return None

    async def produce(
        self, partitions: Sequence[ProducePartition], *, acks: int = 1, timeout_ms: int = 30_000
    ) -> tuple[ProduceResult, ...]:
        assert acks == -1, "state records are written with acks=all"
        (wanted,) = partitions
        p = wanted.partition
        error = self._not_leader(p) or self._topic.fail_next.pop(p, None)
        if error is not None:
            return (ProduceResult(TOPIC, p, error=PartitionError.of(error)),)
        log = self._topic.logs[p]
        base = log.end
        batch = decode_batch(bytes(wanted.records))
        for i, record in enumerate(batch.records):
            log.records.append(record._replace(offset=base + i))
        self._topic.produces.append((self.broker_id, p, len(batch.records)))
        return (ProduceResult(TOPIC, p, base_offset=base),)

    async def fetch(self, request: FetchRequest) -> tuple[FetchedPartition, ...]:
        (wanted,) = request.partitions
        p, offset = wanted.partition, wanted.offset
        self._topic.fetches.append((p, offset))
        await asyncio.sleep(0)  # a round trip: other tasks run meanwhile
        error = self._not_leader(p, wanted.current_leader_epoch)
        if error is not None:
            return (FetchedPartition(TOPIC, p, error=PartitionError.of(error)),)
        log = self._topic.logs[p]
        if offset < log.log_start or offset > log.end:
            error = OffsetOutOfRangeError(f"{offset} is out of range")
            hw = log.high_watermark
            return (
                FetchedPartition(TOPIC, p, hw, hw, log.log_start, error=PartitionError.of(error)),
            )
        if offset >= log.high_watermark and request.max_wait_ms > 0:
            self._topic.long_polling.set()
            await self._topic.wait_high_watermark(request.max_wait_ms / 1000)
        hw = log.high_watermark
        chosen = [r for r in log.records if offset <= r.offset < hw]
        data = b""
        if chosen:
            base = chosen[0].offset
            data = encode_batch(
                [
                    RecordInput(r.key, r.value, timestamp=r.timestamp, offset_delta=r.offset - base)
                    for r in chosen
                ],
                base_offset=base,
            )
        return (FetchedPartition(TOPIC, p, hw, hw, log.log_start, data),)

    async def offsets_for_leader_epoch(
        self, partitions: Sequence[OffsetForLeaderEpoch], *, replica_id: int = -1
    ) -> list[EpochEndOffset]:
        (wanted,) = partitions
        p = wanted.partition
        error = self._not_leader(p, wanted.current_leader_epoch)
        if error is not None:
            return [EpochEndOffset(topic=TOPIC, partition=p, error=ErrorBody.of(error))]
        starts = self._topic.logs[p].epoch_starts
        later = [start for epoch, start in starts.items() if epoch > wanted.leader_epoch]
        return [
            EpochEndOffset(
                topic=TOPIC, partition=p, leader_epoch=wanted.leader_epoch, end_offset=min(later)
            )
        ]
