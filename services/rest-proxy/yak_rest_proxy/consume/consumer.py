"""``Consumers``: what a REST consumer instance can do, whichever proxy serves the request.

Every operation goes through ``members`` (``holding.members.Members``) — the instances this
proxy holds in memory, which applies the member side of the group protocol first
(``member_protocol.reconcile``) — then acts; a poll through one ``MemberSession``:

- **poll**: positions of owned partitions start at the committed offset, else by
  ``auto_offset_reset`` (``earliest``/``latest``; ``none`` raises ``OFFSET_OUT_OF_RANGE``); one
  long-polling fetch across the partitions' leaders; the positions advance in memory and are
  written behind (``holding.write_behind``). With auto-commit on, the positions reached by the
  *previous* poll are committed with the next write — the client asking for more is taken as
  having processed what it got, as Kafka's auto-commit on ``poll`` does. An instance that owns
  nothing waits for its group's state to change, up to the timeout. In the steady state a poll
  makes no etcd call. A ``raw`` poll (the binary poll) hands out the fetched record batches
  undecoded (``Poll.batches``) and moves each position to the end of its last whole batch; records
  below the position in the first batch are the client's to skip. A poll with a
  ``record_filter`` (``yak.filters``) hands out only the records it lets through, and each
  position moves past every record scanned, so records the filter dropped count as consumed
  (commits cover them) and a poll that scanned only such records answers empty with its
  positions advanced; a long poll keeps scanning until a record matches or the time is up
  (``reader``). A filtered poll is never raw.
- **seek** to offsets, beginning, end or a timestamp, for partitions the instance owns.
- **commit** offsets (or the current positions) fenced by ownership (``member_protocol.commit``),
  written through: answered once in etcd.

Nothing here reads the wall clock: time comes from the injected ``Clock``.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from yak.api.fetch_answer import FetchedBatches
from yak.clock import Clock
from yak.errors import (
    IllegalStateError,
    InvalidRequestError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from yak.filters import RecordFilter
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import CommittedOffset, GroupMember
from yak.metadata.store import MetadataStore
from yak.names import validate_topic_name
from yak.protocol.broker_models import OffsetResult
from yak.record import Record
from yak.types import TopicPartition
from yak_rest_proxy.consume.holding.member_store import MemberStore
from yak_rest_proxy.consume.holding.members import Members
from yak_rest_proxy.consume.membership import member_protocol as protocol
from yak_rest_proxy.consume.membership.member_state import Member, Offsets
from yak_rest_proxy.consume.reader import PartitionRead, whole_batches
from yak_rest_proxy.metrics import PollStats
from yak_rest_proxy.quotas.consumer_cap import ConsumerCap

__all__ = [
    "Consumers",
    "PartitionReader",
    "Poll",
    "PolledPartition",
    "PolledRecord",
    "new_instance_id",
]

PolledRecord = tuple[str, int, Record]


class PolledPartition(NamedTuple):
    """One partition's records of a poll, in offset order (never empty)."""

    topic: str
    partition: int
    records: list[Record]


class Poll(NamedTuple):
    """What a poll returned, partition by partition, and the member as it stood when the
    records were read; a ``raw`` poll's partitions are ``batches`` (``partitions`` empty)."""

    member: Member
    partitions: list[PolledPartition]
    batches: Sequence[FetchedBatches] = ()

    @property
    def records(self) -> list[PolledRecord]:
        """Every record with its topic and partition (one tuple each: not for hot paths)."""
        return [(p.topic, p.partition, r) for p in self.partitions for r in p.records]


class PartitionReader(Protocol):
    """What consumers need of ``reader.Reader``: fetches, offset look-ups, and the poll stages
    it times (the consumers time ``reconcile`` and ``save``)."""

    stats: PollStats

    async def fetch(
        self,
        positions: Sequence[tuple[str, int, int]],
        *,
        max_wait_ms: int,
        max_bytes: int,
        min_bytes: int = 1,
        owner: str | None = None,
        raw: bool = False,
        record_filter: RecordFilter | None = None,
    ) -> list[PartitionRead]: ...

    async def list_offsets(
        self, topic: str, partition: int, timestamp: int | str
    ) -> OffsetResult: ...


def new_instance_id(node_id: str) -> str:
    return f"rest-consumer-{node_id}-{uuid.uuid4().hex}"


class Consumers:
    """Consumer-instance operations over the members and the brokers; see the module docstring."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        cache: MetadataCache,
        reader: PartitionReader,
        *,
        clock: Clock,
        cap: ConsumerCap | None = None,
        holder: str | None = None,
        flush_interval_ms: int = 1_000,
        handoff_timeout_ms: int = 2_000,
    ) -> None:
        self._store = MemberStore(store, keyspace)
        self.members = Members(
            self._store,
            store,
            keyspace,
            clock=clock,
            holder=holder if holder is not None else f"proxy-{uuid.uuid4().hex[:12]}",
            flush_interval_s=flush_interval_ms / 1000,
            handoff_timeout_s=handoff_timeout_ms / 1000,
        )
        self._cache = cache
        self._reader = reader
        self._clock = clock
        self._cap = cap

    async def start(self) -> None:
        await self.members.start()

    async def stop(self) -> None:
        """Let every instance this proxy holds go (positions written behind)."""
        await self.members.stop()

    def now_ms(self) -> int:
        return self._clock.time_ms()

    async def create(self, group: str, record: GroupMember, timeout_ms: int) -> Member:
        """Create the instance (429 ``CONSUMER_QUOTA_EXCEEDED`` past its principal's cap)."""
        if self._cap is not None:
            record = await self._cap.admit(record)
        return await self.members.create(group, record, timeout_ms)

    async def delete(self, group: str, member_id: str) -> None:
        """Remove the instance (auto-committing its positions first, as a closing consumer)."""
        await self.members.leave(group, member_id)

    async def instance(self, group: str, member_id: str) -> Member:
        """The instance as it stands (its assignment brought up to date)."""
        return await self.members.current(group, member_id)

    # --- subscription and assignment ---------------------------------------------------------

    async def validate_subscription(self, topics: Sequence[str], pattern: str | None) -> None:
        """Topics or a pattern (one of them), legal names, a pattern that compiles."""
        if bool(topics) == (pattern is not None):
            raise IllegalStateError(
                "give either topics or topic_pattern (they are mutually exclusive)"
            )
        for topic in topics:
            validate_topic_name(topic)
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise InvalidRequestError(
                    f"topic_pattern {pattern!r} is not a valid regular expression: {exc}",
                    kind="invalid_data",
                ) from None

    async def subscribe(
        self, group: str, member_id: str, topics: Sequence[str], pattern: str | None
    ) -> None:
        await self.validate_subscription(topics, pattern)
        await self.members.run(group, member_id, lambda m: protocol.subscribe(m, topics, pattern))

    async def unsubscribe(self, group: str, member_id: str) -> None:
        await self.members.run(group, member_id, protocol.unsubscribe)
        await self.members.current(group, member_id)

    async def assign(
        self, group: str, member_id: str, partitions: Iterable[TopicPartition]
    ) -> None:
        wanted = set(partitions)
        snapshot = self._cache.snapshot
        for topic, partition in sorted(wanted):
            validate_topic_name(topic)
            if (topic, partition) not in snapshot.partitions:
                raise UnknownTopicOrPartitionError(
                    f"{topic}-{partition} does not exist", topic=topic, partition=partition
                )
        await self.members.run(group, member_id, lambda m: protocol.assign(m, wanted))
        await self.members.current(group, member_id)

    # --- positions ---------------------------------------------------------------------------

    async def seek(self, group: str, member_id: str, offsets: Offsets) -> None:
        await self.members.run(group, member_id, lambda m: protocol.seek(m, offsets))

    async def seek_to(
        self, group: str, member_id: str, partitions: Iterable[TopicPartition], where: int | str
    ) -> None:
        """Seek to ``earliest``, ``latest`` or the first offset at or after a timestamp (ms)."""
        wanted = set(partitions)
        member = await self.members.current(group, member_id)
        protocol.require_owned(member, wanted)

        async def target(topic: str, partition: int) -> int:
            offset = (await self._reader.list_offsets(topic, partition, where)).offset
            if offset < 0:  # no record at or after the timestamp: the end
                offset = (await self._reader.list_offsets(topic, partition, "latest")).offset
            return offset

        ordered = sorted(wanted)
        found = await asyncio.gather(*(target(t, p) for t, p in ordered))
        await self.seek(group, member_id, dict(zip(ordered, found, strict=True)))

    # --- poll --------------------------------------------------------------------------------

    async def poll(
        self,
        group: str,
        member_id: str,
        *,
        timeout_ms: int | None,
        max_bytes: int,
        paused: frozenset[TopicPartition] = frozenset(),
        max_timeout_ms: int = 30_000,
        raw: bool = False,
        record_filter: RecordFilter | None = None,
    ) -> Poll:
        """Records of the owned, not ``paused`` partitions (their positions stay). A None
        ``timeout_ms`` is the instance's own ``request_timeout_ms``; waits are capped at
        ``max_timeout_ms``. ``raw``: their whole batches instead, ``max_bytes`` counting
        batch bytes; ``record_filter``: only the records it passes, positions past every
        record scanned (see the module docstring)."""
        if raw and record_filter is not None:
            raise InvalidRequestError("a filtered poll cannot be raw: the filter decodes records")
        async with self.members.serving(group, member_id) as session:
            reconciling = time.perf_counter()  # stage timing (metrics.PollStats)
            member = await session.current()
            self._reader.stats.reconcile.observe(time.perf_counter() - reconciling)
            if timeout_ms is None:
                timeout_ms = member.base.request_timeout_ms
            timeout_ms = max(0, min(timeout_ms, max_timeout_ms))
            deadline = self._clock.monotonic() + timeout_ms / 1000
            if not member.owned:
                await session.wait_for_state(member, timeout_ms / 1000)
                member = await session.current()
                if not member.owned:
                    return Poll(member, [])
            found = await self._start_positions(member)
            start = {**member.positions, **found}
            reading = sorted(member.owned - paused)
            if not reading:  # everything paused: a long poll still waits (for a rebalance)
                await session.wait_for_state(member, self._left(deadline))
                return Poll(member, [])
            batches: list[FetchedBatches] = []
            polled: list[PolledPartition] = []
            if raw:
                batches, reached = await self._read_raw(member, start, reading, deadline, max_bytes)
            else:
                polled, reached = await self._read(
                    member, start, reading, deadline, max_bytes, record_filter
                )

            def advance(current: Member) -> Member:
                return protocol.polled(protocol.positioned(current, found), start, reached)

            saving = time.perf_counter()
            await session.moved(advance)
            self._reader.stats.save.observe(time.perf_counter() - saving)
            return Poll(member, polled, batches)

    def _left(self, deadline: float) -> float:
        return max(0.0, deadline - self._clock.monotonic())

    async def _fetch(
        self,
        member: Member,
        start: Offsets,
        reading: list[TopicPartition],
        deadline: float,
        max_bytes: int,
        *,
        raw: bool,
        record_filter: RecordFilter | None = None,
    ) -> list[PartitionRead]:
        """The member's fetch of ``reading`` from ``start``, until ``deadline``."""
        return await self._reader.fetch(
            [(tp.topic, tp.partition, start[tp]) for tp in reading],
            max_wait_ms=int(self._left(deadline) * 1000),
            max_bytes=max_bytes,
            min_bytes=max(1, member.base.fetch_min_bytes),
            owner=f"{member.group}/{member.member_id}",
            raw=raw,
            record_filter=record_filter,
        )

    async def _read(
        self,
        member: Member,
        start: Offsets,
        reading: list[TopicPartition],
        deadline: float,
        max_bytes: int,
        record_filter: RecordFilter | None = None,
    ) -> tuple[list[PolledPartition], dict[TopicPartition, int]]:
        """One fetch from ``start``: the records, and the next offset reached per partition;
        at least one record, then up to ``max_bytes`` of keys and values. A partition whose
        records a filter dropped all moves past them with none handed out."""
        reads = await self._fetch(
            member, start, reading, deadline, max_bytes, raw=False, record_filter=record_filter
        )
        polled: list[PolledPartition] = []
        reached: dict[TopicPartition, int] = {}
        size = 0
        for read in reads:
            tp = TopicPartition(read.topic, read.partition)
            if isinstance(read.error, OffsetOutOfRangeError):
                reached[tp] = await self._reset(member, read.topic, read.partition)
                continue
            if read.error is not None:
                continue  # a leader moved: this partition is read again on the next poll
            if not read.records:
                if read.next_offset > start[tp]:
                    reached[tp] = read.next_offset  # scanned, and the filter kept nothing
                continue
            records, next_offset = read.records, read.next_offset  # past every record scanned
            if read.size >= 0 and size + read.size <= max_bytes:
                size += read.size  # all of it fits: no count per record
            else:
                records = []
                for record in read.records:
                    size += len(record.key or b"") + len(record.value or b"")
                    if (polled or records) and size > max_bytes:
                        break
                    records.append(record)
                if not records:
                    continue
                if len(records) < len(read.records):  # cut: the rest is read again
                    next_offset = records[-1].offset + 1
            polled.append(PolledPartition(read.topic, read.partition, records))
            reached[tp] = next_offset
        return polled, reached

    async def _read_raw(
        self,
        member: Member,
        start: Offsets,
        reading: list[TopicPartition],
        deadline: float,
        max_bytes: int,
    ) -> tuple[list[FetchedBatches], dict[TopicPartition, int]]:
        """``_read`` for a raw poll: whole batches, at least one, then up to ``max_bytes`` of
        batch bytes; each position moves to the end of its last batch handed out."""
        reads = await self._fetch(member, start, reading, deadline, max_bytes, raw=True)
        polled: list[FetchedBatches] = []
        reached: dict[TopicPartition, int] = {}
        size = 0
        for read in reads:
            tp = TopicPartition(read.topic, read.partition)
            if isinstance(read.error, OffsetOutOfRangeError):
                reached[tp] = await self._reset(member, read.topic, read.partition)
                continue
            if read.error is not None or not read.has_data:
                continue  # a leader moved: this partition is read again on the next poll
            batches, next_offset = read.batches, read.next_offset
            if size + len(batches) > max_bytes:
                batches, next_offset = whole_batches(
                    batches, start[tp], max_bytes - size, at_least_one=not polled
                )
                if not batches:
                    continue  # fetched again next poll
            size += len(batches)
            polled.append(
                FetchedBatches(
                    read.topic,
                    read.partition,
                    start[tp],
                    batches,
                    read.high_watermark,
                    read.log_start_offset,
                )
            )
            reached[tp] = next_offset
        return polled, reached

    async def _start_positions(self, member: Member) -> dict[TopicPartition, int]:
        """Where owned partitions without a position start: committed offset, else reset."""
        missing = protocol.unpositioned(member)
        if not missing:
            return {}
        committed = await self._store.committed(member.group, missing)
        found = {}
        for tp in missing:
            mark = committed.get(tp)
            found[tp] = mark.offset if mark is not None else await self._reset(member, *tp)
        return found

    async def _reset(self, member: Member, topic: str, partition: int) -> int:
        policy = member.base.auto_offset_reset
        if policy == "none":
            raise OffsetOutOfRangeError(
                f"{topic}-{partition} has no committed offset (or it is out of range) and "
                "auto.offset.reset is none",
                topic=topic,
                partition=partition,
            )
        return (await self._reader.list_offsets(topic, partition, policy)).offset

    # --- commits -----------------------------------------------------------------------------

    async def commit(
        self,
        group: str,
        member_id: str,
        offsets: Offsets | None,
        *,
        last_processed: bool = True,
        member_epoch: int | None = None,
    ) -> Member:
        """Commit ``offsets`` — with ``last_processed`` the last processed offset per partition,
        stored + 1 as Confluent does, else the next offset to read — or, with None, every
        position reached by polling. ``member_epoch``, when given, must be the member's.
        Written through: answered once stored."""
        if offsets is not None:
            for (topic, partition), offset in offsets.items():
                if offset < 0:
                    raise InvalidRequestError(
                        f"{topic}-{partition}: offset {offset} is negative", kind="invalid_data"
                    )
            step = 1 if last_processed else 0
            offsets = {tp: o + step for tp, o in offsets.items()}
        now_ms = self._clock.time_ms()
        return await self.members.run(
            group, member_id, lambda m: protocol.commit(m, offsets, now_ms, member_epoch)
        )

    async def committed(
        self, group: str, member_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets of ``partitions`` (the instance must exist)."""
        await self.members.current(group, member_id)
        return await self._store.committed(group, partitions)
