"""``ClassicGroupStore``: what a Kafka classic group keeps in etcd, as the transactions
docs/decisions.md ("Kafka classic groups") names them.

Keys: the marker ``groups/<g>/classic`` (``ClassicGroupMarker``, on the coordinating broker's
lease), the REST members' records ``groups/<g>/members/`` (read only here) and the committed
offsets ``offsets/<g>/<topic>/<p>`` (``CommittedOffset``, the same keys and model REST groups
use, so a group's offsets are one truth whichever protocol wrote them).

- ``claim``: one transaction — the marker absent *and* no REST member record (a prefix
  compare) → put the marker on the lease; else read both. A marker already ours (this broker,
  this lease) is adopted. One kind per group: the rest-proxy's member creation compares the
  marker absent, so of two racing writers exactly one wins.
- ``release``: delete the marker if it is still the one claimed (its ``mod_revision``).
- ``commit``: the offsets, guarded by the marker's ``mod_revision`` (a deposed coordinator's
  commit fails), or for a simple commit (no generation) by "no marker and no REST member";
  above ``MAX_TXN_OPS`` the request is split, each part atomic under the same guard (a failed
  guard midway leaves the earlier parts: a commit of real progress is never wrong).
- ``committed`` reads the group's offsets; ``delete`` deletes the group's keys and offsets only
  while it has neither a marker nor REST members.

Values are decoded here; a malformed offset is skipped. Any number of tasks may call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import NamedTuple

from pydantic import ValidationError

from yak.metadata.keyspace import Keyspace
from yak.metadata.models import ClassicGroupMarker, CommittedOffset
from yak.metadata.store import (
    Compare,
    DeleteOp,
    DeleteResponse,
    GetOp,
    GetResponse,
    KeyValue,
    MetadataStore,
    Op,
    PutOp,
)
from yak.types import TopicPartition

__all__ = ["MAX_TXN_OPS", "ClassicGroupStore", "GroupDeletion", "MarkerClaim"]

#: Operations per etcd transaction (etcd's default --max-txn-ops is 128).
MAX_TXN_OPS = 128


class MarkerClaim(NamedTuple):
    """A claim's outcome: the marker's ``mod_revision`` when this broker holds it (0: not
    claimed), else who holds it and how many REST member records the group has."""

    revision: int
    holder: ClassicGroupMarker | None = None
    rest_members: int = 0


class GroupDeletion(Enum):
    DELETED = "deleted"
    NOT_EMPTY = "not_empty"
    NOT_FOUND = "not_found"


class ClassicGroupStore:
    """See the module doc."""

    def __init__(self, store: MetadataStore, keyspace: Keyspace) -> None:
        self._store = store
        self._keyspace = keyspace

    async def claim(self, group: str, marker: ClassicGroupMarker, lease: int) -> MarkerClaim:
        """Put the marker on ``lease`` if the group has no marker and no REST member."""
        key = self._keyspace.group_classic(group)
        members = self._keyspace.group_members_prefix(group)
        result = await self._store.txn(
            [Compare.absent(key), Compare.none_under(members)],
            [PutOp(key, marker.encode(), lease)],
            [GetOp(key), GetOp(members, prefix=True)],
        )
        if result.succeeded:
            return MarkerClaim(result.revision)
        held, found = (_kvs(r) for r in result.responses)
        holder = _marker(held[0]) if held else None
        mine = holder is not None and holder.broker_id == marker.broker_id
        if mine and not found and held[0].lease == lease:
            return MarkerClaim(held[0].mod_revision, holder)  # ours already: adopt it
        return MarkerClaim(0, holder, len(found))

    async def release(self, group: str, revision: int) -> bool:
        """Delete the marker claimed at ``revision``; False if it is not that one any more."""
        key = self._keyspace.group_classic(group)
        result = await self._store.txn([Compare.mod_revision(key, revision)], [DeleteOp(key)])
        return result.succeeded

    async def commit(
        self, group: str, revision: int, offsets: Mapping[TopicPartition, CommittedOffset]
    ) -> bool:
        """Write ``offsets`` under the marker claimed at ``revision`` (0: a simple commit, only
        while the group has no marker and no REST member); False if the guard failed."""
        key = self._keyspace.group_classic(group)
        guards = (
            [Compare.mod_revision(key, revision)]
            if revision
            else [
                Compare.absent(key),
                Compare.none_under(self._keyspace.group_members_prefix(group)),
            ]
        )
        ops: list[Op] = [
            PutOp(self._keyspace.committed_offset(group, topic, partition), offset.encode())
            for (topic, partition), offset in sorted(offsets.items())
        ]
        for start in range(0, len(ops), MAX_TXN_OPS):
            result = await self._store.txn(guards, ops[start : start + MAX_TXN_OPS])
            if not result.succeeded:
                return False
        return True

    async def committed(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets (``offsets/<g>/``)."""
        read = await self._store.range_prefix(self._keyspace.group_offsets_prefix(group))
        found: dict[TopicPartition, CommittedOffset] = {}
        for kv in read.kvs:
            parsed = self._keyspace.parse(kv.key)
            if parsed is None or parsed.topic is None or parsed.partition is None:
                continue
            try:
                found[TopicPartition(parsed.topic, parsed.partition)] = CommittedOffset.decode(
                    kv.value
                )
            except ValidationError:
                continue
        return found

    async def delete(self, group: str) -> GroupDeletion:
        """Delete the group's keys and offsets if it has no marker and no REST member."""
        keys = self._keyspace
        result = await self._store.txn(
            [
                Compare.absent(keys.group_classic(group)),
                Compare.none_under(keys.group_members_prefix(group)),
            ],
            [
                DeleteOp(keys.group_prefix(group), prefix=True),
                DeleteOp(keys.group_offsets_prefix(group), prefix=True),
            ],
        )
        if not result.succeeded:
            return GroupDeletion.NOT_EMPTY
        deleted = sum(r.deleted for r in result.responses if isinstance(r, DeleteResponse))
        return GroupDeletion.DELETED if deleted else GroupDeletion.NOT_FOUND


def _kvs(response: object) -> tuple[KeyValue, ...]:
    assert isinstance(response, GetResponse)
    return response.kvs


def _marker(kv: KeyValue) -> ClassicGroupMarker | None:
    try:
        return ClassicGroupMarker.decode(kv.value)
    except ValidationError:
        return None
