"""The leader epoch cache: which leader epoch started at which offset (KIP-101, KIP-279).

Each replica keeps, per partition, the ordered list of ``(epoch, start_offset)`` pairs: the first
offset written under each leader epoch. It answers OffsetsForLeaderEpoch requests
(``end_offset_for``) so that a follower truncates to the true point of divergence after a
leader change, instead of to its possibly stale high watermark.

File ``leader-epoch-checkpoint``, Kafka's format byte for byte (UTF-8 text, ``\\n`` line ends)::

    0              <- version
    3              <- number of entries
    0 0            <- epoch start_offset, ascending
    2 150
    5 4012

Invariants: both epochs and start offsets strictly increase along the list; epochs and
offsets are ``>= 0``. The log is the source of truth: the partition calls ``assign`` with
each appended batch's ``partitionLeaderEpoch`` and base offset, and recovery replays batches
the same way, so a lost or damaged file can always be rebuilt by scanning the log.

Persistence: every call that changes the entries rewrites the file with
``checkpoint.write_atomically`` (fsync + rename) before returning, so a crash leaves the
previous or the new list. Changes are rare (one per leader change, plus truncations), so the
fsync stays off the per-batch hot path. A broker that takes over thousands of leaderships at
once (a failover, a restart) stamps them with ``assign(..., persist=False)`` instead, writes
the files (``checkpoint``) on I/O threads in parallel, and marks each ``persisted`` — before
the partition serves as leader, so the stamp is as durable as with ``persist=True``.

A present but malformed file raises ``CorruptCheckpointError`` at construction; the caller may
delete it and rebuild from the log.

Thread-safety: none. One owner (the partition's log, on one thread or event loop) calls it.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from yak_broker.storage.checkpoint import CorruptCheckpointError, write_atomically

__all__ = [
    "LEADER_EPOCH_CHECKPOINT_FILE_NAME",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochCache",
    "encode_entries",
]

LEADER_EPOCH_CHECKPOINT_FILE_NAME = "leader-epoch-checkpoint"
#: What OffsetsForLeaderEpoch answers when it knows nothing about the requested epoch.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

_VERSION = 0


class EpochEntry(NamedTuple):
    """The first offset written under a leader epoch."""

    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Epoch → start offset of one partition replica, persisted in ``leader-epoch-checkpoint``.

    ``LeaderEpochCache(path)`` loads the file if it exists and starts empty otherwise;
    ``entries`` says what the file holds instead (a new log's, written by ``log_creation``).
    """

    def __init__(self, path: Path | str, entries: Sequence[EpochEntry] | None = None) -> None:
        self._path = Path(path)
        self._entries: list[EpochEntry] = _read(self._path) if entries is None else list(entries)
        #: Changes made with ``persist=False`` and not yet written (see ``checkpoint``).
        self._unpersisted = 0

    @property
    def path(self) -> Path:
        return self._path

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        """All entries, oldest first."""
        return tuple(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The highest known epoch, or ``None`` when the cache is empty."""
        return self._entries[-1].epoch if self._entries else None

    @property
    def unpersisted(self) -> bool:
        """Whether a change made with ``persist=False`` is not in the file yet."""
        return self._unpersisted > 0

    def checkpoint(self) -> tuple[Path, bytes, int]:
        """The file to write, its bytes, and the change count to hand ``persisted`` once the
        bytes are durable (the writing may happen on another thread)."""
        return self._path, encode_entries(self._entries), self._unpersisted

    def persisted(self, changes: int) -> None:
        """The bytes ``checkpoint`` returned with ``changes`` are durable; changes made since
        stay unpersisted."""
        if self._unpersisted == changes:
            self._unpersisted = 0

    def assign(self, epoch: int, start_offset: int, *, persist: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; return True if the cache changed.
        ``persist=False``: the file is written later (``checkpoint``; see the module doc).

        As Kafka's ``LeaderEpochFileCache.assign``: a repeat of the latest epoch at the same or
        a higher offset is a no-op (the common case: every batch of the current leader). Any
        other entry is accepted, after removing existing entries that would break monotonicity
        (an epoch >= ``epoch`` or a start offset >= ``start_offset``): the log being appended
        is the truth, so a lower epoch or an earlier start replaces what conflicts with it.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"epoch {epoch} and start offset {start_offset} must be >= 0")
        latest = self.latest_entry
        if latest is not None and latest.epoch == epoch and start_offset >= latest.start_offset:
            return False
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        if persist:
            self._flush()
        else:
            self._unpersisted += 1
        return True

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch under which ``offset`` was written: the last entry starting at or below it.

        ``None`` if ``offset`` lies below the earliest entry (or the cache is empty). An offset
        past the log end maps to the latest epoch, as in Kafka.
        """
        index = bisect.bisect_right(self._entries, offset, key=lambda e: e.start_offset)
        return self._entries[index - 1].epoch if index else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: ``(epoch, end_offset)`` for ``requested_epoch`` (KIP-279).

        - the latest epoch → ``(latest_epoch, log_end_offset)``;
        - an epoch with a higher one after it → the largest known epoch ``<= requested_epoch``
          and the start offset of the first epoch ``> requested_epoch`` (the end of
          ``requested_epoch`` in this log; the follower truncates there);
        - an epoch older than every entry (the log start moved past it) →
          ``(requested_epoch, start offset of the earliest entry)``, as Kafka does: that data
          is gone, and the follower may replicate from the leader's start;
        - ``UNDEFINED_EPOCH``, an epoch above the latest, or an empty cache →
          ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._entries, requested_epoch, key=lambda e: e.epoch)
        if higher == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        end_offset = self._entries[higher].start_offset
        if higher == 0:
            return requested_epoch, end_offset
        return self._entries[higher - 1].epoch, end_offset

    def truncate_from_end(self, end_offset: int, *, persist: bool = True) -> None:
        """The log was truncated to ``end_offset``: drop entries starting at or after it.

        ``persist=False`` (the loader's trim to the log it loaded): the file is left as it is.
        Safe because the trim is derived from the log: the next load trims the same entries
        again, and the next change of the cache writes the whole list.
        """
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        if persist:
            self._flush()

    def truncate_from_start(self, start_offset: int, *, persist: bool = True) -> None:
        """The log start moved to ``start_offset``: drop entries wholly below it.

        The epoch that covers ``start_offset`` is kept, with its start moved up to
        ``start_offset``, so ``epoch_for_offset`` still answers for the first readable offset.
        ``persist``: as for ``truncate_from_end``.
        """
        if start_offset < 0 or not self._entries or self._entries[0].start_offset >= start_offset:
            return
        index = bisect.bisect_right(self._entries, start_offset, key=lambda e: e.start_offset)
        covering = self._entries[index - 1]
        self._entries[:index] = [EpochEntry(covering.epoch, start_offset)]
        if persist:
            self._flush()

    def clear(self) -> None:
        """Forget every entry (e.g. before rebuilding from the log) and persist the empty list."""
        self._entries.clear()
        self._flush()

    def _flush(self) -> None:
        write_atomically(self._path, encode_entries(self._entries))
        self._unpersisted = 0

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self._path.name!r}, {self._entries!r})"


def encode_entries(entries: Sequence[EpochEntry]) -> bytes:
    """The checkpoint file's bytes for ``entries`` (oldest first)."""
    lines = [str(_VERSION), str(len(entries))]
    lines.extend(f"{e.epoch} {e.start_offset}" for e in entries)
    return ("\n".join(lines) + "\n").encode("ascii")


def _read(path: Path) -> list[EpochEntry]:
    """Parse the checkpoint file; ``[]`` if absent; CorruptCheckpointError if malformed."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []

    def corrupt(reason: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"bad leader epoch checkpoint {path}: {reason}")

    try:
        lines = data.decode("ascii").splitlines()
    except UnicodeDecodeError as exc:
        raise corrupt("not ASCII text") from exc
    if len(lines) < 2 or lines[0].strip() != str(_VERSION):
        raise corrupt(f"unknown version line {lines[0] if lines else ''!r}")
    try:
        count = int(lines[1])
    except ValueError as exc:
        raise corrupt(f"bad entry count {lines[1]!r}") from exc
    if count != len(lines) - 2:
        raise corrupt(f"expected {count} entries, found {len(lines) - 2}")
    entries: list[EpochEntry] = []
    for line in lines[2:]:
        fields = line.split()
        if len(fields) != 2 or not all(f.isdigit() for f in fields):
            raise corrupt(f"malformed entry {line!r}")
        entry = EpochEntry(int(fields[0]), int(fields[1]))
        if entries and (
            entry.epoch <= entries[-1].epoch or entry.start_offset <= entries[-1].start_offset
        ):
            raise corrupt(f"entry {line!r} does not follow {entries[-1]}")
        entries.append(entry)
    return entries
