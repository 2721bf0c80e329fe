"""``Consumers``: what a REST consumer instance can do, whichever proxy serves the request.

Every operation loads the instance from etcd (``members.MemberStore``), applies the member side
of the group protocol first (``reconcile``), then acts:

- **poll**: positions of owned partitions start at the committed offset, else by
  ``auto_offset_reset`` (``earliest``/``latest``; ``none`` raises ``OFFSET_OUT_OF_RANGE``); one
  long-polling fetch across the partitions' leaders; new positions are stored in etcd. With
  auto-commit on, the positions reached by the *previous* poll are committed in the same
  transaction — the client asking for more is taken as having processed what it got, as
  Kafka's auto-commit on ``poll`` does. An instance that owns nothing waits for its group's
  state to change (an etcd watch), up to the timeout.
- **seek** to offsets, beginning, end or a timestamp, for partitions the instance owns.
- **commit** offsets (or the current positions) fenced by ownership: see ``MemberStore.commit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable, Iterable, Sequence

from yak.errors import (
    FencedMemberEpochError,
    IllegalStateError,
    InvalidRequestError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
    YakError,
)
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import GroupMember
from yak.metadata.store import MetadataStore
from yak.names import validate_topic_name
from yak.record import Record
from yak_rest_proxy.consumers.members import (
    Member,
    MemberStore,
    TopicPartition,
    as_assignment,
    position_key,
    tuple_of,
)
from yak_rest_proxy.quotas.consumer_cap import ConsumerCap
from yak_rest_proxy.reader import Reader

__all__ = ["Consumers", "PolledRecord"]

PolledRecord = tuple[str, int, Record]


def _now_ms() -> int:
    return int(time.time() * 1000)


class Consumers:
    """Consumer-instance operations over etcd and the brokers; see the module docstring."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        cache: MetadataCache,
        reader: Reader,
        *,
        cap: ConsumerCap | None = None,
    ) -> None:
        self.members = MemberStore(store, keyspace)
        self._cap = cap
        self._store = store
        self._keyspace = keyspace
        self._cache = cache
        self._reader = reader

    async def create(self, group: str, record: GroupMember, timeout_ms: int) -> GroupMember:
        """Create the instance (429 ``CONSUMER_QUOTA_EXCEEDED`` past its principal's cap)."""
        if self._cap is not None:
            record = await self._cap.admit(record)
        return await self.members.create(group, record, timeout_ms)

    async def delete(self, group: str, member_id: str) -> None:
        """Remove the instance (auto-committing its positions first, as a closing consumer)."""
        member = await self.members.reconcile(group, member_id, _now_ms())
        if member.record.auto_commit:
            with contextlib.suppress(YakError):
                await self._commit_positions(member)
        await self.members.delete(member)

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

        def change(member: Member) -> GroupMember:
            if member.record.manual_assignment:
                raise IllegalStateError(
                    "the instance has a manual assignment; subscription and assignment are "
                    "mutually exclusive (delete the assignment by creating a new instance)"
                )
            return member.record.model_copy(
                update={
                    "subscription": tuple(dict.fromkeys(topics)),
                    "subscription_pattern": pattern,
                }
            )

        await self.members.update(group, member_id, change)

    async def unsubscribe(self, group: str, member_id: str) -> None:
        def change(member: Member) -> GroupMember:
            return member.record.model_copy(
                update={"subscription": (), "subscription_pattern": None}
            )

        await self.members.update(group, member_id, change)
        await self.members.reconcile(group, member_id, _now_ms())

    async def subscription(self, group: str, member_id: str) -> GroupMember:
        return (await self.members.load(group, member_id)).record

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

        def change(member: Member) -> GroupMember:
            if member.record.subscribed:
                raise IllegalStateError(
                    "the instance is subscribed; subscription and assignment are mutually "
                    "exclusive (unsubscribe first)"
                )
            return member.record.model_copy(update={"manual_assignment": as_assignment(wanted)})

        await self.members.update(group, member_id, change)
        await self.members.reconcile(group, member_id, _now_ms())

    async def assignment(self, group: str, member_id: str) -> set[TopicPartition]:
        member = await self.members.reconcile(group, member_id, _now_ms())
        return member.owned

    # --- positions ---------------------------------------------------------------------------

    async def seek(self, group: str, member_id: str, offsets: dict[TopicPartition, int]) -> None:
        member = await self.members.reconcile(group, member_id, _now_ms())
        self._check_owned(member, offsets)
        positions = dict(member.positions)
        for (topic, partition), offset in offsets.items():
            positions[position_key(topic, partition)] = offset
        await self.members.save_positions(member, positions)

    async def seek_to(
        self, group: str, member_id: str, partitions: Iterable[TopicPartition], where: int | str
    ) -> None:
        """Seek to ``earliest``, ``latest`` or the first offset at or after a timestamp (ms)."""
        wanted = set(partitions)
        member = await self.members.reconcile(group, member_id, _now_ms())
        self._check_owned(member, wanted)

        async def target(topic: str, partition: int) -> int:
            offset = (await self._reader.list_offsets(topic, partition, where)).offset
            if offset < 0:  # no record at or after the timestamp: the end
                offset = (await self._reader.list_offsets(topic, partition, "latest")).offset
            return offset

        ordered = sorted(wanted)
        found = await asyncio.gather(*(target(t, p) for t, p in ordered))
        await self.seek(group, member_id, dict(zip(ordered, found, strict=True)))

    def _check_owned(self, member: Member, partitions: Iterable[TopicPartition]) -> None:
        missing = sorted(set(partitions) - member.owned)
        if missing:
            shown = ", ".join(f"{t}-{p}" for t, p in missing)
            raise IllegalStateError(
                f"consumer instance {member.record.member_id!r} is not assigned {shown}"
            )

    # --- poll --------------------------------------------------------------------------------

    async def poll(
        self, group: str, member_id: str, *, timeout_ms: int, max_bytes: int
    ) -> list[PolledRecord]:
        return (
            await self.poll_member(group, member_id, timeout_ms=timeout_ms, max_bytes=max_bytes)
        )[1]

    async def poll_member(
        self,
        group: str,
        member_id: str,
        *,
        timeout_ms: int | None,
        max_bytes: int,
        paused: frozenset[TopicPartition] = frozenset(),
        before_fetch: Callable[[GroupMember], None] | None = None,
        max_timeout_ms: int = 30_000,
        while_saving: Callable[[Member, list[PolledRecord]], object] | None = None,
    ) -> tuple[Member, list[PolledRecord]]:
        """Poll; also the member as it stood (epoch, assignment) when the records were read.
        ``paused`` partitions are not read (their positions stay); ``before_fetch`` may refuse
        the poll (raise) once the instance is loaded, before any position moves. A None
        ``timeout_ms`` is the instance's own ``request_timeout_ms``; waits are capped at
        ``max_timeout_ms``. ``while_saving(member, records)`` (e.g. rendering the answer) runs
        while the new positions are on their way to etcd, not after: the answer still leaves
        only once they are stored, but the etcd round trip no longer adds to the poll."""
        reconciling = time.perf_counter()  # stage timing (reader.stats: metrics.PollStats)
        member = await self.members.reconcile(group, member_id, _now_ms())
        self._reader.stats.reconcile.observe(time.perf_counter() - reconciling)
        if before_fetch is not None:
            before_fetch(member.record)
        if timeout_ms is None:
            timeout_ms = member.record.request_timeout_ms
        timeout_ms = max(0, min(timeout_ms, max_timeout_ms))
        deadline = time.monotonic() + timeout_ms / 1000
        if not member.owned:
            await self._wait_for_assignment(group, timeout_ms)
            member = await self.members.reconcile(group, member_id, _now_ms())
            if not member.owned:
                return member, []
        previous = dict(member.positions)
        positions = await self._start_positions(member)
        wait_ms = max(0, int((deadline - time.monotonic()) * 1000))
        reading = sorted(member.owned - paused)
        if not reading:  # everything paused: a long poll still waits (for a rebalance at most)
            await self._wait_for_assignment(
                group, max(0, int((deadline - time.monotonic()) * 1000))
            )
            return member, []
        reads = await self._reader.fetch(
            [(t, p, positions[position_key(t, p)]) for t, p in reading],
            max_wait_ms=wait_ms,
            max_bytes=max_bytes,
            min_bytes=max(1, member.record.fetch_min_bytes),
            owner=f"{group}/{member_id}",
        )
        polled: list[PolledRecord] = []
        size = 0
        for read in reads:
            key = position_key(read.topic, read.partition)
            if isinstance(read.error, OffsetOutOfRangeError):
                positions[key] = await self._reset(member.record, read.topic, read.partition)
                continue
            if read.error is not None:
                continue  # a leader moved: this partition is read again on the next poll
            for record in read.records:
                size += len(record.key or b"") + len(record.value or b"")
                if polled and size > max_bytes:
                    break
                polled.append((read.topic, read.partition, record))
                positions[key] = record.offset + 1
        if while_saving is None:
            await self._save(member, previous, positions)
            return member, polled
        saving = asyncio.ensure_future(self._save(member, previous, positions))
        await asyncio.sleep(0)  # let the save send its request before the CPU work below
        try:
            rendering = time.perf_counter()
            while_saving(member, polled)
            self._reader.stats.render.observe(time.perf_counter() - rendering)
        finally:
            await saving
        return member, polled

    async def _start_positions(self, member: Member) -> dict[str, int]:
        positions = {k: v for k, v in member.positions.items() if tuple_of(k) in member.owned}
        missing = [tp for tp in member.owned if position_key(*tp) not in positions]
        committed = await self.members.committed(member.group, missing)
        for topic, partition in missing:
            found = committed.get((topic, partition))
            positions[position_key(topic, partition)] = (
                found.offset
                if found is not None
                else await self._reset(member.record, topic, partition)
            )
        return positions

    async def _reset(self, record: GroupMember, topic: str, partition: int) -> int:
        policy = record.auto_offset_reset
        if policy == "none":
            raise OffsetOutOfRangeError(
                f"{topic}-{partition} has no committed offset (or it is out of range) and "
                "auto.offset.reset is none",
                topic=topic,
                partition=partition,
            )
        return (await self._reader.list_offsets(topic, partition, policy)).offset

    async def _save(
        self, member: Member, previous: dict[str, int], positions: dict[str, int]
    ) -> None:
        """New positions and the auto-commit of the previous ones, in one etcd transaction."""
        commit = {}
        if member.record.auto_commit:
            commit = {tuple_of(k): v for k, v in previous.items() if v >= 0}
        if commit or positions != member.positions:
            saving = time.perf_counter()
            await self.members.save_poll(member, positions, commit)
            self._reader.stats.save.observe(time.perf_counter() - saving)

    async def _wait_for_assignment(self, group: str, timeout_ms: int) -> None:
        """Until the group's state changes (an etcd watch) or the timeout."""
        if timeout_ms <= 0:
            return
        watch = self._store.watch_prefix(self._keyspace.group_state(group))
        with contextlib.suppress(TimeoutError, YakError):
            async with asyncio.timeout(timeout_ms / 1000), watch:
                async for _event in watch:
                    return

    # --- commits -----------------------------------------------------------------------------

    async def commit(
        self,
        group: str,
        member_id: str,
        offsets: dict[TopicPartition, int] | None,
        *,
        last_processed: bool = True,
        member_epoch: int | None = None,
    ) -> Member:
        """Commit ``offsets`` — with ``last_processed`` the last processed offset per partition,
        stored + 1 as Confluent does, else the next offset to read — or, with None, every
        position reached by polling. ``member_epoch``, when given, must be the member's."""
        member = await self.members.reconcile(group, member_id, _now_ms())
        if member_epoch is not None and member_epoch != member.epoch:
            raise FencedMemberEpochError(
                f"member epoch {member_epoch} is stale; the member is at epoch {member.epoch}",
                group=group,
                instance=member_id,
                member_epoch=member.epoch,
            )
        if offsets is None:
            await self._commit_positions(member)
            return member
        for (topic, partition), offset in offsets.items():
            if offset < 0:
                raise InvalidRequestError(
                    f"{topic}-{partition}: offset {offset} is negative", kind="invalid_data"
                )
        step = 1 if last_processed else 0
        await self.members.commit(member, {tp: o + step for tp, o in offsets.items()}, _now_ms())
        return member

    async def _commit_positions(self, member: Member) -> None:
        offsets = {
            tuple_of(k): v for k, v in member.positions.items() if tuple_of(k) in member.owned
        }
        if offsets:
            await self.members.commit(member, offsets, _now_ms())
