"""Consumer instances kept in etcd, so that any proxy serves any instance.

One ``GroupMember`` record per instance under ``groups/<g>/members/<m>``, on a lease of its own
whose TTL is the instance timeout; every request for the instance refreshes the lease (at most
once a second per proxy), so an idle instance disappears by itself and the coordinator gives
its partitions to the others. Changes are compare-and-swap on the record's ``mod_revision``,
retried on a lost race, so two proxies serving one instance at once never lose an update.

The protocol with the coordinator (who owns what, when a partition may move) is
``docs/consumer-groups.md``; ``reconcile`` is the member side of it. Single event loop.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterable
from typing import NamedTuple

from yak.errors import (
    ConsumerInstanceExistsError,
    FencedMemberEpochError,
    MetadataStoreError,
    UnknownMemberIdError,
)
from yak.metadata.keyspace import Keyspace, validate_member_id
from yak.metadata.models import (
    Assignment,
    CommittedOffset,
    GroupMember,
    GroupPositions,
    GroupState,
    TopicPartitions,
)
from yak.metadata.store import (
    Compare,
    CompareOp,
    DeleteOp,
    GetOp,
    GetResponse,
    KeyValue,
    LeaseExpiredError,
    MetadataStore,
    Op,
    PutOp,
    TxnResult,
)
from yak.names import validate_group_id

__all__ = [
    "MAX_TXN_OPS",
    "Member",
    "MemberStore",
    "TopicPartition",
    "as_assignment",
    "new_instance_id",
    "partitions_of",
    "position_key",
    "tuple_of",
]

TopicPartition = tuple[str, int]

_ATTEMPTS = 20
#: Operations per etcd transaction (etcd's default --max-txn-ops is 128).
MAX_TXN_OPS = 100
_KEEPALIVE_EVERY_S = 1.0


def partitions_of(assignment: Assignment) -> set[TopicPartition]:
    return {(tp.topic, p) for tp in assignment for p in tp.partitions}


def as_assignment(partitions: Iterable[TopicPartition]) -> Assignment:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        by_topic.setdefault(topic, []).append(partition)
    return tuple(TopicPartitions(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items())


def position_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


class Member(NamedTuple):
    """A member record as read, with what the member side of the protocol needs beside it."""

    group: str
    record: GroupMember
    revision: int  # the member key's mod_revision
    state: GroupState | None
    state_revision: int  # 0: no state key
    positions: dict[str, int]

    @property
    def owned(self) -> set[TopicPartition]:
        return partitions_of(self.record.owned)

    @property
    def granted(self) -> set[TopicPartition]:
        """What the member may own now: its manual assignment, or the coordinator's grant."""
        if not self.record.subscribed:
            return partitions_of(self.record.manual_assignment)
        if self.state is None:
            return set()
        return partitions_of(self.state.current_assignment.get(self.record.member_id, ()))

    @property
    def epoch(self) -> int:
        if self.state is None or not self.record.subscribed:
            return self.record.member_epoch
        return self.state.member_epochs.get(self.record.member_id, 0)


class MemberStore:
    """Reads and writes consumer instances (see the module docstring)."""

    def __init__(self, store: MetadataStore, keyspace: Keyspace) -> None:
        self._store = store
        self._keyspace = keyspace
        self._touched: dict[int, float] = {}

    async def create(self, group: str, record: GroupMember, timeout_ms: int) -> GroupMember:
        validate_group_id(group)
        key = self._keyspace.group_member(group, record.member_id)
        lease = await self._store.grant_lease(max(1, math.ceil(timeout_ms / 1000)))
        record = record.model_copy(update={"lease_id": lease})
        result = await self._store.txn([Compare.absent(key)], [PutOp(key, record.encode(), lease)])
        if not result.succeeded:
            await self._store.revoke_lease(lease)
            raise ConsumerInstanceExistsError(
                f"consumer instance {record.member_id!r} already exists in group {group!r}",
                group=group,
                instance=record.member_id,
            )
        return record

    async def load(self, group: str, member_id: str) -> Member:
        """The member, its group state and positions in one read; refreshes its lease."""
        validate_group_id(group)
        try:
            validate_member_id(member_id)
        except ValueError:
            raise self._missing(group, member_id) from None
        keys = (
            self._keyspace.group_member(group, member_id),
            self._keyspace.group_state(group),
            self._keyspace.group_positions(group, member_id),
        )
        read = await self._store.txn([], [GetOp(k) for k in keys])
        member_kv, state_kv, positions_kv = (_first(r) for r in read.responses)
        if member_kv is None:
            raise self._missing(group, member_id)
        record = GroupMember.decode(member_kv.value)
        await self._touch(record, group)
        state = GroupState.decode(state_kv.value) if state_kv is not None else None
        positions = (
            dict(GroupPositions.decode(positions_kv.value).positions) if positions_kv else {}
        )
        return Member(
            group,
            record,
            member_kv.mod_revision,
            state,
            state_kv.mod_revision if state_kv is not None else 0,
            positions,
        )

    async def _touch(self, record: GroupMember, group: str) -> None:
        now = time.monotonic()
        if now - self._touched.get(record.lease_id, 0.0) < _KEEPALIVE_EVERY_S:
            return
        try:
            await self._store.keep_alive_once(record.lease_id)
        except LeaseExpiredError:
            raise self._missing(group, record.member_id) from None
        self._touched[record.lease_id] = now
        if len(self._touched) > 10_000:
            self._touched.clear()

    def _missing(self, group: str, member_id: str) -> UnknownMemberIdError:
        return UnknownMemberIdError(
            f"consumer instance {member_id!r} not found in group {group!r} "
            "(it was deleted or expired after its instance timeout)",
            group=group,
            instance=member_id,
        )

    async def delete(self, member: Member) -> None:
        keys = self._keyspace
        group, member_id = member.group, member.record.member_id
        await self._store.txn(
            [],
            [
                DeleteOp(keys.group_member(group, member_id)),
                DeleteOp(keys.group_positions(group, member_id)),
            ],
        )
        self._touched.pop(member.record.lease_id, None)
        await self._store.revoke_lease(member.record.lease_id)

    async def update(
        self, group: str, member_id: str, change: Callable[[Member], GroupMember]
    ) -> Member:
        """Apply ``change`` to the member record with compare-and-swap, retrying on a race."""
        for _ in range(_ATTEMPTS):
            member = await self.load(group, member_id)
            record = change(member)
            key = self._keyspace.group_member(group, member_id)
            ops = [PutOp(key, record.encode(), record.lease_id)]
            result = await self._store.txn([Compare.mod_revision(key, member.revision)], ops)
            if result.succeeded:
                return member._replace(record=record, revision=result.revision)
        raise MetadataStoreError(f"instance {member_id!r}: too many concurrent updates")

    async def reconcile(self, group: str, member_id: str, now_ms: int) -> Member:
        """The member side of the protocol: release what it may no longer own (auto-committing
        its positions), take what it was granted; return the member as it now stands."""
        for _ in range(_ATTEMPTS):
            member = await self.load(group, member_id)
            granted, owned = member.granted, member.owned
            if granted == owned and member.epoch == member.record.member_epoch:
                return member
            released = owned - granted
            positions = {
                k: v
                for k, v in member.positions.items()
                if tuple_of(k) not in released or tuple_of(k) in granted
            }
            record = member.record.model_copy(
                update={"owned": as_assignment(granted), "member_epoch": member.epoch}
            )
            ops: list[Op] = []
            if record.auto_commit:
                for topic, partition in sorted(released):
                    offset = member.positions.get(position_key(topic, partition))
                    if offset is not None:
                        ops.append(
                            self.commit_op(group, topic, partition, offset, member.epoch, now_ms)
                        )
            ops += [self._put_member(group, record), self._put_positions(group, record, positions)]
            compares = [
                Compare.mod_revision(
                    self._keyspace.group_member(group, member_id), member.revision
                ),
                self._state_guard(group, member.state_revision),
            ]
            result = await self._txn(compares, ops)
            if result is not None:
                return member._replace(record=record, revision=result.revision, positions=positions)
        raise MetadataStoreError(f"instance {member_id!r}: too many concurrent updates")

    async def _txn(self, compares: list[Compare], ops: list[Op]) -> TxnResult | None:
        """``ops`` in order, in transactions of at most ``MAX_TXN_OPS`` (etcd refuses more
        than 128), each guarded by ``compares``; the last result, or None at the first that
        failed (the ones before it stay: only commits come before the last chunk, and a commit
        of real progress is never wrong)."""
        result: TxnResult | None = None
        for start in range(0, len(ops), MAX_TXN_OPS):
            result = await self._store.txn(compares, ops[start : start + MAX_TXN_OPS])
            if not result.succeeded:
                return None
        return result

    def _state_guard(self, group: str, state_revision: int) -> Compare:
        key = self._keyspace.group_state(group)
        return (
            Compare.absent(key)
            if state_revision == 0
            else Compare.mod_revision(key, state_revision)
        )

    def _put_member(self, group: str, record: GroupMember) -> PutOp:
        key = self._keyspace.group_member(group, record.member_id)
        return PutOp(key, record.encode(), record.lease_id)

    def _put_positions(self, group: str, record: GroupMember, positions: dict[str, int]) -> PutOp:
        value = GroupPositions(
            member_id=record.member_id, member_epoch=record.member_epoch, positions=positions
        )
        key = self._keyspace.group_positions(group, record.member_id)
        return PutOp(key, value.encode(), record.lease_id)

    def commit_op(
        self, group: str, topic: str, partition: int, offset: int, epoch: int, now_ms: int
    ) -> PutOp:
        value = CommittedOffset(offset=offset, member_epoch=epoch, commit_time_ms=now_ms)
        return PutOp(self._keyspace.committed_offset(group, topic, partition), value.encode())

    async def save_positions(self, member: Member, positions: dict[str, int]) -> None:
        """Store fetch positions (only while the member still exists)."""
        key = self._keyspace.group_member(member.group, member.record.member_id)
        result = await self._store.txn(
            [Compare.version(key, 0, CompareOp.GREATER)],
            [self._put_positions(member.group, member.record, positions)],
        )
        if not result.succeeded:
            raise self._missing(member.group, member.record.member_id)

    async def commit(self, member: Member, offsets: dict[TopicPartition, int], now_ms: int) -> None:
        """Commit ``offsets`` (next offsets to read) if the member still owns every partition;
        else ``FENCED_MEMBER_EPOCH``. Fenced by the state key's revision for group members."""
        not_owned = sorted(set(offsets) - (member.owned & member.granted))
        if not_owned:
            shown = ", ".join(f"{t}-{p}" for t, p in not_owned)
            raise _fenced(member, shown)
        group, member_id = member.group, member.record.member_id
        member_key = self._keyspace.group_member(group, member_id)
        compares = [Compare.mod_revision(member_key, member.revision)]
        if member.record.subscribed:
            compares.append(self._state_guard(group, member.state_revision))
        ops: list[Op] = [
            self.commit_op(group, t, p, o, member.epoch, now_ms) for (t, p), o in offsets.items()
        ]
        if await self._txn(compares, ops) is None:
            fresh = await self.reconcile(group, member_id, now_ms)
            if set(offsets) - (fresh.owned & fresh.granted):
                raise _fenced(fresh, "a partition that moved meanwhile")
            retried = await self._txn(
                [
                    Compare.mod_revision(member_key, fresh.revision),
                    *(
                        [self._state_guard(group, fresh.state_revision)]
                        if fresh.record.subscribed
                        else []
                    ),
                ],
                ops,
            )
            if retried is None:
                raise _fenced(fresh, "its partitions while the group was changing")

    async def save_poll(
        self, member: Member, positions: dict[str, int], commit: dict[TopicPartition, int]
    ) -> None:
        """Store new positions and, in the same transaction, auto-commit ``commit`` (fenced as
        ``commit`` is; if the fence fails only the positions are stored)."""
        group, member_id = member.group, member.record.member_id
        exists = Compare.version(
            self._keyspace.group_member(group, member_id), 0, CompareOp.GREATER
        )
        put = self._put_positions(group, member.record, positions)
        allowed = member.owned & member.granted
        commits: list[Op] = [
            self.commit_op(group, t, p, o, member.epoch, int(time.time() * 1000))
            for (t, p), o in commit.items()
            if (t, p) in allowed
        ]
        if commits:
            compares = [exists]
            if member.record.subscribed:
                compares.append(self._state_guard(group, member.state_revision))
            if await self._txn(compares, [*commits, put]) is not None:
                return
        if not (await self._store.txn([exists], [put])).succeeded:
            raise self._missing(group, member_id)

    async def committed(
        self, group: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, CommittedOffset]:
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        found: dict[TopicPartition, CommittedOffset] = {}
        for start in range(0, len(wanted), MAX_TXN_OPS):
            chunk = wanted[start : start + MAX_TXN_OPS]
            read = await self._store.txn(
                [], [GetOp(self._keyspace.committed_offset(group, t, p)) for t, p in chunk]
            )
            for tp, response in zip(chunk, read.responses, strict=True):
                kv = _first(response)
                if kv is not None:
                    found[tp] = CommittedOffset.decode(kv.value)
        return found


def new_instance_id(node_id: str) -> str:
    return f"rest-consumer-{node_id}-{uuid.uuid4().hex}"


def tuple_of(position: str) -> TopicPartition:
    topic, _, partition = position.rpartition("/")
    return topic, int(partition)


def _first(response: object) -> KeyValue | None:
    assert isinstance(response, GetResponse)
    return response.kvs[0] if response.kvs else None


def _fenced(member: Member, what: str) -> FencedMemberEpochError:
    return FencedMemberEpochError(
        f"consumer instance {member.record.member_id!r} does not own {what} "
        f"(member epoch {member.epoch}); it was reassigned or never assigned",
        group=member.group,
        instance=member.record.member_id,
    )
