"""The coordinator's copy of the ``groups/`` keys: member records and states, with revisions.

Fed by one range read (``load``) and then by the watch events that follow it (``apply``); a
group may also be refreshed on its own by a read of its prefix (``replace``, e.g. the read
inside the controller's state transaction). That read may be ahead of the watch, so each group
remembers the revision it was read at (``floor``) and ignores watch events up to it: they are
already reflected.

Each member record keeps its ``mod_revision``, which the controller's state write compares. A
value that fails validation is logged and kept as "present but unreadable" (its revision still
guards the write; the member takes no part). Positions are not kept: nothing is computed from
them. Plain data, no I/O; one task owns a view.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import ValidationError

from yak.errors import InvalidGroupIdError
from yak.metadata.keyspace import KeyKind, Keyspace, ParsedKey, validate_member_id
from yak.metadata.models import GroupMember, GroupState
from yak.metadata.store import EventKind, KeyValue, RangeResult, WatchEvent
from yak.names import validate_group_id

__all__ = ["GroupRecords", "GroupsView", "StoredMember"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoredMember:
    """A member record and its ``mod_revision``; ``record`` is None if it is malformed."""

    record: GroupMember | None
    mod_revision: int


@dataclass(slots=True)
class GroupRecords:
    """One group's member records and state as last seen."""

    members: dict[str, StoredMember] = field(default_factory=dict)
    state: GroupState | None = None
    #: The state key's ``mod_revision`` (0: absent; it may be malformed while ``state`` is None).
    state_revision: int = 0
    #: Every change up to this revision is reflected (a direct read of the group).
    floor: int = 0

    def live_members(self) -> dict[str, GroupMember]:
        """The readable member records by member id."""
        return {m: s.record for m, s in sorted(self.members.items()) if s.record is not None}

    @property
    def exists(self) -> bool:
        return bool(self.members) or self.state_revision > 0


class GroupsView:
    """Member records and states of every group of one cluster (see the module docstring)."""

    def __init__(self, keyspace: Keyspace) -> None:
        self._keyspace = keyspace
        #: The highest revision seen (the read's, then the watch's).
        self.revision = 0
        self.groups: dict[str, GroupRecords] = {}

    def load(self, result: RangeResult) -> set[str]:
        """Start over from a read of ``groups/``; return every group before or after."""
        before = set(self.groups)
        self.groups = {}
        for kv in result.kvs:
            self._put(kv.key, kv.value, kv.mod_revision)
        self.revision = result.revision
        return before | set(self.groups)

    def apply(self, event: WatchEvent) -> str | None:
        """Apply one watch event; return the group whose records changed, if any."""
        self.revision = max(self.revision, event.mod_revision)
        parsed = self._keyspace.parse(event.key)
        if parsed is None or parsed.group is None:
            return None
        records = self.groups.get(parsed.group)
        if records is not None and event.mod_revision <= records.floor:
            return None  # a direct read already saw it
        if event.kind is EventKind.PUT:
            return self._put(event.key, event.value, event.mod_revision)
        if records is None:
            return None
        if parsed.kind is KeyKind.GROUP_MEMBER and parsed.member is not None:
            records.members.pop(parsed.member, None)
        elif parsed.kind is KeyKind.GROUP_STATE:
            records.state, records.state_revision = None, 0
        else:
            return None
        self._forget_if_gone(parsed.group)
        return parsed.group

    def replace(self, group: str, kvs: Iterable[KeyValue], revision: int) -> None:
        """Replace one group's records with a read of its prefix made at ``revision``."""
        self.groups.pop(group, None)
        for kv in kvs:
            self._put(kv.key, kv.value, kv.mod_revision)
        self.groups.setdefault(group, GroupRecords()).floor = revision
        self._forget_if_gone(group)

    def member_revisions(self, group: str) -> Mapping[str, int]:
        """Each present member key's ``mod_revision`` (readable or not)."""
        records = self.groups.get(group)
        if records is None:
            return {}
        return {m: s.mod_revision for m, s in records.members.items()}

    def _put(self, key: bytes, value: bytes, revision: int) -> str | None:
        parsed = self._keyspace.parse(key)
        if parsed is None or parsed.group is None or not _valid_ids(parsed):
            return None
        if parsed.kind is KeyKind.GROUP_MEMBER and parsed.member is not None:
            records = self.groups.setdefault(parsed.group, GroupRecords())
            record = _decode(GroupMember, key, value)
            records.members[parsed.member] = StoredMember(record, revision)
        elif parsed.kind is KeyKind.GROUP_STATE:
            records = self.groups.setdefault(parsed.group, GroupRecords())
            records.state, records.state_revision = _decode(GroupState, key, value), revision
        else:
            return None
        return parsed.group

    def _forget_if_gone(self, group: str) -> None:
        records = self.groups.get(group)
        # An empty group read directly stays until the watch passes its floor (stale events).
        if records is not None and not records.exists and records.floor <= self.revision:
            del self.groups[group]


def _valid_ids(parsed: ParsedKey) -> bool:
    """Whether the key's group and member ids are legal (writers validate them; a key that
    is not is no record of ours)."""
    try:
        validate_group_id(parsed.group or "")
        if parsed.member is not None:
            validate_member_id(parsed.member)
    except (ValueError, InvalidGroupIdError):
        return False
    return True


_M = TypeVar("_M", GroupMember, GroupState)


def _decode(model: type[_M], key: bytes, value: bytes) -> _M | None:
    try:
        return model.decode(value)
    except ValidationError as exc:
        where = key.decode(errors="replace")
        log.error("ignoring malformed %s at %s: %s", model.__name__, where, exc)
        return None
