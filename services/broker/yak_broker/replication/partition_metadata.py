"""``partition.metadata``: which topic *incarnation* a partition folder belongs to.

A topic deleted and re-created under the same name gets a new ``topic_id``; a broker that was
down during the deletion still holds the old folder ``<topic>-<p>``. The replica manager
compares the id stored here with the topic's current id and wipes the folder on a mismatch, so
old data is never served under the new topic (Kafka's ``partition.metadata``, KIP-516).

Format: UTF-8 text ``version: 0\\ntopic_id: <id>\\n``. A new log's folder is created with it,
fsynced, before the folder appears (``LogManager.create_logs``, with ``encode_topic_id``'s
bytes); ``write_topic_id`` writes it atomically (temp file, fsync, rename, fsync of the folder)
into an existing folder. So a folder without it predates this scheme and is adopted. Not
thread-safe; called by the replica manager only.
"""

from __future__ import annotations

from pathlib import Path

from yak_broker.storage.checkpoint import write_atomically

__all__ = ["PARTITION_METADATA_FILE", "encode_topic_id", "read_topic_id", "write_topic_id"]

PARTITION_METADATA_FILE = "partition.metadata"
_VERSION = "0"


def read_topic_id(directory: Path) -> str | None:
    """The topic id recorded in ``directory``, or None when there is none (or it is garbled)."""
    try:
        text = (directory / PARTITION_METADATA_FILE).read_text()
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
        return None
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    if fields.get("version") != _VERSION:
        return None
    return fields.get("topic_id") or None


def encode_topic_id(topic_id: str) -> bytes:
    """The file's bytes for ``topic_id``."""
    return f"version: {_VERSION}\ntopic_id: {topic_id}\n".encode()


def write_topic_id(directory: Path, topic_id: str) -> None:
    """Record ``topic_id`` in ``directory`` (created if needed), atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    write_atomically(directory / PARTITION_METADATA_FILE, encode_topic_id(topic_id))
