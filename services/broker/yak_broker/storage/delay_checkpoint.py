"""The delay index's checkpoint: its durable cursor, written after the entries it covers.

File ``delays.checkpoint`` in the index's folder, replaced by ``checkpoint.write_atomically``
(temp file, fsync, rename, fsync dir); UTF-8 text, ``\\n`` line ends::

    0                      <- format version
    cursor 1234            <- every log offset below it is indexed, in files fsynced before
    log_start 0            <- entries of records below it are ignored (retention)
    bucket_ms 600000       <- the width the bucket files were written with
    crc32c 0badcafe        <- CRC-32C (8 lower-case hex digits) of the lines above

``write_checkpoint`` fsyncs the bucket files a ``DelayCheckpoint`` names (and the folder when
files were created or deleted) *before* it replaces the checkpoint, so the cursor on disk never
covers an entry that is not on disk. ``read_checkpoint`` returns ``None`` for a missing file
and for a damaged one (not written by ``write_atomically``: disk damage or a foreign file):
the index is derived data, so it restarts from cursor 0 and is rebuilt from the log.

Thread-safety: ``write_checkpoint`` touches only the files of its ticket and may run on a
worker thread; one writer per folder at a time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import crc32c

from yak_broker.storage.checkpoint import fsync_dir, write_atomically
from yak_broker.storage.delay_bucket import bucket_file

__all__ = ["CHECKPOINT_NAME", "DelayCheckpoint", "read_checkpoint", "write_checkpoint"]

CHECKPOINT_NAME = "delays.checkpoint"
_VERSION = "0"
_FIELDS = ("cursor", "log_start", "bucket_ms")


class DelayCheckpoint(NamedTuple):
    """A checkpoint to write (or one read back, with no files to sync)."""

    path: Path
    cursor: int
    log_start: int
    bucket_ms: int
    starts: tuple[int, ...]  # bucket files to fsync first
    sync_dir: bool  # files were created or deleted since the last checkpoint

    def encode(self) -> bytes:
        values = (self.cursor, self.log_start, self.bucket_ms)
        body = f"{_VERSION}\n" + "".join(
            f"{name} {value}\n" for name, value in zip(_FIELDS, values, strict=True)
        )
        raw = body.encode("ascii")
        return raw + f"crc32c {crc32c.crc32c(raw):08x}\n".encode("ascii")


def _decode(path: Path, data: bytes) -> DelayCheckpoint | None:
    lines = data.split(b"\n")
    if len(lines) != len(_FIELDS) + 3 or lines[-1] != b"":
        return None
    body = b"".join(line + b"\n" for line in lines[: len(_FIELDS) + 1])
    if lines[-2] != f"crc32c {crc32c.crc32c(body):08x}".encode("ascii"):
        return None
    if lines[0] != _VERSION.encode("ascii"):
        return None
    values = []
    for name, line in zip(_FIELDS, lines[1:], strict=False):
        label, _, number = line.decode("ascii", "replace").partition(" ")
        if label != name or not number.isdigit():
            return None
        values.append(int(number))
    cursor, log_start, bucket_ms = values
    if bucket_ms <= 0:
        return None
    return DelayCheckpoint(path, cursor, log_start, bucket_ms, (), False)


def read_checkpoint(path: Path) -> DelayCheckpoint | None:
    """The checkpoint at ``path``; ``None`` if it is missing or damaged (rebuild from 0)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return _decode(path, data)


def write_checkpoint(ticket: DelayCheckpoint) -> None:
    """fsync the ticket's bucket files (and folder), then replace the checkpoint file."""
    folder = ticket.path.parent
    for start in ticket.starts:
        try:
            fd = os.open(bucket_file(folder, start), os.O_RDONLY)
        except FileNotFoundError:
            continue  # forgotten or emptied since: nothing of it to keep
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    if ticket.sync_dir:
        fsync_dir(folder)
    write_atomically(ticket.path, ticket.encode())
