"""What this broker has read of one ``__yak_share_state`` partition: the latest snapshot per key.

A ``StatePartitionView`` is the in-memory side of ``TopicShareStateStore``: per state
partition, the next offset to read (``position``; None until the first read, which starts at
the log start), the leader epoch whose start it has read past (``checked_epoch``: see the
store's catch-up rule), and for each key the latest value seen with its offset. Memory is one
snapshot per key.

Invariants:

- An entry is replaced only by a record of a higher offset, so reading the log again from an
  older position, or a save of this broker (``note_written``, at the offset the leader gave it)
  landing ahead of ``position``, never brings an older value back.
- A tombstone is kept (as a None value) while ``position`` is at or below its offset — a read
  of the records before it must not resurrect the key — and dropped once ``position`` passes
  it: nothing before it can be read again then.

Also here: the state records' batch codec (``state_batch``, ``state_partition``). Pure: no
asyncio, no I/O; single event loop (the store's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from yak.partitioner import partition_for_key
from yak.record import Record, RecordInput, encode_batch
from yak_broker.share.state_store import SharePartitionKey

__all__ = ["StatePartitionView", "state_batch", "state_partition"]


def state_partition(key: SharePartitionKey, partitions: int) -> int:
    """The state partition of ``key``: Kafka's murmur2 of its record key modulo the count."""
    return partition_for_key(key.encode(), partitions)


def state_batch(values: Iterable[tuple[SharePartitionKey, bytes | None]], now_ms: int) -> bytes:
    """One RecordBatch v2 of state records: key ``SharePartitionKey.encode()``, value the
    snapshot bytes or None (a tombstone), no headers, in the order given (record i lands at the
    produce's base offset + i)."""
    records = [RecordInput(key=k.encode(), value=v, timestamp=now_ms) for k, v in values]
    return encode_batch(records, now_ms=now_ms)


class _Entry(NamedTuple):
    offset: int
    value: bytes | None


class StatePartitionView:
    """One state partition as read so far; see the module docstring."""

    def __init__(self) -> None:
        #: The next offset to read; None until the partition was read once.
        self.position: int | None = None
        #: The leader epoch whose start offset ``position`` reached (-1: none yet).
        self.checked_epoch = -1
        #: Catch-up rounds started, and the last one that completed (coalescing, see the store).
        self.rounds_started = 0
        self.last_completed_round = 0
        self._entries: dict[SharePartitionKey, _Entry] = {}
        self._tombstones: set[SharePartitionKey] = set()

    def get(self, key: SharePartitionKey) -> bytes | None:
        """The latest value read or written for ``key`` (None: none, or a tombstone)."""
        entry = self._entries.get(key)
        return entry.value if entry is not None else None

    def __len__(self) -> int:
        return len(self._entries)

    def live_keys(self) -> list[SharePartitionKey]:
        """The keys whose latest value is a snapshot (not a tombstone)."""
        return [k for k, entry in self._entries.items() if entry.value is not None]

    def apply(self, records: Iterable[Record]) -> None:
        """Records read from the log, in offset order; keys that are not share-partition keys
        (nothing Yak writes) are skipped."""
        for record in records:
            if record.key is None:
                continue
            key = SharePartitionKey.decode(record.key)
            if key is not None:
                self._put(key, record.offset, record.value)

    def note_written(self, values: Mapping[SharePartitionKey, bytes | None], offsets: int) -> None:
        """This broker's own write, acknowledged at base offset ``offsets`` (record i at
        ``offsets + i``, in ``values``' order)."""
        for index, (key, value) in enumerate(values.items()):
            self._put(key, offsets + index, value)

    def advance(self, position: int) -> None:
        """Everything below ``position`` has been read; tombstones below it are dropped."""
        if self.position is not None and position <= self.position:
            return
        self.position = position
        gone = [k for k in self._tombstones if self._entries[k].offset < position]
        for key in gone:
            del self._entries[key]
            self._tombstones.discard(key)

    def reset(self) -> None:
        """Forget everything (the log was replaced under us): the next read starts over."""
        self.position = None
        self.checked_epoch = -1
        self._entries.clear()
        self._tombstones.clear()

    def _put(self, key: SharePartitionKey, offset: int, value: bytes | None) -> None:
        current = self._entries.get(key)
        if current is not None and current.offset >= offset:
            return
        if value is None and self.position is not None and offset < self.position:
            self._entries.pop(key, None)  # a tombstone already read past: nothing to guard
            self._tombstones.discard(key)
            return
        self._entries[key] = _Entry(offset, value)
        if value is None:
            self._tombstones.add(key)
        else:
            self._tombstones.discard(key)
