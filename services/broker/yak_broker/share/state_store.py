"""Where share-partitions' snapshots are kept: the interface the share drivers use.

A share-partition's durable state is its latest snapshot (``state.snapshot``'s bytes), keyed
by ``SharePartitionKey``. The broker keeps them in the internal compacted topic
``__yak_share_state`` (``TopicShareStateStore``; docs/decisions.md, "Share groups: where their
state lives"); tests use ``MemoryShareStateStore``. Contract:

- ``save`` returns once every snapshot given is durable (in the topic: acknowledged with
  acks=all), or raises; a snapshot that was not saved must not be answered to a client.
  Several snapshots in one call share one write (group commit). Saves of one key are applied
  in call order (the driver never has two saves of a key in flight).
- ``load`` returns the last snapshot saved for the key, or None if there never was one (a new
  share-partition). It may wait while the store catches up (a new leader reading the topic).
- ``delete`` forgets a key (a deleted share group): later loads return None.

Single event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, Protocol

__all__ = ["SHARE_STATE_TOPIC", "MemoryShareStateStore", "SharePartitionKey", "ShareStateStore"]

#: The internal topic of share-partition snapshots (compacted, replicated like data).
SHARE_STATE_TOPIC = "__yak_share_state"


class SharePartitionKey(NamedTuple):
    """One share group and one topic partition."""

    group: str
    topic: str
    partition: int

    def encode(self) -> bytes:
        """The record key in ``__yak_share_state``: ``group \\0 topic \\0 partition``."""
        return f"{self.group}\0{self.topic}\0{self.partition}".encode()

    @classmethod
    def decode(cls, raw: bytes) -> SharePartitionKey | None:
        """The key of a state record; None for bytes that are not one."""
        try:
            group, topic, partition = raw.decode().split("\0")
        except (UnicodeDecodeError, ValueError):
            return None
        if not group or not topic or not partition.isdigit():
            return None
        return cls(group, topic, int(partition))


class ShareStateStore(Protocol):
    """Durable snapshots of share-partitions; see the module docstring."""

    async def load(self, key: SharePartitionKey) -> bytes | None: ...

    async def save(self, snapshots: Mapping[SharePartitionKey, bytes]) -> None: ...

    async def delete(self, key: SharePartitionKey) -> None: ...


class MemoryShareStateStore:
    """A ``ShareStateStore`` in a dict (tests; a broker never uses it). ``saves`` counts the
    calls to ``save``, ``fail_next`` makes the next one raise (a lost quorum)."""

    def __init__(self) -> None:
        self.snapshots: dict[SharePartitionKey, bytes] = {}
        self.saves = 0
        self.fail_next: Exception | None = None

    async def load(self, key: SharePartitionKey) -> bytes | None:
        return self.snapshots.get(key)

    async def save(self, snapshots: Mapping[SharePartitionKey, bytes]) -> None:
        self.saves += 1
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        self.snapshots.update(snapshots)

    async def delete(self, key: SharePartitionKey) -> None:
        self.snapshots.pop(key, None)
