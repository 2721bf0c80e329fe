"""Topic ids as Kafka's share messages carry them (16-byte UUIDs), and the index from id to
topic name that a leader resolves ShareFetch/ShareAcknowledge partitions with.

``TopicRecord.topic_id`` is Kafka's text form (URL-safe base64 of the 16 bytes, no padding, as
the coordinator writes it); a 32-digit hex UUID is read too (tests and older records). The
index is rebuilt when the metadata snapshot's revision moves (one pass over the topics), so a
request costs a dict lookup. Single event loop.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from yak.metadata.snapshot import ClusterSnapshot
from yak.types import topic_uuid

__all__ = ["TopicIds", "topic_uuid"]


class TopicIds:
    """Topic names by topic id, following the metadata snapshot (deleting topics left out)."""

    def __init__(self, snapshot: Callable[[], ClusterSnapshot]) -> None:
        self._snapshot = snapshot
        self._revision = -1
        self._names: dict[uuid.UUID, str] = {}

    def name(self, topic_id: uuid.UUID) -> str | None:
        snapshot = self._snapshot()
        if snapshot.revision != self._revision:
            names = {}
            for record in snapshot.topics.values():
                key = topic_uuid(record.topic_id)
                if key is not None and not record.deleting:
                    names[key] = record.name
            self._names, self._revision = names, snapshot.revision
        return self._names.get(topic_id)
