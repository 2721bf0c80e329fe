"""Consumer-group administration from the proxy: describe with lag, delete, offset reset.

The group's state and members come from the active controller (``GET /admin/v1/groups/{g}``,
which also tells ``PreparingRebalance`` apart); committed offsets from etcd; end offsets from
the partitions' leaders. Lag is ``end offset - committed offset`` (the end offset when nothing
was committed). Deleting a group or resetting its offsets is refused while it has members
(``NON_EMPTY_GROUP``), unless the reset is forced — as Kafka's tools refuse an active group.
A reset ``explicit`` sets each listed partition to its own offset (``yak groups offsets
import``, Kafka's ``--from-file``), clamped into the partition's log like the others.
"""

from __future__ import annotations

from yak.api.groups import (
    GroupDescription,
    MemberDescription,
    OffsetResetRequest,
    OffsetResetResult,
    PartitionLag,
    PartitionOffsetChange,
    TopicPartitionList,
)
from yak.clients.admin import AdminClient
from yak.clock import Clock
from yak.errors import (
    GroupIdNotFoundError,
    GroupNotEmptyError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
    YakError,
)
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import KeyKind, Keyspace
from yak.metadata.models import CommittedOffset
from yak.metadata.store import MetadataStore, Op, PutOp
from yak.names import validate_group_id
from yak.types import TopicPartition
from yak_rest_proxy.consume.holding.member_store import MAX_TXN_OPS
from yak_rest_proxy.consume.reader import Reader

__all__ = ["GroupAdmin"]


def _lists(assignment: list[object]) -> list[TopicPartitionList]:
    return [TopicPartitionList.model_validate(a, from_attributes=True) for a in assignment]


class GroupAdmin:
    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        cache: MetadataCache,
        reader: Reader,
        *,
        clock: Clock,
    ) -> None:
        self._store = store
        self._clock = clock
        self._keyspace = keyspace
        self._cache = cache
        self._reader = reader

    async def committed(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        found = await self._store.range_prefix(self._keyspace.group_offsets_prefix(group))
        offsets = {}
        for kv in found.kvs:
            parsed = self._keyspace.parse(kv.key)
            if parsed is None or parsed.kind is not KeyKind.COMMITTED_OFFSET:
                continue
            assert parsed.topic is not None
            assert parsed.partition is not None
            offsets[TopicPartition(parsed.topic, parsed.partition)] = CommittedOffset.decode(
                kv.value
            )
        return offsets

    async def _end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The end offset of each partition that has a leader to ask (the others left out)."""
        found = await self._reader.list_offsets_many(partitions, "latest")
        return {
            TopicPartition(*tp): result.offset
            for tp, result in found.items()
            if not isinstance(result, YakError)
        }

    async def _offsets(
        self, partitions: list[TopicPartition], timestamp: int | str
    ) -> dict[TopicPartition, int]:
        """Each partition's offset at ``timestamp``; the first error met if any has none."""
        found = await self._reader.list_offsets_many(partitions, timestamp)
        offsets = {}
        for tp in partitions:
            result = found[tp]
            if isinstance(result, YakError):
                raise result
            offsets[tp] = result.offset
        return offsets

    async def describe(self, admin: AdminClient, group: str) -> GroupDescription:
        validate_group_id(group)
        committed = await self.committed(group)
        try:
            described = await admin.describe_group(group)
        except GroupIdNotFoundError:
            if not committed:
                raise
            described = None
        owners: dict[TopicPartition, str] = {}
        members = []
        for member in described.members if described is not None else []:
            for owned in member.owned:
                for partition in owned.partitions:
                    owners[TopicPartition(owned.topic, partition)] = member.member_id
            members.append(
                MemberDescription(
                    member_id=member.member_id,
                    subscription=member.subscription,
                    topic_pattern=member.subscription_pattern,
                    assignor=member.assignor,
                    member_epoch=member.member_epoch,
                    owned=_lists(list(member.owned)),
                    target=_lists(list(member.target)),
                )
            )
        partitions = sorted(set(committed) | set(owners))
        ends = await self._end_offsets(partitions)
        lags = []
        for tp in partitions:
            end = ends.get(tp, -1)
            mark = committed.get(tp)
            done = mark.offset if mark is not None else 0
            lags.append(
                PartitionLag(
                    topic=tp[0],
                    partition=tp[1],
                    committed_offset=mark.offset if mark is not None else None,
                    end_offset=end,
                    lag=max(0, end - done) if end >= 0 else 0,
                    owner=owners.get(tp),
                )
            )
        return GroupDescription(
            group_id=group,
            state=described.state if described is not None else "Empty",
            group_epoch=described.group_epoch if described is not None else 0,
            assignor=described.assignor if described is not None else "",
            members=members,
            partitions=lags,
            total_lag=sum(lag.lag for lag in lags),
        )

    async def _member_count(self, group: str) -> int:
        """REST member records, and one for a Kafka classic group's marker (its members live
        in its coordinating broker's memory): a group with either kind is not empty."""
        found = await self._store.range_prefix(self._keyspace.group_members_prefix(group))
        classic = await self._store.get(self._keyspace.group_classic(group))
        return len(found.kvs) + (classic is not None)

    async def delete(self, group: str) -> None:
        validate_group_id(group)
        members = await self._member_count(group)
        if members:
            raise GroupNotEmptyError(
                f"group {group!r} has {members} active member(s); stop them first", group=group
            )
        removed = await self._store.delete_prefix(self._keyspace.group_prefix(group))
        removed += await self._store.delete_prefix(self._keyspace.group_offsets_prefix(group))
        if not removed:
            raise GroupIdNotFoundError(f"group {group!r} does not exist", group=group)

    async def reset(self, group: str, request: OffsetResetRequest) -> OffsetResetResult:
        validate_group_id(group)
        committed = await self.committed(group)
        partitions = self._partitions(request, committed)
        if not partitions:  # none named (the document says a list names one at least)
            raise GroupIdNotFoundError(
                f"group {group!r} has no committed offsets: name the topics to reset",
                group=group,
            )
        members = await self._member_count(group)
        if members and not request.force:
            raise GroupNotEmptyError(
                f"group {group!r} has {members} active member(s); offsets can only be reset "
                "while it is empty (stop its consumers, or pass force)",
                group=group,
            )
        targets = await self._targets(partitions, request)
        changes = [
            PartitionOffsetChange(
                topic=tp.topic,
                partition=tp.partition,
                previous=committed[tp].offset if tp in committed else None,
                new=targets[tp],
            )
            for tp in partitions
        ]
        if not request.dry_run:
            now_ms = self._clock.time_ms()
            ops: list[Op] = [
                PutOp(
                    self._keyspace.committed_offset(group, c.topic, c.partition),
                    CommittedOffset(offset=c.new, commit_time_ms=now_ms).encode(),
                )
                for c in changes
            ]
            for start in range(0, len(ops), MAX_TXN_OPS):
                await self._store.txn([], ops[start : start + MAX_TXN_OPS])
        return OffsetResetResult(dry_run=request.dry_run, partitions=changes)

    def _partitions(
        self, request: OffsetResetRequest, committed: dict[TopicPartition, CommittedOffset]
    ) -> list[TopicPartition]:
        snapshot = self._cache.snapshot
        if request.offsets is not None:
            for o in request.offsets:
                record = snapshot.topics.get(o.topic)
                if record is None or o.partition >= record.partitions:
                    raise UnknownTopicOrPartitionError(
                        f"partition {o.topic}-{o.partition} does not exist",
                        topic=o.topic,
                        partition=o.partition,
                    )
            return [TopicPartition(o.topic, o.partition) for o in request.offsets]
        topics = (
            list(dict.fromkeys(request.topics))
            if request.topics is not None
            else sorted({t for t, _ in committed})
        )
        partitions: list[TopicPartition] = []
        for topic in topics:
            record = snapshot.topics.get(topic)
            if record is None:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist", topic=topic)
            partitions += [TopicPartition(topic, p) for p in range(record.partitions)]
        return partitions

    async def _targets(
        self, partitions: list[TopicPartition], request: OffsetResetRequest
    ) -> dict[TopicPartition, int]:
        explicit = {(o.topic, o.partition): o.offset for o in request.offsets or ()}
        firsts = await self._offsets(partitions, "earliest")
        ends = await self._offsets(partitions, "latest")
        stamped = {}
        if request.to == "timestamp" and request.timestamp is not None:
            found = await self._reader.list_offsets_many(partitions, request.timestamp)
            stamped = {tp: found[tp] for tp in partitions}
        targets = {}
        for topic, partition in partitions:
            earliest = firsts[TopicPartition(topic, partition)]
            latest = ends[TopicPartition(topic, partition)]
            if request.to == "earliest":
                target = earliest
            elif request.to == "latest":
                target = latest
            elif request.to == "explicit":
                target = min(max(explicit[(topic, partition)], earliest), latest)
            elif request.to == "offset":
                if request.offset is None:
                    raise InvalidRequestError("to=offset needs offset")
                target = min(max(request.offset, earliest), latest)
            else:
                if request.timestamp is None:
                    raise InvalidRequestError("to=timestamp needs timestamp")
                result = stamped[TopicPartition(topic, partition)]
                if isinstance(result, YakError):
                    raise result
                target = result.offset if result.offset >= 0 else latest
            targets[TopicPartition(topic, partition)] = target
        return targets
