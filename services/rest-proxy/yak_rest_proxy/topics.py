"""Looking up a topic a request names, as both dialects answer it."""

from __future__ import annotations

from yak.errors import UnknownTopicOrPartitionError
from yak.metadata.cache import ClusterSnapshot
from yak.metadata.models import TopicRecord
from yak.names import validate_topic_name

__all__ = ["topic_record"]


def topic_record(snapshot: ClusterSnapshot, topic: str) -> TopicRecord:
    """The topic's record, or UNKNOWN_TOPIC_OR_PARTITION (v2: 40401); a name that is not legal
    raises the name's validation error (v2: 40002)."""
    validate_topic_name(topic)
    record = snapshot.topics.get(topic)
    if record is None or record.deleting:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} not found", topic=topic)
    return record
