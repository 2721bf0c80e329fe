"""Where share-partitions' snapshots are kept: the interface the share drivers use.

A share-partition's durable state is its latest snapshot (``state.snapshot``'s bytes), keyed
by ``SharePartitionKey``. The broker keeps them in the internal compacted topic
``__yak_share_state`` (``TopicShareStateStore``; docs/decisions.md, "Share groups: where their
state lives"); tests use ``MemoryShareStateStore``. Contract:

- ``save`` returns once every value given is durable (in the topic: acknowledged with
  acks=all), or raises; a snapshot that was not saved must not be answered to a client.
  A None value is a tombstone: the key is forgotten. Several values in one call share one
  write (group commit). Saves of one key are applied in call order (the committer never has
  two saves of a key in flight).
- ``lane(key)`` names the independent write stream of a key (the topic store's state
  partition): saves of different lanes may be in flight at once (``SnapshotCommitter`` runs
  one save per lane at a time); a key keeps its lane (the state topic keeps its partition
  count).
- ``load`` returns the last snapshot saved for the key, or None if there never was one (a new
  share-partition) or it was deleted. It may wait while the store catches up (a new leader
  reading the topic).
- ``delete`` forgets keys, in one write (``save`` with None values).
- ``keys(group)`` is every key of the share group, any incarnation, that has a snapshot: read
  to the end of the whole store first (so it costs a read of every state partition this
  broker has not read yet; the deletion sweep's, see ``share_manager``).

**A group's incarnation is part of the key.** A share group deleted and created again under
the same name is another group: its ``ShareGroupRecord.created_at_ms`` differs, and so does
every key of its share-partitions (``SharePartitionKey.incarnation``). Chosen over keeping the
incarnation inside the snapshot (a mismatch meaning "start fresh") because the key makes the
two incarnations' state independent in the topic: a tombstone the old group's deletion writes
late — a leader slow to see the deletion, a sweep retried after a failover — can only ever
delete the old group's keys, never the new group's progress; and a new incarnation's first
load reads no old snapshot at all (nothing to decode, compare and throw away). The cost: the
old incarnation's keys are not overwritten by the new one's, so they must be tombstoned
explicitly (the sweep does, and sweeps again on the group's later changes).

Single event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, Protocol

__all__ = ["SHARE_STATE_TOPIC", "MemoryShareStateStore", "SharePartitionKey", "ShareStateStore"]

#: The internal topic of share-partition snapshots (compacted, replicated like data).
SHARE_STATE_TOPIC = "__yak_share_state"


class SharePartitionKey(NamedTuple):
    """One incarnation of a share group and one topic partition."""

    group: str
    topic: str
    partition: int
    #: The group's ``ShareGroupRecord.created_at_ms`` (see the module doc). The default 0 is
    #: the tests' groups' (created at 0); the broker always names the live record's.
    incarnation: int = 0

    def encode(self) -> bytes:
        """The record key in ``__yak_share_state``, UTF-8:
        ``group \\0 topic \\0 partition \\0 incarnation`` (both numbers in decimal)."""
        return f"{self.group}\0{self.topic}\0{self.partition}\0{self.incarnation}".encode()

    @classmethod
    def decode(cls, raw: bytes) -> SharePartitionKey | None:
        """The key of a state record; None for bytes that are not one (a key without an
        incarnation, as written before there was one, is not: nothing loads it)."""
        try:
            group, topic, partition, incarnation = raw.decode().split("\0")
        except (UnicodeDecodeError, ValueError):
            return None
        if not group or not topic or not partition.isdigit() or not incarnation.isdigit():
            return None
        return cls(group, topic, int(partition), int(incarnation))


class ShareStateStore(Protocol):
    """Durable snapshots of share-partitions; see the module docstring."""

    async def load(self, key: SharePartitionKey) -> bytes | None: ...

    async def save(self, snapshots: Mapping[SharePartitionKey, bytes | None]) -> None: ...

    async def delete(self, *keys: SharePartitionKey) -> None: ...

    async def keys(self, group: str) -> list[SharePartitionKey]: ...

    def lane(self, key: SharePartitionKey) -> int: ...


class MemoryShareStateStore:
    """A ``ShareStateStore`` in a dict (tests; a broker never uses it). ``saves`` counts the
    calls to ``save``, ``fail_next`` makes the next one raise (a lost quorum)."""

    def __init__(self) -> None:
        self.snapshots: dict[SharePartitionKey, bytes] = {}
        self.saves = 0
        self.fail_next: Exception | None = None
        self.lanes = 1

    async def load(self, key: SharePartitionKey) -> bytes | None:
        return self.snapshots.get(key)

    async def save(self, snapshots: Mapping[SharePartitionKey, bytes | None]) -> None:
        self.saves += 1
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        for key, value in snapshots.items():
            if value is None:
                self.snapshots.pop(key, None)
            else:
                self.snapshots[key] = value

    async def delete(self, *keys: SharePartitionKey) -> None:
        for key in keys:
            self.snapshots.pop(key, None)

    async def keys(self, group: str) -> list[SharePartitionKey]:
        return [key for key in self.snapshots if key.group == group]

    def lane(self, key: SharePartitionKey) -> int:
        """``lanes`` lanes, by the key's partition (1 by default: one save at a time)."""
        return key.partition % self.lanes
