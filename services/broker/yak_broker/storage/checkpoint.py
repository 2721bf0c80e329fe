"""Crash-safe small files: ``write_atomically`` and the per-partition checkpoint.

Every small metadata file of a partition (this checkpoint, ``leader-epoch-checkpoint``,
producer-state snapshots) is replaced, never edited in place, by ``write_atomically``:

1. write the bytes to ``<path>.tmp`` (created or truncated),
2. ``fsync`` the temp file,
3. ``os.replace`` it over ``<path>`` (atomic on POSIX),
4. ``fsync`` the directory so that the rename itself is durable.

A crash before step 3 leaves the previous ``<path>`` untouched and a stale ``<path>.tmp``
that readers ignore and the next write overwrites; a crash after step 3 leaves the new file.
So readers see either the old or the new content, never a mix (Kafka's ``CheckpointFile``).

Per-partition checkpoint file (``partition.checkpoint``), UTF-8 text, ``\\n`` line ends::

    0                              <- format version
    recovery_point 1234            <- offsets below this are flushed; recovery rescans from it
    log_start_offset 0
    high_watermark 1200
    crc32c 9f1c02aa                <- CRC-32C (8 lower-case hex digits) of all bytes above

``read`` returns ``None`` when the file does not exist (a new partition) and raises
``CorruptCheckpointError`` when it exists but is not a complete, checksummed version-0 file:
an atomic writer cannot produce such a file, so it means disk damage or a foreign file, and the
caller decides (typically: log it and recover from offset 0 with ``high_watermark`` = 0).

Thread-safety: the functions keep no state. Two concurrent writers of the same path would
share one ``.tmp`` file, so callers serialise writes per file (one writer per partition).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import crc32c

from yak.errors import KafkaStorageError

__all__ = [
    "CHECKPOINT_FILE_NAME",
    "TEMP_SUFFIX",
    "CorruptCheckpointError",
    "PartitionCheckpoint",
    "fsync_dir",
    "read",
    "temp_path",
    "write",
    "write_atomically",
]

#: The per-partition checkpoint's file name inside ``<data>/<topic>-<partition>/``.
CHECKPOINT_FILE_NAME = "partition.checkpoint"
#: Suffix of the temporary file ``write_atomically`` writes first; such files are garbage.
TEMP_SUFFIX = ".tmp"

_VERSION = 0
_FIELDS = ("recovery_point", "log_start_offset", "high_watermark")


class CorruptCheckpointError(KafkaStorageError):
    """A checkpoint or snapshot file exists but is partial, garbled or of an unknown version
    (a ``KAFKA_STORAGE_ERROR``: a client rebuilds it as ``KafkaStorageError``)."""


def temp_path(path: Path) -> Path:
    """The temporary sibling ``write_atomically`` uses for ``path``."""
    return path.with_name(path.name + TEMP_SUFFIX)


def fsync_dir(directory: Path) -> None:
    """Make renames and creations inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path | str, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file, whole."""
    target = Path(path)
    tmp = temp_path(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    fsync_dir(target.parent)


@dataclass(frozen=True, slots=True)
class PartitionCheckpoint:
    """The three offsets a partition persists between restarts.

    ``recovery_point``: every offset below it is known flushed, so recovery after an unclean
    shutdown rescans only from the segment that contains it. ``log_start_offset``: the first
    offset a consumer may read (retention and DeleteRecords move it). ``high_watermark``: the
    last known committed offset (exclusive).
    """

    recovery_point: int
    log_start_offset: int
    high_watermark: int

    def __post_init__(self) -> None:
        for name in _FIELDS:
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")

    def encode(self) -> bytes:
        """The file's bytes, checksum line included."""
        body = f"{_VERSION}\n" + "".join(f"{name} {getattr(self, name)}\n" for name in _FIELDS)
        raw = body.encode("ascii")
        return raw + f"crc32c {crc32c.crc32c(raw):08x}\n".encode("ascii")

    @classmethod
    def decode(cls, data: bytes, source: str = "<bytes>") -> PartitionCheckpoint:
        """Parse ``encode``'s output; raises CorruptCheckpointError with the reason."""

        def corrupt(reason: str) -> CorruptCheckpointError:
            return CorruptCheckpointError(f"bad partition checkpoint {source}: {reason}")

        if not data.endswith(b"\n"):
            raise corrupt("truncated (no final newline)")
        body_end = data.rfind(b"\n", 0, len(data) - 1) + 1
        body, crc_line = data[:body_end], data[body_end:-1]
        try:
            label, hex_crc = crc_line.decode("ascii").split(" ")
            stored = int(hex_crc, 16)
        except ValueError as exc:
            raise corrupt(f"unreadable checksum line {crc_line[:40]!r}") from exc
        if label != "crc32c" or len(hex_crc) != 8:
            raise corrupt(f"unreadable checksum line {crc_line[:40]!r}")
        actual = crc32c.crc32c(body)
        if actual != stored:
            raise corrupt(f"checksum mismatch: stored {stored:08x}, computed {actual:08x}")
        try:
            lines = body.decode("ascii").splitlines()
        except UnicodeDecodeError as exc:
            raise corrupt("not ASCII text") from exc
        if not lines or lines[0] != str(_VERSION):
            raise corrupt(f"unknown version line {lines[0] if lines else ''!r}")
        if len(lines) != 1 + len(_FIELDS):
            raise corrupt(f"expected {len(_FIELDS)} fields, found {len(lines) - 1}")
        values: dict[str, int] = {}
        for expected, line in zip(_FIELDS, lines[1:], strict=True):
            name, _, number = line.partition(" ")
            if name != expected or not number.isdigit():
                raise corrupt(f"expected '{expected} <offset>', found {line!r}")
            values[name] = int(number)
        return cls(**values)


def read(path: Path | str) -> PartitionCheckpoint | None:
    """Load the checkpoint at ``path``: ``None`` if absent; CorruptCheckpointError if damaged.

    A leftover ``<path>.tmp`` is never read: it is an unfinished write.
    """
    target = Path(path)
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        return None
    return PartitionCheckpoint.decode(data, str(target))


def write(path: Path | str, checkpoint: PartitionCheckpoint) -> None:
    """Persist ``checkpoint`` at ``path`` with ``write_atomically``."""
    write_atomically(path, checkpoint.encode())
