"""``MemberStore``: consumer instances in etcd — a member read with its group's state and its
positions in one transaction, and a ``member_state.Write`` applied as compare-and-swap.

Keys (``docs/consumer-groups.md``): the member record ``groups/<g>/members/<m>`` and its
positions ``groups/<g>/positions/<m>``, both on the member's lease (its TTL is the instance
timeout); ``groups/<g>/state`` (read only: the coordinator writes it); ``offsets/<g>/<t>/<p>``; and
``groups/<g>/classic`` (read only: a broker's marker of a Kafka classic group, whose presence
refuses a member's creation with INCONSISTENT_GROUP_PROTOCOL — one kind per group).
The positions record is ``HeldPositions``: ``GroupPositions`` plus the proxy holding the member
and the one asking for it (a reader that does not know them ignores them).

This is the one place where values are decoded from etcd and encoded for it: the protocol's
plain values in, pydantic models out. A write of more than ``MAX_TXN_OPS`` operations (etcd
refuses more than 128) is split: commits first, each chunk under the same guards, the record
and positions in the last; if a guard fails midway, the commits before it stay (a commit of
real progress is never wrong). Any number of tasks of one event loop may call it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pydantic import ValidationError

from yak.errors import ConsumerInstanceExistsError, InconsistentGroupProtocolError
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import (
    Assignment,
    ClassicGroupMarker,
    CommittedOffset,
    GroupMember,
    GroupPositions,
    GroupState,
    TopicPartitions,
)
from yak.metadata.store import (
    Compare,
    DeleteOp,
    GetOp,
    GetResponse,
    KeyValue,
    LeaseExpiredError,
    MetadataStore,
    Op,
    PutOp,
)
from yak.types import TopicPartition
from yak_rest_proxy.consume.membership.member_state import (
    NO_POSITIONS,
    DeleteMember,
    Grant,
    Guard,
    Key,
    Member,
    MemberRead,
    PutCommit,
    PutMember,
    PutPositions,
    StoredPositions,
    Write,
    partition_set,
)
from yak_rest_proxy.consume.membership.member_state import Op as MemberOp

__all__ = [
    "MAX_TXN_OPS",
    "HeldPositions",
    "MemberStore",
    "as_assignment",
    "grant_of",
    "stored_positions",
]

#: Operations per etcd transaction (etcd's default --max-txn-ops is 128).
MAX_TXN_OPS = 100


class HeldPositions(GroupPositions):
    """``groups/<g>/positions/<m>``: fetch positions, and who serves the member."""

    #: The proxy holding the member ("": none), and the one that asked for it ("": none).
    holder: str = ""
    wanted_by: str = ""


def as_assignment(partitions: Iterable[TopicPartition]) -> Assignment:
    """A set of (topic, partition) in its stored form: by topic, partitions sorted."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        by_topic.setdefault(topic, []).append(partition)
    return tuple(TopicPartitions(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items())


def grant_of(state: GroupState | None, revision: int, as_of: int, member_id: str) -> Grant:
    """What ``state`` (the state key's value at mod_revision ``revision``) grants a member."""
    if state is None:
        return Grant(revision, as_of)
    return Grant(
        revision,
        as_of,
        partition_set(state.current_assignment.get(member_id, ())),
        state.member_epochs.get(member_id, 0),
    )


def stored_positions(kv: KeyValue | None) -> StoredPositions:
    """A positions record as read (a malformed one counts as none)."""
    if kv is None:
        return NO_POSITIONS
    try:
        value = HeldPositions.decode(kv.value)
    except ValidationError:
        return StoredPositions(kv.mod_revision)
    positions = {_partition_of(k): o for k, o in value.positions.items()}
    return StoredPositions(
        kv.mod_revision, positions, value.member_epoch, value.holder, value.wanted_by
    )


def record_of(member: Member) -> GroupMember:
    """The member record to store: ``member.base`` with the fields the protocol owns."""
    return member.base.model_copy(
        update={
            "subscription": member.subscription,
            "subscription_pattern": member.pattern,
            "manual_assignment": as_assignment(member.manual),
            "owned": as_assignment(member.owned),
            "member_epoch": member.epoch,
        }
    )


class MemberStore:
    """Reads and writes consumer instances (see the module docstring)."""

    def __init__(self, store: MetadataStore, keyspace: Keyspace) -> None:
        self._store = store
        self._keyspace = keyspace

    async def create(
        self, group: str, record: GroupMember, timeout_ms: int, holder: str
    ) -> MemberRead:
        """Put the record (and positions held by ``holder``) on a new lease, if absent."""
        keys = self._keyspace
        member_key = keys.group_member(group, record.member_id)
        lease = await self._store.grant_lease(max(1, math.ceil(timeout_ms / 1000)))
        record = record.model_copy(update={"lease_id": lease})
        positions = HeldPositions(member_id=record.member_id, member_epoch=0, holder=holder)
        classic = keys.group_classic(group)
        result = await self._store.txn(
            [Compare.absent(member_key), Compare.absent(classic)],
            [
                PutOp(member_key, record.encode(), lease),
                PutOp(keys.group_positions(group, record.member_id), positions.encode(), lease),
                GetOp(keys.group_state(group)),
            ],
            [GetOp(classic)],
        )
        if not result.succeeded:
            await self._store.revoke_lease(lease)
            marker = _first(result.responses[0])
            if marker is not None:
                raise _kafka_members(group, marker)
            raise ConsumerInstanceExistsError(
                f"consumer instance {record.member_id!r} already exists in group {group!r}",
                group=group,
                instance=record.member_id,
            )
        state_kv = _first(result.responses[2])
        return MemberRead(
            group,
            record.member_id,
            record,
            result.revision,
            _grant(state_kv, result.revision, record.member_id),
            StoredPositions(result.revision, holder=holder),
        )

    async def read(self, group: str, member_id: str) -> MemberRead | None:
        """The member, its grant and its positions record; None if there is no such member."""
        keys = self._keyspace
        gets = [
            GetOp(keys.group_member(group, member_id)),
            GetOp(keys.group_state(group)),
            GetOp(keys.group_positions(group, member_id)),
        ]
        result = await self._store.txn([], gets)
        member_kv, state_kv, positions_kv = (_first(r) for r in result.responses)
        if member_kv is None:
            return None
        return MemberRead(
            group,
            member_id,
            GroupMember.decode(member_kv.value),
            member_kv.mod_revision,
            _grant(state_kv, result.revision, member_id),
            stored_positions(positions_kv),
        )

    async def apply(self, write: Write) -> int | None:
        """Apply ``write``; the revision of its last transaction, or None if a guard failed
        (or the member's lease is gone)."""
        compares = [self._compare(write, guard) for guard in write.guards]
        commits: list[Op] = [self._op(write, op) for op in write.ops if isinstance(op, PutCommit)]
        rest = [
            o for op in write.ops if not isinstance(op, PutCommit) for o in self._ops(write, op)
        ]
        chunks = [commits[i : i + MAX_TXN_OPS] for i in range(0, len(commits), MAX_TXN_OPS)]
        if chunks and len(chunks[-1]) + len(rest) <= MAX_TXN_OPS:
            chunks[-1] = chunks[-1] + rest
        elif rest:
            chunks.append(rest)
        revision = None
        try:
            for chunk in chunks:
                result = await self._store.txn(compares, chunk)
                if not result.succeeded:
                    return None
                revision = result.revision
        except LeaseExpiredError:
            return None
        return revision

    async def committed(
        self, group: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, CommittedOffset]:
        wanted = sorted(set(partitions))
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

    async def keep_alive(self, lease_id: int) -> bool:
        """Refresh a member's lease; False if it expired (the member is gone)."""
        try:
            await self._store.keep_alive_once(lease_id)
        except LeaseExpiredError:
            return False
        return True

    async def revoke(self, lease_id: int) -> None:
        await self._store.revoke_lease(lease_id)

    # -- encoding ------------------------------------------------------------------------------

    def _key(self, write: Write, key: Key) -> str:
        keys = self._keyspace
        if key is Key.MEMBER:
            return keys.group_member(write.group, write.member_id)
        if key is Key.STATE:
            return keys.group_state(write.group)
        return keys.group_positions(write.group, write.member_id)

    def _compare(self, write: Write, guard: Guard) -> Compare:
        key = self._key(write, guard.key)
        return (
            Compare.absent(key)
            if guard.revision == 0
            else Compare.mod_revision(key, guard.revision)
        )

    def _ops(self, write: Write, op: MemberOp) -> list[Op]:
        if isinstance(op, DeleteMember):
            return [
                DeleteOp(self._key(write, Key.MEMBER)),
                DeleteOp(self._key(write, Key.POSITIONS)),
            ]
        return [self._op(write, op)]

    def _op(self, write: Write, op: PutMember | PutPositions | PutCommit) -> PutOp:
        if isinstance(op, PutCommit):
            topic, partition = op.partition
            mark = CommittedOffset(
                offset=op.offset, member_epoch=op.member_epoch, commit_time_ms=op.time_ms
            )
            return PutOp(
                self._keyspace.committed_offset(write.group, topic, partition), mark.encode()
            )
        if isinstance(op, PutMember):
            return PutOp(
                self._key(write, Key.MEMBER), record_of(op.member).encode(), write.lease_id
            )
        value = HeldPositions(
            member_id=write.member_id,
            member_epoch=op.member_epoch,
            positions={f"{t}/{p}": o for (t, p), o in sorted(op.positions.items())},
            holder=op.holder,
            wanted_by=op.wanted_by,
        )
        return PutOp(self._key(write, Key.POSITIONS), value.encode(), write.lease_id)


def _kafka_members(group: str, marker: KeyValue) -> InconsistentGroupProtocolError:
    """One kind per group: the group's marker says Kafka-protocol members hold it."""
    try:
        broker: int | None = ClassicGroupMarker.decode(marker.value).broker_id
    except ValidationError:
        broker = None
    return InconsistentGroupProtocolError(
        f"group {group!r} has Kafka-protocol members (a classic group, coordinator broker "
        f"{broker}): one kind of member per group",
        group=group,
        coordinator=broker,
    )


def _grant(state_kv: KeyValue | None, as_of: int, member_id: str) -> Grant:
    if state_kv is None:
        return Grant(0, as_of)
    return grant_of(GroupState.decode(state_kv.value), state_kv.mod_revision, as_of, member_id)


def _partition_of(position: str) -> TopicPartition:
    topic, _, partition = position.rpartition("/")
    return TopicPartition(topic, int(partition))


def _first(response: object) -> KeyValue | None:
    assert isinstance(response, GetResponse)
    return response.kvs[0] if response.kvs else None
