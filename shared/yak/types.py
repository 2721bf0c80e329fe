"""Value types that several services and the clients share.

Plain ``NamedTuple`` values with no behaviour beyond naming and formatting, so that any module
can name them without importing the component that happens to use them most (a log manager,
a consumer, an assignor). This module imports only the standard library.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import NamedTuple

__all__ = ["TopicPartition", "topic_uuid"]


class TopicPartition(NamedTuple):
    """A partition of a topic: ``(topic, partition)``, hashable and ordered.

    ``str()`` and :attr:`dir_name` give ``<topic>-<partition>``, the name of its folder on a
    broker's disk and the form Kafka's tools print; :meth:`parse` reads that form back.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, dir_name: str) -> TopicPartition | None:
        """``orders-3`` → ``TopicPartition("orders", 3)``; ``None`` for anything else."""
        topic, sep, number = dir_name.rpartition("-")
        if not sep or not topic or not number.isdigit():
            return None
        return cls(topic, int(number))


def topic_uuid(topic_id: str) -> uuid.UUID | None:
    """The 16-byte UUID of a topic id (``TopicRecord.topic_id``), as Kafka's share and metadata
    messages carry it: from Kafka's text form (URL-safe base64 of the 16 bytes, unpadded, as the
    coordinator writes it) or 32 hex digits; None for text that is neither."""
    try:
        if len(topic_id) == 22:
            return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))
        return uuid.UUID(hex=topic_id)
    except (ValueError, binascii.Error):
        return None
