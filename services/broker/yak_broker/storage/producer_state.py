"""Idempotent-producer state of one partition: epochs, sequences and the 5-batch dedupe window.

For each producer id (``>= 0``) the partition remembers the producer epoch, the metadata of its
last ``BATCHES_TO_RETAIN`` = 5 appended batches (first/last sequence, first/last offset, max
timestamp) and when it last wrote. With it the leader (Kafka KIP-98, ``ProducerStateManager``):

- answers a retried batch (same epoch, same first and last sequence as one of the 5) with its
  original offsets instead of appending it twice (``check`` → ``DuplicateBatch``);
- rejects a gap or reordering (``OutOfOrderSequenceError``): a known producer's next batch must
  start at ``last_seq + 1`` (``0`` after ``2**31 - 1``), and a new epoch must start at ``0``;
- fences a zombie with an older epoch (``InvalidProducerEpochError``);
- accepts any sequence from a producer it has no state for (new, expired or truncated away).

Usage per appended batch, in log order: ``dup = check(header)``; if ``dup`` is not None skip the
append and answer ``dup``'s offsets; else append, then ``update(header_with_offsets, now_ms)``.
``update`` is also called for batches without a producer id (it only advances
``map_end_offset``), for follower appends, and when replaying the log on recovery: it never
validates, because the log is the truth. ``check`` and ``update`` must alternate per batch:
``check`` compares against state that includes every earlier batch.

State is rebuilt from batch headers; snapshots only bound the replay. Snapshot file
``<20-digit offset>.snapshot`` in the partition folder holds the state of every batch below
``offset`` (exclusive). Binary, big-endian::

    version          int16    = 1
    crc              uint32   CRC-32C of every byte after this field
    offset           int64    = the offset in the file name
    producer_count   int32
    per producer:    producer_id int64, epoch int16, last_update_ms int64, batch_count int8
      per batch:     first_seq int32, last_seq int32, first_offset int64, last_offset int64,
                     max_timestamp int64

Unlike Kafka (which snapshots only the last batch per producer), all 5 batches are kept, so
deduplication survives a restart. Snapshots are written with ``write_atomically``; a corrupt
one is deleted on ``load`` and the next older one is tried (then the caller replays further).

Crash behaviour: memory state is lost and rebuilt by ``load`` + replay; snapshot files are
whole or absent. Thread-safety: none; one owner (the partition log) calls every method.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

import crc32c

from yak.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from yak.record.batch_header import BatchHeader
from yak_broker.storage.checkpoint import CorruptCheckpointError, write_atomically

__all__ = [
    "BATCHES_TO_RETAIN",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "SNAPSHOT_SUFFIX",
    "BatchMetadata",
    "CorruptSnapshotError",
    "DuplicateBatch",
    "ProducerStateEntry",
    "ProducerStateManager",
    "decode_snapshot",
    "encode_snapshot",
    "snapshot_path",
]

BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
SNAPSHOT_SUFFIX = ".snapshot"
_INT32_MAX = 0x7FFFFFFF
_VERSION = 1

_PREFIX = struct.Struct(">hI")
_BODY_HEAD = struct.Struct(">qi")
_PRODUCER = struct.Struct(">qhqb")
_BATCH = struct.Struct(">iiqqq")


class CorruptSnapshotError(CorruptCheckpointError):
    """A producer-state snapshot is partial, garbled or of an unknown version."""


class BatchMetadata(NamedTuple):
    """What the dedupe window remembers of one appended batch."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


class DuplicateBatch(NamedTuple):
    """``check``'s answer for a retried batch: the offsets and timestamp it got the first time."""

    base_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class ProducerStateEntry:
    """The state of one producer id: epoch, last ``BATCHES_TO_RETAIN`` batches (oldest first)."""

    producer_id: int
    epoch: int
    batches: tuple[BatchMetadata, ...]
    last_update_ms: int

    @property
    def last_seq(self) -> int:
        """Sequence of the last record appended under ``epoch``; -1 if none yet."""
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


def snapshot_path(directory: Path, offset: int) -> Path:
    """``<directory>/<20-digit offset>.snapshot``."""
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def _next_seq(last_seq: int) -> int:
    return 0 if last_seq == _INT32_MAX else last_seq + 1


class ProducerStateManager:
    """Producer id → ``ProducerStateEntry`` for one partition, with snapshots in ``directory``.

    ``map_end_offset`` is the offset after the last batch applied with ``update`` (or the
    loaded snapshot's offset): the state covers exactly the log below it.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self._dir = Path(directory)
        self._expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._map_end_offset = 0

    @property
    def map_end_offset(self) -> int:
        return self._map_end_offset

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """A read-only live view of every tracked producer."""
        return MappingProxyType(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def last_batch_offsets(self) -> dict[int, int]:
        """Producer id → last offset of its last batch: the batches compaction must keep."""
        return {pid: e.batches[-1].last_offset for pid, e in self._producers.items() if e.batches}

    def check(self, header: BatchHeader) -> DuplicateBatch | None:
        """Validate a client batch before it is appended; return its first append if a retry.

        Raises InvalidProducerEpochError for an epoch older than the known one and
        OutOfOrderSequenceError for a sequence gap or a new epoch not starting at 0.
        """
        if header.producer_id < 0:
            return None
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return None
        epoch = header.producer_epoch
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id} epoch {epoch} is older than {entry.epoch}",
                producer_id=header.producer_id,
                epoch=epoch,
                current_epoch=entry.epoch,
            )
        if header.is_control:
            return None
        first_seq, last_seq = header.base_sequence, header.last_sequence
        duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
        if duplicate is not None:
            return DuplicateBatch(
                duplicate.first_offset, duplicate.last_offset, duplicate.max_timestamp
            )
        expected = 0 if epoch != entry.epoch else _next_seq(entry.last_seq)
        if first_seq != expected:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} epoch {epoch}: sequence {first_seq} "
                f"(expected {expected}, current epoch {entry.epoch})",
                producer_id=header.producer_id,
                epoch=epoch,
                sequence=first_seq,
                expected_sequence=expected,
            )
        return None

    def update(self, header: BatchHeader, now_ms: int) -> None:
        """Apply an appended batch (offsets assigned); never validates. Any batch may be passed.

        A batch in a different epoch (even a lower one, from replication) resets the window;
        a control batch only moves the epoch. ``now_ms`` is the append time used for expiry.
        """
        self._map_end_offset = max(self._map_end_offset, header.next_offset)
        pid = header.producer_id
        if pid < 0:
            return
        entry = self._producers.get(pid)
        same_epoch = entry is not None and entry.epoch == header.producer_epoch
        kept = entry.batches if entry is not None and same_epoch else ()
        if not header.is_control:
            batch = BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
            kept = (*kept, batch)[-BATCHES_TO_RETAIN:]
        self._producers[pid] = ProducerStateEntry(pid, header.producer_epoch, kept, now_ms)

    def remove_expired(self, now_ms: int) -> list[int]:
        """Forget producers idle for ``producer.id.expiration.ms`` or longer; return their ids."""
        expired = [
            pid
            for pid, entry in self._producers.items()
            if now_ms - entry.last_update_ms >= self._expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        return expired

    # --- snapshots ---------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files on disk, ascending."""
        offsets = []
        for path in self._dir.glob(f"*{SNAPSHOT_SUFFIX}"):
            stem = path.name[: -len(SNAPSHOT_SUFFIX)]
            if len(stem) == 20 and stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def take_snapshot(self) -> Path:
        """Persist the state at ``map_end_offset`` (skipped if that snapshot already exists)."""
        path = snapshot_path(self._dir, self._map_end_offset)
        if not path.exists():
            write_atomically(path, encode_snapshot(self._map_end_offset, self._producers.values()))
        return path

    def delete_snapshots_below(self, offset: int) -> None:
        """Remove snapshots older than ``offset`` (the log start moved past them)."""
        for snap in self.snapshot_offsets():
            if snap < offset:
                snapshot_path(self._dir, snap).unlink(missing_ok=True)

    def load(self, log_start_offset: int, log_end_offset: int) -> int:
        """Reset to the newest usable snapshot in ``[log_start_offset, log_end_offset]``.

        Deletes snapshots outside that range (above: truncated-away state; below: the log
        between them and the log start is gone, so replay could not complete them) and
        corrupt ones. Returns ``map_end_offset``: the caller replays every batch from there
        up to ``log_end_offset`` with ``update``. With no usable snapshot, the state is empty
        and replay starts at ``log_start_offset``.
        """
        self._producers.clear()
        self._map_end_offset = log_start_offset
        loaded = False
        for snap in reversed(self.snapshot_offsets()):
            path = snapshot_path(self._dir, snap)
            if snap > log_end_offset or snap < log_start_offset:
                path.unlink(missing_ok=True)
            elif not loaded:
                try:
                    entries = decode_snapshot(path.read_bytes(), snap, str(path))
                except CorruptSnapshotError:
                    path.unlink(missing_ok=True)
                    continue
                self._producers = {entry.producer_id: entry for entry in entries}
                self._map_end_offset = snap
                loaded = True
        return self._map_end_offset

    def truncate_to(self, log_start_offset: int, log_end_offset: int) -> int:
        """The log was truncated to ``log_end_offset``: drop state and snapshots above it.

        Returns ``map_end_offset``: the caller replays batches from there (via ``update``) up
        to ``log_end_offset``; nothing to replay when it already equals ``log_end_offset``.
        """
        for snap in self.snapshot_offsets():
            if snap > log_end_offset:
                snapshot_path(self._dir, snap).unlink(missing_ok=True)
        if self._map_end_offset > log_end_offset:
            return self.load(log_start_offset, log_end_offset)
        return self._map_end_offset

    def __repr__(self) -> str:
        return (
            f"ProducerStateManager({self._dir.name!r}, producers={len(self._producers)}, "
            f"map_end_offset={self._map_end_offset})"
        )


def encode_snapshot(offset: int, entries: Iterable[ProducerStateEntry]) -> bytes:
    """The snapshot file's bytes for the state of every batch below ``offset``."""
    items = sorted(entries, key=lambda e: e.producer_id)
    body = bytearray(_BODY_HEAD.pack(offset, len(items)))
    for entry in items:
        body += _PRODUCER.pack(
            entry.producer_id, entry.epoch, entry.last_update_ms, len(entry.batches)
        )
        for batch in entry.batches:
            body += _BATCH.pack(*batch)
    return _PREFIX.pack(_VERSION, crc32c.crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes, offset: int, source: str = "<bytes>") -> list[ProducerStateEntry]:
    """Parse ``encode_snapshot``'s output; raises CorruptSnapshotError with the reason."""

    def corrupt(reason: str) -> CorruptSnapshotError:
        return CorruptSnapshotError(f"bad producer snapshot {source}: {reason}")

    if len(data) < _PREFIX.size + _BODY_HEAD.size:
        raise corrupt(f"truncated: {len(data)} bytes")
    version, stored_crc = _PREFIX.unpack_from(data)
    if version != _VERSION:
        raise corrupt(f"unknown version {version}")
    body = memoryview(data)[_PREFIX.size :]
    if crc32c.crc32c(body) != stored_crc:
        raise corrupt("checksum mismatch")
    body_offset, count = _BODY_HEAD.unpack_from(body)
    if body_offset != offset:
        raise corrupt(f"holds offset {body_offset}, expected {offset}")
    pos = _BODY_HEAD.size
    entries: list[ProducerStateEntry] = []
    try:
        for _ in range(count):
            pid, epoch, last_update_ms, n_batches = _PRODUCER.unpack_from(body, pos)
            pos += _PRODUCER.size
            if not 0 <= n_batches <= BATCHES_TO_RETAIN:
                raise corrupt(f"producer {pid} has {n_batches} batches")
            batches = []
            for _ in range(n_batches):
                batches.append(BatchMetadata._make(_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            entries.append(ProducerStateEntry(pid, epoch, tuple(batches), last_update_ms))
    except struct.error as exc:
        raise corrupt("entries run past the end of the file") from exc
    if pos != len(body):
        raise corrupt(f"{len(body) - pos} trailing bytes")
    return entries
