"""The member side of the consumer-group protocol as values: a member's state as its holder keeps
it, and the guarded writes that carry it to etcd (``member_protocol`` holds the decisions).

A consumer instance (a *member*) is served by one rest-proxy at a time, its *holder*, which keeps
the member's state in memory: ``Member`` — the record as read (``base``) with the fields the
protocol owns (subscription, manual assignment, ``owned``, epoch), what the group's state grants
it (``Grant``), its fetch positions and what etcd holds of them (``StoredPositions``);
``MemberRead`` is all of that as read from etcd at once. A decision's outcome is a ``Step``: the
member's next state and the ``Write`` that must succeed first — guards (``Guard``: mod_revisions
that must still hold) and operations (``Op``), as plain values, which
``member_store.MemberStore`` turns into etcd transactions. Frozen values; no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple

from yak.metadata.models import Assignment, GroupMember
from yak.types import TopicPartition

__all__ = [
    "EMPTY",
    "NO_POSITIONS",
    "DeleteMember",
    "Grant",
    "Guard",
    "Key",
    "Member",
    "MemberRead",
    "Offsets",
    "Op",
    "PutCommit",
    "PutMember",
    "PutPositions",
    "Step",
    "StoredPositions",
    "Write",
    "due_commits",
    "partition_set",
]

Offsets = Mapping[TopicPartition, int]
EMPTY: Offsets = MappingProxyType({})


class Grant(NamedTuple):
    """What the group's state (``groups/<g>/state``) grants one member."""

    #: The state key's mod_revision (0: no state): the guard of writes that rely on it.
    revision: int
    #: The store revision this is known at (a view of the state at least as new replaces it).
    as_of: int
    partitions: frozenset[TopicPartition] = frozenset()
    epoch: int = 0


class StoredPositions(NamedTuple):
    """The positions record as etcd holds it (``revision`` 0: there is none)."""

    revision: int
    positions: Offsets = EMPTY
    member_epoch: int = 0
    #: The proxy serving the member ("" : none) and the one that asked to ("": none).
    holder: str = ""
    wanted_by: str = ""


NO_POSITIONS = StoredPositions(0)


@dataclass(frozen=True, slots=True)
class MemberRead:
    """A member record, what the state grants it and its positions record, read at once."""

    group: str
    member_id: str
    record: GroupMember
    revision: int
    grant: Grant
    stored: StoredPositions


@dataclass(frozen=True, slots=True)
class Member:
    """One member as its holder keeps it (see the module docstring)."""

    group: str
    member_id: str
    #: The proxy holding the member (this one), as named in the positions record.
    holder: str
    #: The record as last read or written: its settings, and the base of the next record.
    base: GroupMember
    #: The member key's mod_revision.
    revision: int
    subscription: tuple[str, ...]
    pattern: str | None
    manual: frozenset[TopicPartition]
    owned: frozenset[TopicPartition]
    #: The member epoch of ``owned``.
    epoch: int
    grant: Grant
    #: Next offset to fetch, per owned partition that has one.
    positions: Offsets
    #: The positions etcd holds, at ``positions_revision`` (0: none).
    stored: Offsets
    positions_revision: int
    #: Auto-commit: the positions the client acknowledged by polling again.
    processed: Offsets = field(default_factory=dict)
    #: What this holder committed last, per partition (auto-commit writes only changes).
    auto_committed: Offsets = field(default_factory=dict)

    @property
    def subscribed(self) -> bool:
        return bool(self.subscription) or self.pattern is not None

    @property
    def granted(self) -> frozenset[TopicPartition]:
        """What the member may own now: the coordinator's grant, or its manual assignment."""
        return self.grant.partitions if self.subscribed else self.manual

    @property
    def granted_epoch(self) -> int:
        return self.grant.epoch if self.subscribed else self.epoch

    @property
    def auto_commit(self) -> bool:
        return self.base.auto_commit

    @property
    def dirty(self) -> bool:
        """Whether etcd lags the memory: positions moved, or an auto-commit is due."""
        return self.positions != self.stored or bool(due_commits(self))


class Key(StrEnum):
    """The keys a write may be guarded by."""

    MEMBER = "member"
    STATE = "state"
    POSITIONS = "positions"


class Guard(NamedTuple):
    """The key's mod_revision must still be ``revision`` (0: the key must be absent)."""

    key: Key
    revision: int


class PutMember(NamedTuple):
    """Store the member record: ``member.base`` with the fields ``member`` owns."""

    member: Member


class PutPositions(NamedTuple):
    """Store the positions record (on the member's lease)."""

    positions: Offsets
    member_epoch: int
    holder: str
    wanted_by: str = ""


class PutCommit(NamedTuple):
    """Store a committed offset (the next offset to read)."""

    partition: TopicPartition
    offset: int
    member_epoch: int
    time_ms: int


@dataclass(frozen=True, slots=True)
class DeleteMember:
    """Delete the member record and its positions."""


Op = PutMember | PutPositions | PutCommit | DeleteMember


@dataclass(frozen=True, slots=True)
class Write:
    """One guarded change of a member's keys (commits first, then record and positions)."""

    group: str
    member_id: str
    lease_id: int
    guards: tuple[Guard, ...]
    ops: tuple[Op, ...]


class Step(NamedTuple):
    """The member once ``write`` succeeded (``settle`` adds its revision), and the write."""

    member: Member
    write: Write | None = None


def partition_set(assignment: Assignment) -> frozenset[TopicPartition]:
    """A stored assignment as a set of (topic, partition)."""
    return frozenset(TopicPartition(tp.topic, p) for tp in assignment for p in tp.partitions)


def due_commits(member: Member) -> dict[TopicPartition, int]:
    """The auto-commits due: positions the client acknowledged by polling again, of partitions
    the member owns and is granted, not committed by this holder yet (none without auto-commit)."""
    if not member.auto_commit:
        return {}
    allowed = member.owned & member.granted
    return {
        tp: o
        for tp, o in member.processed.items()
        if tp in allowed and o >= 0 and member.auto_committed.get(tp) != o
    }
