"""The read side of consumer groups for the admin API: list and describe (from etcd).

A group exists while anything of it is stored: a member record, a state or a committed offset.
The state shown is the stored one, except that

- a group without member records is ``Empty`` (the controller writes it so shortly);
- a group whose live records differ from what its stored state was computed from is
  ``PreparingRebalance`` until the controller writes the next group epoch
  (``group_reconcile.rebalance_pending``).

Reads go to etcd, not to the controller's memory, so any coordinator answers the same. Groups
are never deleted here (offsets and deletion belong to the offsets admin).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from yak.errors import GroupIdNotFoundError
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import GroupMember, GroupState, GroupStateName
from yak.metadata.store import MetadataStore
from yak_coordinator.decisions.group_reconcile import partition_counts, rebalance_pending
from yak_coordinator.groups.groups_view import GroupRecords, GroupsView

__all__ = ["GroupAdmin", "GroupSnapshot", "reported_state"]


def reported_state(
    state: GroupState | None,
    members: Mapping[str, GroupMember],
    partition_counts: Mapping[str, int],
) -> GroupStateName:
    """The state a reader reports (see the module docstring)."""
    if not members:
        return GroupStateName.EMPTY
    if rebalance_pending(state, members, partition_counts):
        return GroupStateName.PREPARING_REBALANCE
    return state.state if state is not None else GroupStateName.EMPTY


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """One group as read: its reported state, stored state and live member records."""

    group_id: str
    state: GroupStateName
    stored: GroupState | None
    members: Mapping[str, GroupMember]


class GroupAdmin:
    """Lists and describes groups from etcd (see the module docstring)."""

    def __init__(self, store: MetadataStore, keyspace: Keyspace, cache: MetadataCache) -> None:
        self._store = store
        self._keyspace = keyspace
        self._cache = cache

    async def list_groups(self) -> list[GroupSnapshot]:
        """Every group, by id."""
        view = GroupsView(self._keyspace)
        view.load(await self._store.range_prefix(self._keyspace.groups_prefix))
        offsets = await self._store.range_prefix(self._keyspace.offsets_prefix)
        with_offsets = set()
        for kv in offsets.kvs:
            parsed = self._keyspace.parse(kv.key)
            if parsed is not None and parsed.group is not None:
                with_offsets.add(parsed.group)
        counts = partition_counts(self._cache.snapshot)
        groups = {g for g, records in view.groups.items() if records.exists} | with_offsets
        return [
            self._snapshot(group, view.groups.get(group, GroupRecords()), counts)
            for group in sorted(groups)
        ]

    async def describe_group(self, group_id: str) -> GroupSnapshot:
        """One group; ``GroupIdNotFoundError`` when nothing of it is stored."""
        view = GroupsView(self._keyspace)
        view.load(await self._store.range_prefix(self._keyspace.group_prefix(group_id)))
        records = view.groups.get(group_id, GroupRecords())
        if not records.exists:
            offsets = await self._store.range_prefix(self._keyspace.group_offsets_prefix(group_id))
            if not offsets.kvs:
                raise GroupIdNotFoundError(f"group {group_id} does not exist", group=group_id)
        return self._snapshot(group_id, records, partition_counts(self._cache.snapshot))

    @staticmethod
    def _snapshot(group_id: str, records: GroupRecords, counts: Mapping[str, int]) -> GroupSnapshot:
        members = records.live_members()
        state = reported_state(records.state, members, counts)
        return GroupSnapshot(group_id, state, records.state, members)
